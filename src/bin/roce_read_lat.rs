//! roce_read_lat: perftest's ib_read_lat, over any roceperf transport.

use roceperf::params::{Metric, TestKind, Verb};

fn main() -> std::process::ExitCode {
    roceperf::app::main(TestKind::new(Verb::Read, Metric::Latency))
}
