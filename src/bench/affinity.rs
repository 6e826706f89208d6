//! Pinning the datapath thread to one core.

use super::{Error, Result};
use crate::params::Role;
use core_affinity::CoreId;

/// The default core for `role` among the `ids` this process may use.
fn default_core(ids: &[CoreId], role: Role) -> Option<CoreId> {
    match role {
        Role::Client if ids.len() >= 2 => Some(ids[ids.len() - 2]),
        _ => ids.last().copied(),
    }
}

/// The core the datapath runs on and why that one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pinned {
    /// Core id.
    pub core: usize,
    /// Why this core (printed with the results).
    pub reason: String,
}

/// Pins the calling thread to `requested`, or by default to the last core this process may use
/// (core 0 usually takes most interrupts and housekeeping) for a server and the one before it for a
/// client, so that a test over loopback does not put both busy-polling sides on one core.
pub(crate) fn pin(requested: Option<usize>, role: Role) -> Result<Pinned> {
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
        None => match default_core(&ids, role) {
            Some(c) => (
                c,
                format!(
                    "core {} by default: servers take the last core this process may use and clients the one before it, so both sides of a loopback test get a core of their own, as far from core 0 (where most interrupts land) as possible; choose another with --cpu",
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
    fn server_and_client_default_to_different_cores() {
        let ids: Vec<CoreId> = [0, 1, 2, 3].map(|id| CoreId { id }).to_vec();
        assert_eq!(default_core(&ids, Role::Server), Some(CoreId { id: 3 }));
        assert_eq!(default_core(&ids, Role::Client), Some(CoreId { id: 2 }));
        let one = [CoreId { id: 5 }];
        assert_eq!(default_core(&one, Role::Client), Some(CoreId { id: 5 }));
    }

    #[test]
    fn pins_to_an_available_core_and_rejects_a_missing_one() {
        // Run in a thread so the test harness's own thread keeps its affinity.
        std::thread::spawn(|| {
            let p = pin(None, Role::Server).unwrap();
            let ids = core_affinity::get_core_ids().unwrap();
            assert_eq!(
                ids,
                vec![core_affinity::CoreId { id: p.core }],
                "now pinned to exactly one core"
            );
            assert!(matches!(
                pin(Some(100_000), Role::Client),
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
