//! The parts of a queue pair that the requester, completer and responder all touch.

use crate::transport::Completion;

use super::config::QpConfig;
use super::counters::Counters;
use super::mr::MemoryTable;
use super::ring::Ring;

/// Borrowed shared state handed to each half of the engine for one call.
pub(crate) struct Ctx<'a> {
    /// The QP's attributes.
    pub cfg: &'a QpConfig,
    /// Registered memory.
    pub mem: &'a mut MemoryTable,
    /// The completion queue; posting reserves room, so pushes cannot fail.
    pub(crate) cq: &'a mut Ring<Completion>,
    /// Counters.
    pub counters: &'a mut Counters,
}

impl Ctx<'_> {
    /// Queues a completion. Room was reserved when the work request was posted. Always inlined:
    /// the completion is then written into its slot, and a caller's context need not be in memory.
    #[inline(always)]
    pub(super) fn complete(&mut self, c: Completion) {
        // The ring is filled (`Qp::new`): every slot it hands out was written, no growth path.
        match self.cq.push_back_slot() {
            Some(slot) => *slot = c,
            None => debug_assert!(
                false,
                "completion queue overflow: posting must reserve room"
            ),
        }
    }
}
