//! What a run's buffers need, checked against the host before anything is allocated: a run that
//! cannot fit is a setup error naming the flags and the amount, not an abort half-way through setup.

use super::Error;
use super::plan::Plan;
use crate::transport::memory::human_bytes;
use std::fmt;

/// The buffer memory a run needs, and the flags that decide it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Need {
    /// `-q`.
    pub qps: u32,
    /// The largest message (`-s`, or `-a`'s largest).
    pub max_size: u64,
    /// `-a` was given.
    pub all_sizes: bool,
    /// Bytes of each queue pair's buffer.
    pub per_qp: u64,
}

impl Need {
    /// Bytes of every queue pair's buffer together.
    pub(crate) fn total(&self) -> u64 {
        u64::from(self.qps).saturating_mul(self.per_qp)
    }

    fn size_flag(&self) -> String {
        if self.all_sizes {
            format!("-a (messages up to {} B)", self.max_size)
        } else {
            format!("-s {}", self.max_size)
        }
    }
}

/// A limit the buffers must fit in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    /// The host's physical memory (`MemTotal`).
    Physical(u64),
    /// The address space this process may use (`ulimit -v`, RLIMIT_AS).
    AddressSpace(u64),
}

impl Limit {
    fn bytes(self) -> u64 {
        match self {
            Limit::Physical(b) | Limit::AddressSpace(b) => b,
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Physical(b) => write!(f, "this host's {} of memory", human_bytes(*b)),
            Limit::AddressSpace(b) => write!(
                f,
                "the {} of address space this process may use (ulimit -v)",
                human_bytes(*b)
            ),
        }
    }
}

/// The buffers do not fit: what they need, and the limit they exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "-q {} with {} needs {} of buffers ({} queue pair{} × {}, each a source and a target of the largest message), more than {limit}; lower -q or the message size",
    need.qps,
    need.size_flag(),
    human_bytes(need.total()),
    need.qps,
    if need.qps == 1 { "" } else { "s" },
    human_bytes(need.per_qp)
)]
pub(crate) struct Shortfall {
    /// What the run needs.
    pub need: Need,
    /// The limit it exceeds.
    pub limit: Limit,
}

/// The first limit the need exceeds, if any.
pub(crate) fn judge(need: Need, limits: &[Limit]) -> Result<(), Shortfall> {
    match limits.iter().find(|l| need.total() > l.bytes()) {
        Some(&limit) => Err(Shortfall { need, limit }),
        None => Ok(()),
    }
}

/// The run's need against this host's memory and this process's address-space limit.
pub(crate) fn check(plan: &Plan) -> Result<(), Error> {
    let need = Need {
        qps: plan.qps,
        max_size: plan.max_size(),
        all_sizes: plan.all_sizes,
        per_qp: plan.layout.buffer_len() as u64,
    };
    let limits: Vec<Limit> = [
        physical_memory().map(Limit::Physical),
        address_space().map(Limit::AddressSpace),
    ]
    .into_iter()
    .flatten()
    .collect();
    judge(need, &limits).map_err(Error::Memory)
}

/// `MemTotal` from /proc/meminfo, in bytes.
fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// RLIMIT_AS, when there is one.
fn address_space() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) };
    (rc == 0 && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_thousand_queue_pairs_of_8_mib_do_not_fit_8_gib() {
        let need = Need {
            qps: 16384,
            max_size: 8 << 20,
            all_sizes: false,
            per_qp: 16 << 20,
        };
        let e = judge(need, &[Limit::Physical(8 << 30)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "-q 16384 with -s 8388608 needs 256 GiB of buffers (16384 queue pairs × 16 MiB, each a source and a target of the largest message), more than this host's 8 GiB of memory; lower -q or the message size"
        );
        let small = Need { qps: 4, ..need };
        assert!(judge(small, &[Limit::Physical(8 << 30)]).is_ok());
        let e = judge(
            Need {
                qps: 1,
                all_sizes: true,
                ..need
            },
            &[Limit::Physical(1 << 40), Limit::AddressSpace(8 << 20)],
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with(
                "-q 1 with -a (messages up to 8388608 B) needs 16 MiB of buffers (1 queue pair × 16 MiB"
            ),
            "{e}"
        );
        assert!(e.to_string().contains("(ulimit -v)"), "{e}");
    }
}
