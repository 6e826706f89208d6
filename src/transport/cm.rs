//! Connection setup through the Communication Manager (`-R`, rdma_cm's way): the part of the
//! transport contract behind it. The peer is addressed by IP address and port (a service ID); the
//! queue pair numbers, starting PSNs and RDMA READ depths travel in the CM's REQ and REP, and the
//! transport connects the queue pair itself once they are agreed.
//!
//! `soft` speaks the CM protocol on QP1 itself; `verbs` goes through librdmacm; `tcp` has no CM.
//!
//! UD queue pairs are resolved rather than connected (rdma_cm's UDP port space: SIDR_REQ /
//! SIDR_REP). Both transports speak the same dialect of it, kept here: the requester's QPN in the
//! first 4 bytes of the request's private data ([`ud_request_data`]), and what a refusal means
//! ([`sidr_refused`]).

use std::net::{IpAddr, SocketAddr};

use super::Result;
pub(crate) use crate::wire::cm::SidrStatus;
pub use crate::wire::cm::{RDMA_UDP_QKEY, RejectReason};

/// What a queue pair asks for when it connects through the CM (rdma_cm's `struct rdma_conn_param`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmQpParams {
    /// RDMA READs / atomics this side accepts at once as responder.
    pub responder_resources: u8,
    /// RDMA READs / atomics this side issues at once.
    pub initiator_depth: u8,
    /// Transport retries (3 bits).
    pub retry_count: u8,
    /// RNR retries (3 bits; 7 = forever).
    pub rnr_retry_count: u8,
    /// Local ACK timeout (`-u`: 4.096 µs × 2^n).
    pub ack_timeout: u8,
}

/// The peer's queue pair as the CM exchange described it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmPeer {
    /// The peer's address.
    pub ip: IpAddr,
    /// Its queue pair number.
    pub qpn: u32,
    /// The first PSN it sends.
    pub psn: u32,
    /// The path MTU both sides use, in bytes.
    pub mtu: u32,
    /// RDMA READs / atomics it accepts at once as responder.
    pub responder_resources: u8,
}

impl CmPeer {
    /// The peer of a UD resolution: queue pair `qpn` at `ip`, no PSN (datagrams are not
    /// sequenced), and our own path MTU.
    pub fn ud(ip: IpAddr, qpn: u32, mtu: u32) -> CmPeer {
        CmPeer {
            ip,
            qpn,
            psn: 0,
            mtu,
            responder_resources: 0,
        }
    }
}

/// What happened to a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmEvent {
    /// A connection request arrived on a port we listen on: accept it onto a queue pair or reject it.
    Request {
        /// The request, for [`CmEndpoint::cm_accept`] / [`CmEndpoint::cm_reject`].
        req: u32,
        /// Where it came from.
        from: IpAddr,
        /// The peer's queue pair number (as its REQ says).
        peer_qpn: u32,
        /// The application's private data in the request.
        private_data: Vec<u8>,
    },
    /// Queue pair `qp` is connected to `peer`.
    Established {
        /// Our queue pair.
        qp: usize,
        /// The peer's.
        peer: CmPeer,
    },
    /// The peer rejected our request (or our reply).
    Rejected {
        /// Our queue pair.
        qp: usize,
        /// Why, as the REJ says.
        reason: RejectReason,
    },
    /// The peer never answered (address or route unreachable, or nobody speaks the CM there).
    Unanswered {
        /// Our queue pair.
        qp: usize,
        /// What went unanswered, e.g. `REQ sent 9 times over 4.5 s`.
        detail: String,
    },
    /// The connection of queue pair `qp` is down.
    Disconnected {
        /// Our queue pair.
        qp: usize,
    },
}

/// A transport that can connect its queue pairs through the CM.
pub trait CmEndpoint {
    /// Accepts connection requests for `port` from now on.
    fn cm_listen(&mut self, port: u16) -> Result<()>;
    /// Asks the listener at `to` to connect to queue pair `qp`; [`CmEvent::Established`],
    /// [`CmEvent::Rejected`] or [`CmEvent::Unanswered`] follows.
    fn cm_connect(
        &mut self,
        qp: usize,
        to: SocketAddr,
        params: &CmQpParams,
        private_data: &[u8],
    ) -> Result<()>;
    /// Accepts request `req` onto queue pair `qp`; [`CmEvent::Established`] follows.
    fn cm_accept(&mut self, req: u32, qp: usize, params: &CmQpParams) -> Result<()>;
    /// Rejects request `req` ("consumer reject").
    fn cm_reject(&mut self, req: u32) -> Result<()>;
    /// Disconnects queue pair `qp` (DREQ); [`CmEvent::Disconnected`] follows.
    fn cm_disconnect(&mut self, qp: usize) -> Result<()>;
    /// Points resolved UD queue pair `qp` at the peer's queue pair `qpn`: a plain rdma_cm requester's
    /// SIDR_REQ does not carry its QPN, so perftest's server learns it from the requester's first
    /// datagram ([`ud_hello_qpn`]). Transports that cannot say so.
    fn cm_ud_peer(&mut self, qp: usize, qpn: u32) -> Result<()> {
        let _ = (qp, qpn);
        Err(super::Error::Unavailable(
            "this transport cannot re-point a UD queue pair learnt through rdma_cm; use --transport soft".into(),
        ))
    }
    /// Drives the transport once (a software transport receives and sends here; completions stay
    /// for `poll_cq`) and returns the next event, if any. Does not block for long.
    fn cm_poll(&mut self) -> Result<Option<CmEvent>>;
}

/// The private data of a UD queue pair's SIDR_REQ in roceperf's dialect: a SIDR_REQ has no field
/// for the requester's QPN (a plain rdma_cm server learns it from the first datagram), so ours carry
/// it first, big-endian, before the application's own private data.
pub(crate) fn ud_request_data(qpn: u32, private_data: &[u8]) -> Vec<u8> {
    let mut v = qpn.to_be_bytes().to_vec();
    v.extend_from_slice(private_data);
    v
}

/// The requester's QPN and the application's private data of a SIDR_REQ made by
/// [`ud_request_data`]; QPN 0 (no queue pair) when the data is too short to hold one.
pub(crate) fn ud_request_parts(private_data: &[u8]) -> (u32, &[u8]) {
    match private_data.split_first_chunk::<4>() {
        Some((qpn, rest)) => (u32::from_be_bytes(*qpn), rest),
        None => (0, &[]),
    }
}

/// Bytes of perftest's UD "connection parameters" datagram (`-R -c UD`, latency or `-b`): after the
/// SIDR exchange the requester sends each resolved queue pair one SEND with immediate of 4 bytes,
/// its QPN in the immediate, so that the server (whose SIDR_REQ told it no QPN) can answer.
pub(crate) const UD_HELLO_LEN: u32 = 4;

/// The 4 bytes of that datagram: perftest sends whatever its buffer holds; ours is the QPN, in the
/// byte order of perftest's `memcpy` of it (little-endian hosts), which no one reads.
pub(crate) fn ud_hello(qpn: u32) -> [u8; UD_HELLO_LEN as usize] {
    qpn.to_le_bytes()
}

/// The requester's QPN from that datagram's receive: `byte_len` (the 40-byte GRH in front of the
/// 4 bytes, as a UD receive counts it) and its immediate. `None` for anything else.
pub(crate) fn ud_hello_qpn(byte_len: u32, imm: Option<u32>) -> Option<u32> {
    (u64::from(byte_len) == crate::params::UD_GRH_LEN + u64::from(UD_HELLO_LEN))
        .then_some(imm)
        .flatten()
        .map(|q| q & 0x00ff_ffff)
}

/// What a SIDR_REP that did not resolve the service means for queue pair `qp`: nobody listens on
/// that port yet (Linux's CM answers "service ID not supported"), as a REJ "invalid service ID"
/// does, so the client asks again; a refusal, as a consumer reject; anything else, no answer.
pub(crate) fn sidr_refused(qp: usize, status: SidrStatus) -> CmEvent {
    match status {
        SidrStatus::Unsupported => CmEvent::Rejected {
            qp,
            reason: RejectReason::InvalidServiceId,
        },
        SidrStatus::Reject => CmEvent::Rejected {
            qp,
            reason: RejectReason::ConsumerDefined,
        },
        status => CmEvent::Unanswered {
            qp,
            detail: format!("the SIDR_REP said {status}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ud_requests_carry_the_requester_qpn_first() {
        let d = ud_request_data(0x00ab_cdef, b"hi");
        assert_eq!(d, [0, 0xab, 0xcd, 0xef, b'h', b'i']);
        assert_eq!(ud_request_parts(&d), (0x00ab_cdef, &b"hi"[..]));
        assert_eq!(ud_request_parts(&d[..4]), (0x00ab_cdef, &[][..]));
        assert_eq!(
            ud_request_parts(&d[..3]),
            (0, &[][..]),
            "too short for a QPN"
        );
    }

    #[test]
    fn perftests_ud_hello_is_4_bytes_behind_the_grh_with_the_qpn_as_immediate() {
        assert_eq!(ud_hello(0x0001_2345), [0x45, 0x23, 0x01, 0]);
        assert_eq!(ud_hello_qpn(44, Some(0x0001_2345)), Some(0x0001_2345));
        assert_eq!(
            ud_hello_qpn(4, Some(0x11)),
            None,
            "no GRH counted: not a UD receive"
        );
        assert_eq!(ud_hello_qpn(44, None), None, "no immediate");
        assert_eq!(ud_hello_qpn(1064, Some(0x11)), None, "a test message");
    }

    #[test]
    fn a_sidr_refusal_is_a_rejection_the_client_understands() {
        assert_eq!(
            sidr_refused(1, SidrStatus::Unsupported),
            CmEvent::Rejected {
                qp: 1,
                reason: RejectReason::InvalidServiceId
            }
        );
        assert_eq!(
            sidr_refused(0, SidrStatus::Reject),
            CmEvent::Rejected {
                qp: 0,
                reason: RejectReason::ConsumerDefined
            }
        );
        let CmEvent::Unanswered { qp: 2, detail } = sidr_refused(2, SidrStatus::NoQp) else {
            panic!()
        };
        assert!(detail.contains("no QP available"), "{detail}");
    }
}
