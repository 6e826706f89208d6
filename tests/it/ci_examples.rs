//! The CI examples in docs/examples/ run as written: each job's steps in a shell, in an empty
//! temporary directory, with the binaries this build made on PATH, so that every path a step reads
//! (a baseline, `results/*/compare.json`, the JUnit report the runner publishes) is one the steps
//! before it made. What only a real runner has (its actions, the package install, cargo's build) is
//! skipped, and the test says so on stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use yaml_rust2::{Yaml, YamlLoader};

/// The examples run one at a time: both pin roce_compare's two sides to the same two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// One file of docs/examples/, parsed.
fn example(name: &str) -> Yaml {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/examples")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(docs.len(), 1, "{name}: one YAML document");
    docs.remove(0)
}

/// Where cargo put the binaries under test.
fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_roce_gate"))
        .parent()
        .unwrap()
        .to_owned()
}

/// Runs `script` as a CI runner's bash does (`-eo pipefail`) in `dir`, the binaries first on PATH.
fn shell(dir: &Path, script: &str, env: &[(&str, String)]) -> Output {
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("timeout")
        .args([
            "900",
            "bash",
            "--noprofile",
            "--norc",
            "-eo",
            "pipefail",
            "-c",
        ])
        .arg(script)
        .current_dir(dir)
        .env("PATH", path)
        .env("CI", "true")
        .env_remove("GITHUB_ACTIONS")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap()
}

/// Checks a step's exit: a gate's verdict rests on timing, so 0 (pass) or 1 (a check failed) are
/// both the example working; anything else, and any other step's failure, is the example broken.
#[track_caller]
fn expect_ran(what: &str, script: &str, out: &Output) {
    let code = out.status.code();
    let verdict = script.trim_start().starts_with("roce_gate");
    let ok = code == Some(0) || (verdict && code == Some(1));
    let tail = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        s.lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        ok,
        "{what} exited {code:?}:\n{script}\nstdout:\n{}\nstderr:\n{}",
        tail(&out.stdout),
        tail(&out.stderr)
    );
    if verdict {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.starts_with("roce_gate: "),
            "{what}: no verdict table:\n{stdout}"
        );
        eprintln!(
            "ci_examples: {what}: the gate's verdict (timing, not checked): {}",
            stdout.lines().next().unwrap_or("")
        );
    }
}

#[track_caller]
fn expect_exists(dir: &Path, paths: &[String], why: &str) {
    for p in paths {
        let p = p.trim_end_matches('/');
        assert!(
            dir.join(p).exists(),
            "{p} ({why}) does not exist after the steps"
        );
    }
}

/// GitHub's steps skipped by name, and why: they need the runner, not the example.
const GITHUB_SKIPPED: [(&str, &str); 2] = [
    (
        "System packages",
        "installs packages; this machine has scripts/deps.sh test's",
    ),
    (
        "Build",
        "builds with cargo; the test runs the binaries cargo built for it, put on PATH",
    ),
];

#[test]
fn the_github_actions_example_runs_as_written() {
    let _serial = crate::common::one_at_a_time(&ONE_AT_A_TIME);
    let doc = example("github-actions.yml");
    let steps = doc["jobs"]["roce-gate"]["steps"]
        .as_vec()
        .expect("jobs.roce-gate.steps");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let summary = dir.join("step-summary.md");
    let env = [
        ("GITHUB_ACTIONS", "true".to_owned()),
        ("GITHUB_STEP_SUMMARY", summary.display().to_string()),
        ("GITHUB_PATH", dir.join("github-path").display().to_string()),
    ];
    let (mut ran, mut skipped, mut published) = (Vec::new(), Vec::new(), Vec::new());
    for step in steps {
        let name = step["name"].as_str().unwrap_or("(unnamed)");
        if let Some(action) = step["uses"].as_str() {
            eprintln!(
                "ci_examples: github-actions.yml: skipped {action}: an action only a runner has"
            );
            for key in ["path", "report_paths"] {
                if let Some(p) = step["with"][key].as_str() {
                    published.push(p.to_owned());
                }
            }
            continue;
        }
        let script = step["run"]
            .as_str()
            .unwrap_or_else(|| panic!("step {name}: no run"));
        if let Some((_, why)) = GITHUB_SKIPPED.iter().find(|(n, _)| *n == name) {
            eprintln!("ci_examples: github-actions.yml: skipped step {name:?}: {why}");
            skipped.push(name);
            continue;
        }
        let out = shell(dir, script, &env);
        expect_ran(&format!("github-actions.yml step {name:?}"), script, &out);
        ran.push(name);
    }
    assert_eq!(
        skipped.len(),
        GITHUB_SKIPPED.len(),
        "a skipped step was renamed: {skipped:?}"
    );
    assert!(ran.len() >= 3, "record, measure, gate: {ran:?}");
    expect_exists(dir, &published, "what the workflow publishes");
    expect_exists(
        dir,
        &["ci/baseline.json".into()],
        "the baseline the gate reads",
    );
    let md = std::fs::read_to_string(&summary).expect("the gate wrote the job summary");
    assert!(md.starts_with("### roce_gate: "), "{md}");
}

#[test]
fn the_gitlab_ci_example_runs_as_written() {
    let _serial = crate::common::one_at_a_time(&ONE_AT_A_TIME);
    let doc = example("gitlab-ci.yml");
    let job = &doc["performance"];
    let before = job["before_script"]
        .as_vec()
        .expect("performance.before_script");
    eprintln!(
        "ci_examples: gitlab-ci.yml: skipped before_script ({} lines): it installs packages and \
         builds with cargo; the test runs the binaries cargo built for it, put on PATH",
        before.len()
    );
    let script = job["script"].as_vec().expect("performance.script");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let env = [("GITLAB_CI", "true".to_owned())];
    for (i, line) in script.iter().enumerate() {
        let line = line.as_str().expect("a script line is a string");
        let out = shell(dir, line, &env);
        expect_ran(&format!("gitlab-ci.yml script line {}", i + 1), line, &out);
    }
    let mut kept: Vec<String> = job["artifacts"]["paths"]
        .as_vec()
        .expect("performance.artifacts.paths")
        .iter()
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect();
    kept.extend(
        job["artifacts"]["reports"]["junit"]
            .as_str()
            .map(str::to_owned),
    );
    assert!(kept.len() >= 2, "{kept:?}");
    expect_exists(dir, &kept, "the job's artifacts");
    expect_exists(
        dir,
        &["ci/baseline.json".into()],
        "the baseline the gate reads",
    );
}
