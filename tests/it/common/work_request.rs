//! The signaled work request every engine and endpoint test posts (`rc_harness` and `soft_support`
//! re-export it).

use roceperf::transport::{RemoteAddr, SendOp, SendRequest};

/// A signaled, not inline work request.
pub fn wr(
    wr_id: u64,
    op: SendOp,
    offset: u64,
    len: u32,
    remote: Option<RemoteAddr>,
) -> SendRequest {
    SendRequest::new(wr_id, op, offset, len, remote)
}
