//! No circle between sibling files: within one folder of `src/`, the files (and sub-folders) that sit
//! side by side may use each other in one direction only. What two siblings both need belongs to
//! their parent module (the folder's `mod.rs` or `<folder>.rs`), which every child may use.
//!
//! An edge `a -> b` inside folder `f` is any `super::b`, `crate::f::b` (or deeper `super::super::`)
//! path in a file of `f/a` (unit tests aside) that names `f/b`, or a name the parent module imports
//! from `b` (`use b::Thing;` in the parent, then `super::Thing` in `a`), so that a re-export does not
//! hide a circle.

use super::{code_only, non_test_part, rust_files, tree_paths};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The module path of a library file (`app/rdma_cm/hello.rs` is `app::rdma_cm::hello`, `app.rs` and
/// `app/mod.rs` are `app`); None for the binaries.
fn module_path(rel: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    Some(parts)
}

/// Every path a file names through `crate::`, `super::` or `self::`, made absolute.
fn paths_named(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        let mut rest = code;
        while let Some(pos) = rest.find(start) {
            let before = rest[..pos].chars().last();
            let tail = &rest[pos..];
            rest = &rest[pos + start.len()..];
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue; // `x::super::` is part of a path already read; `my_crate::` is not ours
            }
            let mut found = Vec::new();
            tree_paths(tail, &[], &mut found);
            for p in found {
                if let Some(abs) = absolute(&p, module) {
                    out.push(abs);
                }
            }
        }
    }
    out
}

/// `p` (starting with `crate`, `self` or a run of `super`) as a path from the crate root.
fn absolute(p: &[String], module: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = match p.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("self") => module.to_vec(),
        Some("super") => module.to_vec(),
        _ => return None,
    };
    let mut rest = &p[1..];
    if p[0] == "super" {
        base.pop()?;
        while rest.first().is_some_and(|s| s == "super") {
            base.pop()?;
            rest = &rest[1..];
        }
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// The names a module file imports from one of its children: `use child::{A, b::C}` gives A and C
/// (or the `as` name) -> child.
fn imports_from_children(code: &str, children: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in code.split(';') {
        let t = line.trim();
        let Some(pos) = t.find("use ") else { continue };
        if !(pos == 0 || t[..pos].trim_end().ends_with(')') || t[..pos].trim() == "pub") {
            continue;
        }
        let tree = t[pos + 4..].trim().trim_start_matches("self::");
        let mut found = Vec::new();
        tree_paths(tree, &[], &mut found);
        for p in found {
            if p.len() >= 2 && children.contains(&p[0]) {
                let name = match tree.find(&format!("{} as ", p[p.len() - 1])) {
                    Some(i) => tree[i..]
                        .split_whitespace()
                        .nth(2)
                        .unwrap_or("")
                        .trim_matches(|c: char| !c.is_alphanumeric() && c != '_')
                        .to_string(),
                    None => p[p.len() - 1].clone(),
                };
                map.insert(name, p[0].clone());
            }
        }
    }
    map
}

/// For every folder, its children and the edges between them, each with a file that makes it.
type FolderEdges = BTreeMap<Vec<String>, BTreeMap<(String, String), String>>;

fn sibling_edges() -> FolderEdges {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut code_of: BTreeMap<Vec<String>, (String, String)> = BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(src()).unwrap();
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue; // a module's unit tests may use anything beside it
        }
        let Some(m) = module_path(rel) else { continue };
        let text = std::fs::read_to_string(file).unwrap();
        code_of.insert(
            m,
            (code_only(&non_test_part(&text)), rel.display().to_string()),
        );
    }
    let modules: BTreeSet<Vec<String>> = code_of.keys().cloned().collect();
    let children = |folder: &[String]| -> BTreeSet<String> {
        modules
            .iter()
            .filter(|m| m.len() == folder.len() + 1 && m.starts_with(folder))
            .map(|m| m[folder.len()].clone())
            .collect()
    };
    let mut reexports: BTreeMap<Vec<String>, BTreeMap<String, String>> = BTreeMap::new();
    for (m, (code, _)) in &code_of {
        let kids = children(m);
        if !kids.is_empty() {
            reexports.insert(m.clone(), imports_from_children(code, &kids));
        }
    }
    let mut edges: FolderEdges = BTreeMap::new();
    for (m, (code, rel)) in &code_of {
        for target in paths_named(code, m) {
            // At every folder above this file: which child holds the file, which one the path names.
            for depth in 0..m.len() {
                let folder = &m[..depth];
                let from = &m[depth];
                if !target.starts_with(folder) || target.len() <= depth {
                    continue;
                }
                let named = &target[depth];
                let to = if children(folder).contains(named) {
                    Some(named.clone())
                } else {
                    reexports.get(folder).and_then(|r| r.get(named)).cloned()
                };
                if let Some(to) = to.filter(|t| t != from) {
                    edges
                        .entry(folder.to_vec())
                        .or_default()
                        .entry((from.clone(), to))
                        .or_insert_with(|| rel.clone());
                }
            }
        }
    }
    edges
}

/// The groups of siblings that reach each other (strongly connected, more than one file each).
fn knots(edges: &BTreeMap<(String, String), String>) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&String> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for (a, b) in edges.keys() {
                if *a == n && seen.insert(b.clone()) {
                    todo.push(b.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for n in &nodes {
        let knot: BTreeSet<String> = reaches[n]
            .iter()
            .filter(|m| reaches[m].contains(*n))
            .cloned()
            .collect();
        if knot.len() > 1 && !out.contains(&knot) {
            out.push(knot);
        }
    }
    out
}

#[test]
fn no_folder_has_a_circle_between_its_files() {
    let mut bad = Vec::new();
    for (folder, edges) in sibling_edges() {
        for knot in knots(&edges) {
            let inside: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| knot.contains(a) && knot.contains(b))
                .map(|((a, b), file)| format!("{a} -> {b} (src/{file})"))
                .collect();
            bad.push(format!(
                "src/{}: {{{}}}: {}",
                folder.join("/"),
                knot.into_iter().collect::<Vec<_>>().join(", "),
                inside.join(", ")
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "sibling files that use each other (move what both need to their parent module, or let one \
         own it):\n  {}",
        bad.join("\n  ")
    );
}

#[test]
fn the_sibling_reader_resolves_super_crate_and_parent_imports() {
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    let code = "use super::{plan::Plan, exit::Error};\nfn f() { crate::app::notes::x(); super::super::cli::y(); }\n";
    let got = paths_named(code, &m("app::report"));
    assert!(got.contains(&m("app::plan::Plan")), "{got:?}");
    assert!(got.contains(&m("app::exit::Error")), "{got:?}");
    assert!(got.contains(&m("app::notes::x")), "{got:?}");
    assert!(got.contains(&m("cli::y")), "{got:?}");
    let kids: BTreeSet<String> = ["exit", "plan"].iter().map(|s| s.to_string()).collect();
    let map = imports_from_children(
        "pub use exit::{Error, Code as ExitCode};\nuse plan::Plan;\n",
        &kids,
    );
    assert_eq!(map.get("Error").map(String::as_str), Some("exit"));
    assert_eq!(map.get("ExitCode").map(String::as_str), Some("exit"));
    assert_eq!(map.get("Plan").map(String::as_str), Some("plan"));
    let mut e = BTreeMap::new();
    e.insert(("a".to_string(), "b".to_string()), String::new());
    e.insert(("b".to_string(), "c".to_string()), String::new());
    assert!(knots(&e).is_empty());
    e.insert(("c".to_string(), "a".to_string()), String::new());
    let all: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    assert_eq!(knots(&e), [all]);
}
