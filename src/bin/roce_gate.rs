//! roce_gate: checks roceperf results against thresholds and a baseline, for CI (`roceperf::gate::cli`).
//!
//! Exit 0: every check passed; 1: a check failed; 2: bad input or usage.

fn main() -> std::process::ExitCode {
    roceperf::gate::cli::main()
}
