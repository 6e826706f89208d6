//! roce_atomic_bw: perftest's ib_atomic_bw (-A FETCH_AND_ADD|CMP_AND_SWAP), over any roceperf transport.

use roceperf::params::TestKind;

/// An allocation the host refuses ends the run with exit code 2 and a message, not an abort.
#[global_allocator]
static ALLOC: roceperf::app::exit::ExitOnOom = roceperf::app::exit::ExitOnOom;

fn main() -> std::process::ExitCode {
    roceperf::app::main(TestKind::ATOMIC_BW)
}
