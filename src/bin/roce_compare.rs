//! roce_compare: RoCE v1, RoCE v2 and TCP side by side (`roceperf::compare::cli`).
//!
//! A table, a histogram per transport, and compare.csv, compare.json, HdrHistogram logs, latency.svg
//! and bandwidth.svg under results/<timestamp>/. Exit 0 ok, 1 a gate failed, 2 usage error or nothing
//! could run.

fn main() -> std::process::ExitCode {
    roceperf::compare::cli::main()
}
