//! The repository carries everything its code, tests and scripts use: nothing under src/, tests/ or
//! scripts/ names a path outside the clone (a sibling `shared/` folder, the development machine's
//! absolute paths, or the variable that once pointed at them). A fresh clone with nothing beside it runs.

use std::path::{Path, PathBuf};

/// Every file under `dir`, recursively.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn nothing_names_a_path_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Spelt in pieces so that this file does not match itself.
    let forbidden = [
        format!("..{}shared", '/'),
        format!("{}work{}", '/', '/'),
        format!("ROCEPERF_{}", "SHARED"),
    ];
    let mut all = Vec::new();
    for dir in ["src", "tests", "scripts", ".ci"] {
        files(&root.join(dir), &mut all);
    }
    all.push(root.join("Cargo.toml"));
    all.push(root.join("fuzz/Cargo.toml"));
    assert!(all.len() > 100, "walked too few files: {}", all.len());
    let mut found = Vec::new();
    for path in &all {
        // Binary files (pcaps, fuzz seeds) are data, not references.
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            for f in &forbidden {
                if line.contains(f.as_str()) {
                    let rel = path.strip_prefix(root).unwrap();
                    found.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "paths outside the repository:\n{}",
        found.join("\n")
    );
}

/// The data the tests read is in the repository (the vectors and captures of tests/data/vectors).
#[test]
fn the_reference_vectors_are_in_the_repository() {
    let dir = crate::vectors::vectors_dir();
    assert!(
        dir.starts_with(env!("CARGO_MANIFEST_DIR")),
        "{}",
        dir.display()
    );
    assert!(crate::vectors::vector_names().len() >= 11);
    for f in [
        "rc_write_bw_3000B_x5.pcap",
        "rc_read_bw_3000B_x5.pcap",
        "rc_send_bw_3000B_x5.pcap",
    ] {
        assert!(crate::vectors::rxe_pcap(f).is_file(), "{f}");
    }
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    for name in crate::vectors::vector_names() {
        assert!(
            readme.contains(&format!("`{name}.hex`")),
            "README says nothing of {name}"
        );
    }
}
