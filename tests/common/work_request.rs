//! The signaled work request every engine and endpoint test posts. Both the RC engine harness
//! (`rc_harness`) and the soft endpoint helpers (`soft_support`) include this file by path, so that
//! one definition serves test binaries that use either.

use roceperf::transport::{RemoteAddr, SendOp, SendRequest};

/// A signaled, not inline work request.
pub fn wr(
    wr_id: u64,
    op: SendOp,
    offset: u64,
    len: u32,
    remote: Option<RemoteAddr>,
) -> SendRequest {
    SendRequest {
        wr_id,
        op,
        offset,
        len,
        remote,
        signaled: true,
        inline: false,
    }
}
