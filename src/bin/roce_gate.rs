//! roce_gate: checks roceperf results against thresholds and a baseline, for CI (`roceperf::gate::cli`).
//!
//! Exit 0: every check passed; 1: a check failed; 2: bad input or usage.

fn main() -> std::process::ExitCode {
    // A roce_fabric matrix (fabric.json) is judged pair by pair in the fabric module.
    if let Some(code) = roceperf::fabric::gate::main_if_fabric() {
        return code;
    }
    roceperf::gate::cli::main()
}
