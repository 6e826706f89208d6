//! CPU utilisation as perftest's `--cpu_util` computes it, user / (user + idle) from `/proc/stat`, with
//! niced user time counted as user time (a benchmark started under `nice` is still busy).

/// The first line of `/proc/stat`: cumulative user (niced included) and idle jiffies of all cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CpuSample {
    user: u64,
    idle: u64,
}

impl CpuSample {
    /// Reads `/proc/stat`; `None` where it does not exist.
    pub(crate) fn read() -> Option<CpuSample> {
        CpuSample::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// Parses the `cpu  user nice system idle ...` line.
    fn parse(text: &str) -> Option<CpuSample> {
        let line = text.lines().find(|l| l.starts_with("cpu "))?;
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        Some(CpuSample {
            user: f.first()? + f.get(1)?,
            idle: *f.get(3)?,
        })
    }

    /// Percentage of user time between `self` (start) and `end`, as perftest reports it.
    pub(crate) fn util_until(&self, end: &CpuSample) -> Option<f64> {
        let user = end.user.checked_sub(self.user)?;
        let idle = end.idle.checked_sub(self.idle)?;
        (user + idle > 0).then(|| 100.0 * user as f64 / (user + idle) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_and_computes_user_share() {
        let a = CpuSample::parse("cpu  100 5 50 300 0 0 0 0 0 0\ncpu0 1 2 3 4\n").unwrap();
        let b = CpuSample::parse("cpu  160 5 50 340 0 0 0 0 0 0\n").unwrap();
        assert_eq!(a.util_until(&b), Some(60.0));
        // Niced time is user time: a run under `nice` still reads as busy.
        let c = CpuSample::parse("cpu  100 65 50 340 0 0 0 0 0 0\n").unwrap();
        assert_eq!(a.util_until(&c), Some(60.0));
        assert_eq!(a.util_until(&a), None);
        assert_eq!(CpuSample::parse("intr 1 2 3"), None);
    }
}
