//! `roce_compare --from`: a comparison set from result files made elsewhere.
//!
//! The files (runs' `--json` or `--results` files, earlier `compare.json`s) are read by
//! `crate::results`; what is wrong with one is said here in roce_compare's words. Runs of one test,
//! transport, RoCE version and side at different sizes merge into one curve; runs that still share a
//! label are told apart by side, else by file.

use crate::params::Role;
use crate::results::congestion::CONGESTION_SCHEMA;
use crate::results::fabric::FABRIC_SCHEMA;
use crate::results::json::COMPARE_SCHEMA;
use crate::results::read::{self, DocKind, Document, ReadError, SchemaError};
use crate::results::{CompareRun, CompareSet, RunInfo, role_name};
use std::path::Path;

/// What is wrong with a document given as a run's results, as roce_compare says it.
fn problem_text(problem: &SchemaError) -> String {
    match problem {
        SchemaError::NotAnObject | SchemaError::NoSchema | SchemaError::SchemaNotAString(_) => {
            not_a_result(None)
        }
        SchemaError::UnknownSchema(s) => not_a_result(Some(s)),
        SchemaError::Version {
            kind: kind @ (DocKind::Run | DocKind::Compare),
            found,
        } => SchemaError::version_text(*kind, *found, "roce_compare"),
        SchemaError::Test { source, .. } => {
            format!("\"test\" is not a roceperf run description: {source}")
        }
        SchemaError::Results { source, .. } => format!("\"results\" cannot be read: {source}"),
        SchemaError::Comparison(e) => e.to_string(),
        SchemaError::Version {
            kind: DocKind::Fabric,
            ..
        }
        | SchemaError::Fabric(_) => not_a_result(Some(FABRIC_SCHEMA)),
        SchemaError::Version {
            kind: DocKind::Congestion,
            ..
        }
        | SchemaError::Congestion(_) => not_a_result(Some(CONGESTION_SCHEMA)),
    }
}

/// `not a roceperf result (schema "x"); give the JSON ...`.
fn not_a_result(schema: Option<&str>) -> String {
    format!(
        "not a roceperf result (schema {}); give the JSON a run wrote with --json or --results",
        schema.map_or("missing".to_string(), |s| format!("{s:?}"))
    )
}

/// The run of a `roceperf.result` document and its description (the side that wrote it, its MTU);
/// the error says, in roce_compare's words, what is wrong with the document.
pub(crate) fn run_of(
    doc: Result<Document, SchemaError>,
) -> Result<(CompareRun, Box<RunInfo>), String> {
    match doc {
        Ok(Document::Run { info, results }) => {
            if results.is_empty() {
                return Err("it holds no results".into());
            }
            Ok((CompareRun::from_run(&info, results), info))
        }
        Ok(Document::Fabric(_)) => Err(not_a_result(Some(FABRIC_SCHEMA))),
        Ok(Document::Congestion(_)) => Err(not_a_result(Some(CONGESTION_SCHEMA))),
        // A comparison where a run's results were expected, whatever its state.
        Ok(Document::Compare(_))
        | Err(SchemaError::Version {
            kind: DocKind::Compare,
            ..
        })
        | Err(SchemaError::Comparison(_)) => Err(not_a_result(Some(COMPARE_SCHEMA))),
        Err(problem) => Err(problem_text(&problem)),
    }
}

/// A run with where it came from, to merge sizes and tell duplicates apart.
pub(crate) struct Loaded {
    run: CompareRun,
    role: Option<Role>,
    file: String,
}

/// The runs of one file: a run's result JSON, or every run of a `compare.json`. The error names the
/// file and what is wrong with it.
pub(crate) fn load(path: &Path) -> Result<Vec<Loaded>, String> {
    let doc = match read::read_json(path) {
        Ok(doc) => Ok(doc),
        Err(ReadError::Schema { problem, .. }) => Err(problem),
        Err(ReadError::Read { source, .. }) => {
            return Err(format!(
                "cannot read {}; check the path (and that the run that writes it succeeded): {source}",
                path.display()
            ));
        }
        Err(ReadError::Json { source, .. }) => {
            return Err(format!("{} is not valid JSON: {source}", path.display()));
        }
        Err(
            e
            @ (ReadError::Csv { .. } | ReadError::NotAResult { .. } | ReadError::Unbounded { .. }),
        ) => return Err(e.to_string()),
    };
    let file = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let in_file = |e: String| format!("{}: {e}", path.display());
    match doc {
        Ok(Document::Compare(set)) => Ok(set
            .runs
            .into_iter()
            .map(|run| Loaded {
                run,
                role: None,
                file: file.clone(),
            })
            .collect()),
        Err(
            problem @ (SchemaError::Version {
                kind: DocKind::Compare,
                ..
            }
            | SchemaError::Comparison(_)),
        ) => Err(in_file(problem_text(&problem))),
        doc => {
            let (run, info) = run_of(doc).map_err(in_file)?;
            let role = info.role;
            Ok(vec![Loaded {
                run,
                role: Some(role),
                file,
            }])
        }
    }
}

/// Reads every file; all their runs, or one message per file that cannot be used.
pub(crate) fn load_all(paths: &[impl AsRef<Path>]) -> Result<Vec<Loaded>, Vec<String>> {
    crate::results::read::load_every(paths, |p| load(p.as_ref()))
}

/// Merges runs of the same test, transport, RoCE version and side (their sizes join one curve), and
/// gives the rest distinct labels.
pub(crate) fn assemble(loaded: Vec<Loaded>) -> Vec<CompareRun> {
    let mut merged: Vec<Loaded> = Vec::new();
    for l in loaded {
        let same = merged.iter_mut().find(|m| {
            m.run.test == l.run.test
                && m.run.transport == l.run.transport
                && m.run.roce == l.run.roce
                && m.role == l.role
                && m.run.label == l.run.label
                && m.run.link == l.run.link
                && l.run.results.iter().all(|r| m.run.at(r.size).is_none())
        });
        match same {
            Some(m) => {
                m.run.results.extend(l.run.results);
                m.run.results.sort_by_key(|r| r.size);
                m.run.repetitions.extend(l.run.repetitions);
                m.run.repetitions.sort_by_key(|r| r.size);
            }
            None => merged.push(l),
        }
    }
    // Still two runs with one (test, label): tell them apart by side, else by file.
    for i in 0..merged.len() {
        let clash: Vec<usize> = (0..merged.len())
            .filter(|&j| {
                merged[j].run.test == merged[i].run.test
                    && merged[j].run.label == merged[i].run.label
            })
            .collect();
        if clash.len() > 1 {
            let roles_differ = clash.iter().any(|&j| merged[j].role != merged[i].role);
            for j in clash {
                let suffix = match merged[j].role {
                    Some(role) if roles_differ => role_name(role).to_owned(),
                    _ => merged[j].file.clone(),
                };
                merged[j].run.label = format!("{} [{suffix}]", merged[j].run.label);
            }
        }
    }
    let mut set = CompareSet {
        runs: merged.into_iter().map(|m| m.run).collect(),
        ..CompareSet::default()
    };
    let tests = set.tests();
    set.sort_runs(&tests);
    set.runs
}

/// The comparison set of `paths`, started now by this version.
pub(crate) fn compare_files(paths: &[impl AsRef<Path>]) -> Result<CompareSet, Vec<String>> {
    Ok(CompareSet {
        started_at: crate::results::now_rfc3339(),
        version: env!("CARGO_PKG_VERSION").into(),
        provenance: Some(crate::results::Provenance::of_this_process(None)),
        runs: assemble(load_all(paths)?),
        ..CompareSet::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::read::parse_json;
    use crate::results::testdata::{bw_info, bw_result, set};
    use serde_json::json;

    fn words(doc: serde_json::Value) -> String {
        run_of(parse_json(doc)).unwrap_err()
    }

    #[test]
    fn problems_are_said_in_roce_compares_words() {
        assert!(words(json!([1])).starts_with("not a roceperf result (schema missing); give"));
        assert!(words(json!({"schema": "x"})).starts_with("not a roceperf result (schema \"x\")"));
        let run = crate::results::to_json(&bw_info(), &[bw_result()]);
        let mut doc = run.clone();
        doc["schema_version"] = json!(2);
        assert_eq!(
            words(doc),
            "result schema_version 2 is not supported (this roce_compare reads version 1); use the \
             roce_compare of the roceperf version that wrote it"
        );
        let mut doc = run.clone();
        doc["test"] = json!(5);
        assert_eq!(
            words(doc),
            "\"test\" is not a roceperf run description: invalid type: integer `5`, expected struct RunInfo"
        );
        let mut doc = run.clone();
        doc["results"] = json!([]);
        assert_eq!(words(doc), "it holds no results");
        assert!(words(set().to_json()).contains("(schema \"roceperf.compare\")"));
        let (got, info) = run_of(parse_json(run)).unwrap();
        assert_eq!(
            (got.label.as_str(), info.role),
            ("RoCE v2 (soft)", Role::Client)
        );
    }

    #[test]
    fn sizes_merge_and_clashing_labels_are_told_apart() {
        let one = |size: u64, role: Role, file: &str| Loaded {
            run: CompareRun {
                results: vec![crate::results::testdata::bw(size, 10.0)],
                ..CompareRun::from_run(&bw_info(), vec![])
            },
            role: Some(role),
            file: file.into(),
        };
        let runs = assemble(vec![
            one(4096, Role::Client, "a.json"),
            one(65536, Role::Client, "b.json"),
            one(4096, Role::Server, "c.json"),
        ]);
        let labels: Vec<&str> = runs.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            ["RoCE v2 (soft) [client]", "RoCE v2 (soft) [server]"]
        );
        assert_eq!(runs[0].results.len(), 2);
    }
}
