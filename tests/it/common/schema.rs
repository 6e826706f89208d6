//! The documented formats of what the binaries write: the JSON Schemas of `results/schema/` and the golden
//! CSV headers of `tests/data/golden/`, checked against real output.

use super::json_file;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `results/schema/<name>.json` (`result` or `compare`), parsed.
pub fn schema(name: &str) -> Value {
    json_file(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("results/schema")
            .join(format!("{name}.json")),
    )
}

/// Panics, listing every violation, unless `doc` (from `what`) is valid against schema `name`.
pub fn assert_valid(name: &str, doc: &Value, what: &str) {
    let schema = schema(name);
    let validator = jsonschema::validator_for(&schema)
        .unwrap_or_else(|e| panic!("results/schema/{name}.json is not a valid JSON Schema: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("  at {}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match results/schema/{name}.json:\n{}",
        errors.join("\n")
    );
}

/// Reads a JSON file and checks it against schema `name`; returns it.
pub fn assert_valid_file(name: &str, path: &Path) -> Value {
    let doc = json_file(path);
    assert_valid(name, &doc, &path.display().to_string());
    doc
}

/// `tests/data/golden/<name>.csv`: the header line a CSV of that kind must start with.
pub fn golden_csv_header(name: &str) -> String {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/golden")
        .join(format!("{name}.csv"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().next().unwrap_or_default().to_owned()
}

/// Panics unless the CSV file at `path` starts with the golden header `name`.
pub fn assert_csv_header(name: &str, path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        text.lines().next().unwrap_or_default(),
        golden_csv_header(name),
        "{}: header differs from tests/data/golden/{name}.csv",
        path.display()
    );
}

/// A run's CSV at `path`, its header checked against the golden one: the header and the rows.
pub fn result_csv(path: &Path) -> (::csv::StringRecord, Vec<::csv::StringRecord>) {
    assert_csv_header("result", path);
    let mut rdr = ::csv::Reader::from_path(path).unwrap();
    let h = rdr.headers().unwrap().clone();
    let recs = rdr.records().map(Result::unwrap).collect();
    (h, recs)
}
