//! roce_write_bw: perftest's ib_write_bw, over any roceperf transport.

use roceperf::params::{Metric, TestKind, Verb};

fn main() -> std::process::ExitCode {
    roceperf::app::main(TestKind::new(Verb::Write, Metric::Bandwidth))
}
