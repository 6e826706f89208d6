//! A run that SIGINT or SIGTERM stopped before its end, on either side: what its files say of it, and
//! the report of one size a side sends its peer (which says whether a signal stopped the sender).

use super::SizeResult;
use serde::{Deserialize, Serialize};

/// `by` of a run the peer's signal stopped.
pub const BY_PEER: &str = "peer";

/// How a `-n` / `-D` run was interrupted: by whom, and what of the size then running is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interrupted {
    /// `SIGINT` or `SIGTERM` (this side was signalled), or `peer` (the peer was).
    pub by: String,
    /// The message size that was running when the stop came; `None` when it came between sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// The results' last entry is that size, cut short (what completed before the stop); false when
    /// nothing of it completed (a timed run stopped before its window opened), so it has no entry.
    pub partial: bool,
}

/// One size as a side reports it to its peer on roceperf's out-of-band channel: its result (`None`
/// where it only served), and the signal that stopped it early, if one did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeReport {
    /// This side's result of the size.
    pub result: Option<SizeResult>,
    /// `SIGINT` or `SIGTERM` when a signal cut the size short on this side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<String>,
}
