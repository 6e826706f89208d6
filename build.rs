//! Records the git commit roceperf is built from (`ROCEPERF_GIT_COMMIT`, in every result file's
//! provenance): `git rev-parse HEAD` in a git checkout, `unknown` elsewhere (a package or a crates.io
//! build has no .git). Rebuilt when HEAD moves, not on every edit.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=ROCEPERF_GIT_COMMIT={commit}");
    // HEAD, the branch it names, and packed refs: what a commit or checkout changes.
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["rev-parse", "--symbolic-full-name", "HEAD"])
            .and_then(|r| git(&["rev-parse", "--git-path", &r])),
        git(&["rev-parse", "--git-path", "packed-refs"]),
    ]
    .into_iter()
    .flatten()
    // A path that does not exist (no packed refs yet) would rerun this script on every build.
    .filter(|p| std::path::Path::new(p).exists())
    {
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
