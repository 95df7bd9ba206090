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
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/carrier");
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
