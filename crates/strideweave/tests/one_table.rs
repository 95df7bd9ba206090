//! One table per operation (docs/operations.md, The table of built-ins): a built-in is its
//! entry in `strideweave-core/src/operation/builtin/`, its kernels and its gradient rule.
//! Every other list of built-ins is derived from the table or checked against it by a test,
//! so adding a built-in needs nothing else listed.
//!
//! The check reads the workspace's sources (tests, `#[cfg(test)]` modules and the listed
//! kernels excepted) and fails on a file that lists several built-ins — by `Builtin::Variant`,
//! a `"name"` pattern or list item, a `name(Variant)` macro entry, or a Python `name as name`
//! re-export — unless it is one of the few files a test checks against the table, each listed
//! below with that test.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use strideweave::operation::Builtin;

/// A file naming this many distinct built-ins lists them (one or two are a particular
/// operation's business: `mul`'s swapped scalar, a matmul-only path).
const LISTING: usize = 3;

/// The table itself: the entries and their gradient rules.
const TABLE: &str = "crates/strideweave-core/src/operation/builtin/";

/// Kernels: a carrier's kernels are one per built-in by nature.
const KERNELS: &[&str] = &["crates/strideweave-wgpu/src/kernels/"];

/// The files that list built-ins because a language needs each one spelled out, each with the
/// test that checks it against the table.
const CHECKED: &[(&str, &str)] = &[
    (
        "crates/strideweave-core/src/ops.rs",
        "every_builtin_has_a_typed_function_in_ops (below)",
    ),
    (
        "python/strideweave/__init__.py",
        "tests/python/test_builtin_table.py::test_the_package_reexports_every_builtin",
    ),
    (
        "python/strideweave/operation.py",
        "tests/python/test_builtin_table.py::test_the_package_reexports_every_builtin",
    ),
];

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` and `.py` file under `dir`, recursively, skipping tests, benchmarks and
/// examples (which use built-ins, and list none for the runtime).
fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !matches!(
                name,
                "tests" | "benches" | "examples" | "target" | "__pycache__"
            ) {
                sources(&path, found);
            }
        } else if path.extension().is_some_and(|e| e == "rs" || e == "py") {
            found.push(path);
        }
    }
}

/// `text` without its `#[cfg(test)]` modules (they sit at the end of a file).
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

/// Whether `text[at..]` starts a whole word (the characters around it are not identifier
/// characters).
fn whole(text: &str, at: usize, len: usize) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let before = text[..at].chars().next_back().is_none_or(|c| !ident(c));
    let after = text[at + len..].chars().next().is_none_or(|c| !ident(c));
    before && after
}

/// Whether `text` has `needle` as a whole word (not inside a longer identifier).
fn has_word(text: &str, needle: &str) -> bool {
    text.match_indices(needle)
        .any(|(at, _)| whole(text, at, needle.len()))
}

/// Whether `text` has a line holding only `item` (a list item such as `    "add",`).
fn list_item(text: &str, item: &str) -> bool {
    text.lines().any(|line| line.trim() == item)
}

/// The built-ins `text` names in a listing form: `Builtin::Variant`, a `"name"` pattern
/// alternative or match arm, a `name(Variant)` macro entry, or (Python) a `name as name`
/// re-export or a `"name",` list item. A call by name (`call("add", …)`) uses a built-in and
/// lists nothing.
fn named(text: &str) -> BTreeSet<&'static str> {
    Builtin::ALL
        .into_iter()
        .filter(|b| {
            let (name, variant) = (b.name(), format!("{b:?}"));
            [
                format!("Builtin::{variant}"),
                format!("\"{name}\" |"),
                format!("| \"{name}\""),
                format!("\"{name}\" =>"),
                format!("{name}({variant})"),
                format!("{name} as {name}"),
            ]
            .iter()
            .any(|form| has_word(text, form))
                || list_item(text, &format!("\"{name}\","))
                || list_item(text, &format!("'{name}',"))
        })
        .map(Builtin::name)
        .collect()
}

/// The files outside the table, the kernels and the checked files that list built-ins.
fn listing_files() -> Vec<String> {
    let root = root();
    let mut files = Vec::new();
    sources(&root.join("crates"), &mut files);
    sources(&root.join("python/strideweave"), &mut files);
    let mut listing = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(&root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        let allowed = relative.starts_with(TABLE)
            || KERNELS.iter().any(|k| relative.starts_with(k))
            || CHECKED.iter().any(|(path, _)| relative == *path);
        if allowed {
            continue;
        }
        let text = fs::read_to_string(&file).expect("a readable source file");
        let names = named(without_tests(&text));
        if names.len() >= LISTING {
            listing.push(format!("{relative}: {names:?}"));
        }
    }
    listing
}

#[test]
fn nothing_outside_the_table_its_kernels_and_the_checked_files_lists_builtins() {
    let listing = listing_files();
    assert!(
        listing.is_empty(),
        "these files list built-ins; derive the list from the table (Builtin::ALL and the \
         entry's accessors) or check the file against it by a test:\n{}",
        listing.join("\n")
    );
}

#[test]
fn the_listing_check_recognises_each_form() {
    let rust = "match b { Builtin::Add => 1, Builtin::Neg => 2, Builtin::Matmul => 3 }";
    assert_eq!(
        named(rust),
        BTreeSet::from(["add", "matmul", "neg"]),
        "Builtin::Variant"
    );
    assert_eq!(
        named(r#"match op { "exp" | "log" => 1, "select" => 2 }"#),
        BTreeSet::from(["exp", "log", "select"])
    );
    assert_eq!(
        named("from ._native import abs as abs\nfrom ._native import le as le"),
        BTreeSet::from(["abs", "le"])
    );
    assert_eq!(
        named("unary! { neg(Neg); relu(Relu); }"),
        BTreeSet::from(["neg", "relu"])
    );
    assert_eq!(
        named("__all__ = [\n    \"sqrt\",\n    \"tanh\",\n]"),
        BTreeSet::from(["sqrt", "tanh"])
    );
    // Calls by name and words that merely contain a name are not listings.
    let uses =
        r#"call("add", ops, &[]); call("matmul", ops, &[]); ops::neg(&x); let sub_total = 1;"#;
    assert!(named(uses).is_empty());
    assert!(named("Builtin::AddAll; \"lt_or_eq\" | x").is_empty());
    // Test modules are not read.
    assert_eq!(
        without_tests("fn f() {}\n#[cfg(test)]\nmod tests { Builtin::Add }"),
        "fn f() {}\n"
    );
}

#[test]
fn every_checked_file_exists_and_still_lists_builtins() {
    for (path, test) in CHECKED {
        let text = fs::read_to_string(root().join(path))
            .unwrap_or_else(|e| panic!("{path} (checked by {test}) is unreadable: {e}"));
        assert!(
            named(without_tests(&text)).len() >= LISTING,
            "{path} no longer lists built-ins: drop it from CHECKED"
        );
    }
}

#[test]
fn every_builtin_has_a_typed_function_in_ops() {
    let text = fs::read_to_string(root().join("crates/strideweave-core/src/ops.rs"))
        .expect("ops.rs is readable");
    for builtin in Builtin::ALL {
        let (name, variant) = (builtin.name(), format!("{builtin:?}"));
        let declared = text.contains(&format!("pub fn {name}("))
            || text.contains(&format!("    {name}({variant});"));
        assert!(declared, "ops.rs declares no function for '{name}'");
    }
}
