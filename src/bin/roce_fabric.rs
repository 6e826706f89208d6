//! roce_fabric: the roceperf tests between every pair of N hosts, launched by srun, mpirun or a
//! Kubernetes Indexed Job.

fn main() -> std::process::ExitCode {
    roceperf::fabric::main()
}
