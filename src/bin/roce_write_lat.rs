//! roce_write_lat: perftest's ib_write_lat, over any roceperf transport.

use roceperf::params::{Metric, TestKind, Verb};

fn main() -> std::process::ExitCode {
    roceperf::app::main(TestKind::new(Verb::Write, Metric::Latency))
}
