//! roce_send_lat: perftest's ib_send_lat, over any roceperf transport.

use roceperf::params::{Metric, TestKind, Verb};

fn main() -> std::process::ExitCode {
    roceperf::app::main(TestKind::new(Verb::Send, Metric::Latency))
}
