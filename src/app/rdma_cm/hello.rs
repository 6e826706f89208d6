//! `-R -c UD` in perftest's dialect: the requester's first datagram on each resolved UD queue pair.
//!
//! A SIDR_REQ from librdmacm carries no QPN, so perftest (latency tests and `-b`) has its client
//! send one SEND with immediate of 4 bytes to the server's queue pair right after the SIDR_REP, its
//! QPN in the immediate, and its server wait for it (the 40-byte GRH in front) before going on.
//! These are the three steps on our side; the format is [`crate::transport::cm::ud_hello`]'s.

use std::ops::Range;
use std::time::{Duration, Instant};

use crate::params::UD_GRH_LEN;
use crate::transport::cm::{UD_HELLO_LEN, ud_hello, ud_hello_qpn};
use crate::transport::{
    self, Completion, CompletionStatus, Endpoint, RecvRequest, SendOp, SendRequest,
};

/// Work request ID of the datagram's SEND and of its receive.
const HELLO_WR: u64 = u64::MAX - 1;
/// How long the SEND may take to complete (a datagram completes once it leaves).
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the server has no QPN for a queue pair.
pub(super) enum Wait {
    /// Nothing came on this queue pair in time.
    Missing(usize),
    /// The transport failed.
    Transport(transport::Error),
}

/// Client: sends queue pair `qp`'s QPN to the peer it was just resolved to, and waits for the SEND.
pub(super) fn send<E: Endpoint>(ep: &mut E, qp: usize) -> transport::Result<()> {
    let qpn = ep
        .local_info()
        .qps
        .get(qp)
        .map(|q| q.qpn)
        .ok_or_else(|| transport::Error::InvalidRequest(format!("no queue pair {qp}")))?;
    ep.buffer_mut(qp)[..UD_HELLO_LEN as usize].copy_from_slice(&ud_hello(qpn));
    let wr = SendRequest::new(HELLO_WR, SendOp::SendWithImm(qpn), 0, UD_HELLO_LEN, None);
    ep.post_send(qp, &wr)?;
    let deadline = Instant::now() + SEND_TIMEOUT;
    let mut comps = [Completion::EMPTY; 8];
    while Instant::now() < deadline {
        let n = ep.poll_cq(&mut comps)?;
        if let Some(c) = comps[..n]
            .iter()
            .find(|c| c.wr_id == HELLO_WR && c.qp as usize == qp)
        {
            if c.status != CompletionStatus::Success {
                return Err(transport::Error::Connection(format!(
                    "the first datagram of UD queue pair {qp} failed: {}",
                    c.status.describe()
                )));
            }
            return Ok(());
        }
    }
    Err(transport::Error::Connection(format!(
        "the first datagram of UD queue pair {qp} did not leave within {} s",
        SEND_TIMEOUT.as_secs()
    )))
}

/// Server: posts the receive for queue pair `qp`'s first datagram (the GRH and 4 bytes).
pub(super) fn expect<E: Endpoint>(ep: &mut E, qp: usize) -> transport::Result<()> {
    let wr = RecvRequest {
        wr_id: HELLO_WR,
        offset: 0,
        len: UD_GRH_LEN as u32 + UD_HELLO_LEN,
    };
    ep.post_recv(qp, &wr)
}

/// Server: the requester's QPN for each queue pair of `qps`, from its first datagram, waiting at
/// most `limit` for all of them.
pub(super) fn receive<E: Endpoint>(
    ep: &mut E,
    qps: Range<usize>,
    limit: Duration,
) -> Result<Vec<u32>, Wait> {
    let deadline = Instant::now() + limit;
    let mut learnt: Vec<Option<u32>> = vec![None; qps.len()];
    let mut comps = [Completion::EMPTY; 8];
    while let Some(k) = learnt.iter().position(Option::is_none) {
        if Instant::now() >= deadline {
            return Err(Wait::Missing(qps.start + k));
        }
        let n = ep.poll_cq(&mut comps).map_err(Wait::Transport)?;
        for c in &comps[..n] {
            let qp = c.qp as usize;
            if c.wr_id != HELLO_WR || !qps.contains(&qp) {
                continue;
            }
            let qpn = (c.status == CompletionStatus::Success)
                .then(|| ud_hello_qpn(c.byte_len, c.imm))
                .flatten();
            match qpn {
                Some(q) => learnt[qp - qps.start] = Some(q),
                None => {
                    return Err(Wait::Transport(transport::Error::Connection(format!(
                        "the first datagram on UD queue pair {qp} was not perftest's QPN ({}, {} bytes)",
                        c.status.describe(),
                        c.byte_len
                    ))));
                }
            }
        }
    }
    Ok(learnt.into_iter().flatten().collect())
}
