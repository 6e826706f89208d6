//! Pinning the datapath thread to one core.

use super::{Error, Result};

/// The core the datapath runs on and why that one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    /// Core id.
    pub core: usize,
    /// Why this core (printed with the results).
    pub reason: String,
}

/// Pins the calling thread to `requested`, or by default to the last core this process may use
/// (core 0 usually takes most interrupts and housekeeping).
pub fn pin(requested: Option<usize>) -> Result<Pinned> {
    let ids = core_affinity::get_core_ids().unwrap_or_default();
    let available = || {
        ids.iter()
            .map(|c| c.id.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let (id, reason) = match requested {
        Some(r) => match ids.iter().find(|c| c.id == r) {
            Some(c) => (*c, format!("core {r} chosen with --cpu")),
            None => {
                return Err(Error::NoSuchCore {
                    requested: r,
                    available: available(),
                });
            }
        },
        None => match ids.last() {
            Some(c) => (
                *c,
                format!(
                    "core {} by default: the last core this process may use, away from core 0 where most interrupts land; choose another with --cpu",
                    c.id
                ),
            ),
            None => {
                return Err(Error::NoSuchCore {
                    requested: 0,
                    available: "none reported".into(),
                });
            }
        },
    };
    if !core_affinity::set_for_current(id) {
        return Err(Error::Pin(id.id));
    }
    Ok(Pinned {
        core: id.id,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_to_an_available_core_and_rejects_a_missing_one() {
        // Run in a thread so the test harness's own thread keeps its affinity.
        std::thread::spawn(|| {
            let p = pin(None).unwrap();
            let ids = core_affinity::get_core_ids().unwrap();
            assert_eq!(
                ids,
                vec![core_affinity::CoreId { id: p.core }],
                "now pinned to exactly one core"
            );
            assert!(matches!(
                pin(Some(100_000)),
                Err(Error::NoSuchCore {
                    requested: 100_000,
                    ..
                })
            ));
        })
        .join()
        .unwrap();
    }
}
