//! The module layers point one way: the carrier handle and class identity (`src/carrier/`)
//! never name the shipped carriers or the extension surface (`src/carriers/`), which build on
//! them.

use std::fs;
use std::path::Path;

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).expect("the source directory is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn the_carrier_module_imports_nothing_from_the_carriers_module() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../strideweave-core/src/carrier");
    let mut files = Vec::new();
    sources(&dir, &mut files);
    assert!(
        files.len() >= 5,
        "expected the carrier module's files, found {files:?}"
    );
    let mut offending = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).expect("a readable source file");
        for (number, line) in text.lines().enumerate() {
            if line.contains("crate::carriers") || line.contains("super::carriers") {
                offending.push(format!(
                    "{}:{}: {}",
                    file.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        offending.is_empty(),
        "src/carrier/ must not name src/carriers/:\n{}",
        offending.join("\n")
    );
}

/// The core's top-level modules from the bottom layer up: a module may name modules of its
/// own layer or below it (docs/architecture.md, "Layers inside the core").
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["limits", "parallelism", "dtype"],
    &["carrier"],
    &["tensor"],
    &["operation", "extension"],
    &["movement"],
    &["autograd"],
    &["ops"],
    &["kernels"],
    &["carriers", "internal"],
];

/// The upward imports the core still has, as (source file under `src/`, module it names).
/// The layering work removes them one by one; the list only ever shrinks, and the test below
/// fails both on a new upward import and on an entry that no longer exists.
const KNOWN_UPWARD: &[(&str, &str)] = &[
    ("autograd/materialize.rs", "ops"),
    ("autograd/rules.rs", "carriers"),
    ("autograd/rules.rs", "ops"),
    ("carrier/definition_free.rs", "operation"),
    ("carrier/handle.rs", "operation"),
    ("carrier/mod.rs", "operation"),
    ("carrier/scatter.rs", "operation"),
    ("carrier/scatter.rs", "tensor"),
    ("error.rs", "autograd"),
    ("error.rs", "carrier"),
    ("error.rs", "dtype"),
    ("extension/composite.rs", "autograd"),
    ("extension/transfer.rs", "movement"),
    ("movement/asynchronous.rs", "autograd"),
    ("operation/builtin/arithmetic.rs", "ops"),
    ("operation/builtin/extremum.rs", "ops"),
    ("operation/builtin/matmul.rs", "ops"),
    ("operation/builtin/recent_resolutions.rs", "carriers"),
    ("operation/builtin/recent_resolutions.rs", "ops"),
    ("operation/builtin/reduction.rs", "ops"),
    ("operation/builtin/select.rs", "ops"),
    ("operation/builtin/unary.rs", "ops"),
    ("operation/builtin/vjp.rs", "ops"),
    ("operation/dispatch.rs", "autograd"),
    ("tensor/f32_values.rs", "carriers"),
    ("tensor/representation.rs", "autograd"),
    ("tensor/views.rs", "autograd"),
];

/// The top-level modules a source text names through `crate::` paths, comments excluded:
/// `crate::a::…` gives `a`, and `crate::{a::…, b}` gives `a` and `b`.
fn named_modules(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let identifier = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut named = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1usize;
            let mut entry = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => {
                        named.push(identifier(&entry));
                        entry.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
                if depth == 1 {
                    entry.push(c);
                }
            }
            named.push(identifier(&entry));
        } else {
            named.push(identifier(rest));
        }
    }
    named.retain(|m| !m.is_empty());
    named
}

#[test]
fn the_core_imports_only_downward_apart_from_the_listed_debts() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../strideweave-core/src");
    let layer_of = |module: &str| LAYERS.iter().position(|layer| layer.contains(&module));
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut found = Vec::new();
    let mut unplaced = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        if relative == "lib.rs" {
            continue;
        }
        let own = relative
            .split('/')
            .next()
            .expect("a first component")
            .trim_end_matches(".rs")
            .to_string();
        let Some(own_layer) = layer_of(&own) else {
            unplaced.push(own);
            continue;
        };
        let text = fs::read_to_string(file).expect("a readable source file");
        let mut named = named_modules(&text);
        named.sort();
        named.dedup();
        for module in named {
            if layer_of(&module).is_some_and(|layer| layer > own_layer) {
                found.push((relative.clone(), module));
            }
        }
    }
    unplaced.sort();
    unplaced.dedup();
    assert!(
        unplaced.is_empty(),
        "top-level modules of the core with no layer in LAYERS: {unplaced:?}"
    );
    let known: Vec<(String, String)> = KNOWN_UPWARD
        .iter()
        .map(|(f, m)| (f.to_string(), m.to_string()))
        .collect();
    let new: Vec<_> = found.iter().filter(|e| !known.contains(e)).collect();
    assert!(
        new.is_empty(),
        "imports that run upward (file under src/, module it names): {new:?}"
    );
    let gone: Vec<_> = known.iter().filter(|e| !found.contains(e)).collect();
    assert!(
        gone.is_empty(),
        "KNOWN_UPWARD lists imports that no longer exist; remove them: {gone:?}"
    );
}

#[test]
fn the_module_reader_sees_single_and_grouped_paths_and_skips_comments() {
    let text = "use crate::a::B;\n// use crate::z::Y;\nuse crate::{c::{D, E}, f, g::H};\nlet x = crate::i::j();\n";
    assert_eq!(named_modules(text), ["a", "c", "f", "g", "i"]);
}

/// The source files of crate `name` of the workspace: `src/`, `tests/`, `examples/`, `benches/`.
fn crate_sources(name: &str) -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name);
    let mut files = Vec::new();
    for dir in ["src", "tests", "examples", "benches"] {
        let dir = root.join(dir);
        if dir.is_dir() {
            sources(&dir, &mut files);
        }
    }
    files
}

/// Users and the crates above the front door name `strideweave::…` paths only, and the
/// framework's internal hooks reach no crate but TiledEvictable's (docs/architecture.md).
#[test]
fn only_the_front_door_and_the_tiled_crate_name_the_core_and_only_tiled_its_internals() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut names: Vec<String> = fs::read_dir(&crates)
        .expect("the crates directory is readable")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.starts_with("strideweave"))
        .collect();
    names.sort();
    assert!(
        names.len() >= 8 && names.iter().any(|n| n == "strideweave-tiled"),
        "expected the workspace's crates, found {names:?}"
    );
    let mut offending = Vec::new();
    for name in &names {
        let (core_allowed, internal_allowed) = match name.as_str() {
            "strideweave-core" | "strideweave-tiled" => (true, true),
            "strideweave" => (true, false),
            _ => (false, false),
        };
        for file in crate_sources(name) {
            let text = fs::read_to_string(&file).expect("a readable source file");
            for (number, line) in text.lines().enumerate() {
                let names_core = line.contains("strideweave_core");
                // Spelled in two parts so this file does not name the module itself.
                let names_internal = line.contains(concat!("strideweave_core", "::internal"));
                if (names_core && !core_allowed) || (names_internal && !internal_allowed) {
                    offending.push(format!(
                        "{}:{}: {}",
                        file.display(),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        offending.is_empty(),
        "only crates/strideweave and crates/strideweave-tiled may name strideweave_core, \
         and only the latter its internal module:\n{}",
        offending.join("\n")
    );
}
