//! The architecture, checked: the `crate::` edges between top-level modules (unit tests aside) follow
//! the table in docs/ARCHITECTURE.md (which must itself have no cycle), and no source file is over 1,200
//! lines. The sibling rule, no circle between the files of one folder, is checked in `siblings`.

mod siblings;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Past this a file is hard to hold in one reading; below it, the sibling rule (`siblings`) decides the cuts.
const MAX_LINES: usize = 1200;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file under src/ belongs to (`transport::soft` etc. counted apart), or None for the
/// crate root and the binaries, which use the library from outside.
fn module_of(rel: &Path) -> Option<String> {
    let parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    match parts.first().map(String::as_str) {
        None | Some("lib") | Some("bin") | Some("main") => None,
        Some("transport") => match parts.get(1).map(String::as_str) {
            Some(sub @ ("soft" | "verbs" | "tcp")) => Some(format!("transport::{sub}")),
            _ => Some("transport".into()),
        },
        Some(top) => Some(top.to_string()),
    }
}

/// Code without comments (line comments, doc comments) and without string literals' contents, so
/// that a `crate::` in prose or in a message is not an edge.
pub(crate) fn code_only(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    for line in src.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if !in_str && c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if c == '"' && prev != '\\' && prev != '\'' {
                in_str = !in_str;
                out.push(c);
            } else if !in_str {
                out.push(c);
            }
            prev = if prev == '\\' && c == '\\' { ' ' } else { c };
        }
        out.push('\n');
    }
    out
}

/// The first one or two path segments of every path a `use` tree starting at `s` names
/// (`{a, b::{c, d}}` gives `a`, `b::c`, `b::d`), up to the end of the tree.
pub(crate) fn tree_paths(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let b = s.as_bytes();
    let mut i = 0;
    let mut segs: Vec<String> = prefix.to_vec();
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'{' {
            i += 1;
            loop {
                i += tree_paths(&s[i..], &segs, out);
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
                if i < b.len() && b[i] == b',' {
                    i += 1;
                    continue;
                }
                if i < b.len() && b[i] == b'}' {
                    i += 1;
                }
                return i;
            }
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i == start {
            if segs.len() > prefix.len() {
                out.push(segs);
            }
            return i;
        }
        segs.push(s[start..i].to_string());
        if s[i..].starts_with("::") {
            i += 2;
            continue;
        }
        out.push(segs);
        return i;
    }
}

/// The top-level modules a source file reaches through `crate::` paths.
fn edges_of(src: &str) -> BTreeSet<String> {
    let code = code_only(src);
    let mut found = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(pos) = rest.find("crate::") {
        let before = rest[..pos].chars().last();
        rest = &rest[pos + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // e.g. `roceperf_crate::`, not ours
        }
        let mut paths = Vec::new();
        tree_paths(rest, &[], &mut paths);
        for p in paths {
            let Some(top) = p.first() else { continue };
            if top == "transport" {
                match p.get(1).map(String::as_str) {
                    Some(sub @ ("soft" | "verbs" | "tcp")) => {
                        found.insert(format!("transport::{sub}"));
                    }
                    _ => {
                        found.insert("transport".to_string());
                    }
                }
            } else if top.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                found.insert(top.clone());
            }
        }
    }
    found
}

/// A file without its unit tests: everything before `#[cfg(test)]` at column 0.
pub(crate) fn non_test_part(text: &str) -> String {
    text.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The allowed edges, from the `<!-- layers -->` block of docs/ARCHITECTURE.md.
fn allowed() -> BTreeMap<String, BTreeSet<String>> {
    let doc = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md"))
        .expect("docs/ARCHITECTURE.md exists");
    let start = doc.find("<!-- layers").expect("the layers block");
    let end = doc
        .find("<!-- /layers -->")
        .expect("the end of the layers block");
    let mut map = BTreeMap::new();
    for line in doc[start..end].lines() {
        let Some((from, to)) = line.split_once("->") else {
            continue;
        };
        let deps = to
            .split(',')
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty() && d != "(none)")
            .collect();
        map.insert(from.trim().to_string(), deps);
    }
    assert!(
        map.len() >= 10,
        "the layers block lists the modules: {map:?}"
    );
    map
}

/// The actual edges between modules, with one file that makes each edge.
fn actual() -> BTreeMap<(String, String), PathBuf> {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let Some(from) = module_of(rel) else { continue };
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue; // unit tests may drive any lower layer (bench's run a real TCP endpoint)
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for to in edges_of(&non_test_part(&text)) {
            if to != from {
                edges
                    .entry((from.clone(), to))
                    .or_insert_with(|| rel.to_path_buf());
            }
        }
    }
    edges
}

fn cycle_in(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let at = stack.iter().position(|s| s == n).unwrap();
                let mut c = stack[at..].to_vec();
                c.push(n.to_string());
                return Some(c);
            }
            _ => {}
        }
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            // A parent module declares its children: `transport` -> `transport::soft` is not a layer edge.
            if m.starts_with(&format!("{n}::")) {
                continue;
            }
            if let Some(c) = visit(m, g, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_documented_layers_have_no_cycle() {
    if let Some(c) = cycle_in(&allowed()) {
        panic!("docs/ARCHITECTURE.md allows a cycle: {}", c.join(" -> "));
    }
}

#[test]
fn every_module_edge_is_one_the_architecture_allows() {
    let allowed = allowed();
    let mut bad = Vec::new();
    for ((from, to), file) in actual() {
        let ok = allowed.get(&from).is_some_and(|deps| deps.contains(&to));
        if !ok {
            bad.push(format!("{from} -> {to} (src/{})", file.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "edges that docs/ARCHITECTURE.md does not allow (change the code, or the document with a reason):\n  {}",
        bad.join("\n  ")
    );
    // Every module in src/ is in the table, so a new one has to be placed.
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    for file in files {
        let rel = file.strip_prefix(root().join("src")).unwrap();
        if let Some(m) = module_of(rel) {
            assert!(
                allowed.contains_key(&m),
                "module {m} (src/{}) is not in the layers table",
                rel.display()
            );
        }
    }
}

#[test]
fn no_source_file_is_over_1200_lines() {
    let mut files = Vec::new();
    for dir in ["src", "examples", "fuzz/fuzz_targets"] {
        rust_files(&root().join(dir), &mut files);
    }
    let mut long = Vec::new();
    for file in files {
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue; // a module's unit tests, moved beside it
        }
        let text = std::fs::read_to_string(&file).unwrap();
        // Unit tests at the end of a file (`#[cfg(test)]` at column 0) are not counted.
        let code = non_test_part(&text).lines().count();
        if code > MAX_LINES {
            long.push(format!(
                "{} ({code} lines)",
                file.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(
        long.is_empty(),
        "source files over {MAX_LINES} lines: split them by room:\n  {}",
        long.join("\n  ")
    );
}

#[test]
fn the_edge_reader_sees_nested_use_trees_and_ignores_prose() {
    let src = "//! see crate::report\nuse crate::{params::RunMode, transport::{soft::x, Endpoint}};\n\
               fn f() { let s = \"crate::gate\"; crate::stats::mean(); }\n";
    let e = edges_of(src);
    let want: BTreeSet<String> = ["params", "transport::soft", "transport", "stats"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(e, want);
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert!(cycle_in(&g).is_some());
}
