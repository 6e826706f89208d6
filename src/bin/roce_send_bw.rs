//! roce_send_bw: perftest's ib_send_bw, over any roceperf transport.

use roceperf::params::{Metric, TestKind, Verb};

fn main() -> std::process::ExitCode {
    roceperf::app::main(TestKind::new(Verb::Send, Metric::Bandwidth))
}
