//! roce_read_bw: perftest's ib_read_bw, over any roceperf transport.

use roceperf::params::{Metric, TestKind, Verb};

fn main() -> std::process::ExitCode {
    roceperf::app::main(TestKind::new(Verb::Read, Metric::Bandwidth))
}
