//! Queue-pair attributes: what `modify_qp` would set on a verbs QP.

use crate::params::{CcParams, CongestionControl, Recovery};

/// Attributes of one RC queue pair; both ends must agree on `pmtu` and on each other's QPNs and PSNs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpConfig {
    /// This QP's number (24 bits), the BTH.DestQP of packets addressed to it.
    pub qpn: u32,
    /// The peer QP's number.
    pub(crate) remote_qpn: u32,
    /// First PSN this QP sends as a requester (`sq_psn`).
    pub send_psn: u32,
    /// First PSN this QP expects as a responder: the peer's `send_psn` (`rq_psn`).
    pub recv_psn: u32,
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096.
    pub pmtu: u32,
    /// Local ACK timeout code: 4.096 µs × 2^timeout; 0 disables retransmission by timer.
    pub timeout: u8,
    /// Retransmissions allowed without progress (3 bits).
    pub retry_cnt: u8,
    /// rxe treats `retry_cnt == 7` as infinite; the IB spec does not. Off gives a dead peer an error.
    pub retry_cnt_7_is_infinite: bool,
    /// Doubles the ACK timeout after each retry without progress, up to 2^this (0: fixed, as rxe).
    /// A userspace peer can be descheduled for longer than one timeout; backing off lets the retry
    /// budget outlast such a stall while the first retransmission after a loss stays fast.
    pub retry_backoff_max_shift: u8,
    /// RNR retries allowed (3 bits); 7 means infinite.
    pub rnr_retry: u8,
    /// RNR timer code this QP sends in its RNR NAKs (`min_rnr_timer`).
    pub min_rnr_timer: u8,
    /// READ/atomic requests this QP may have outstanding as a requester (`max_rd_atomic`).
    pub max_rd_atomic: u32,
    /// READ/atomic requests this QP remembers as a responder, for replays (`max_dest_rd_atomic`).
    pub max_dest_rd_atomic: u32,
    /// Send-queue depth (work requests).
    pub sq_depth: usize,
    /// Receive-queue depth (work requests).
    pub rq_depth: usize,
    /// Unacknowledged PSNs the requester lets out before it waits (rxe: 128).
    pub max_unacked_psns: u32,
    /// AckReq is set on the last packet of every signaled message and after this many packets without
    /// one (rxe: 64); an unsignaled message needs no answer of its own.
    pub(crate) ack_req_every: u32,
    /// lkey of the region that `SendRequest::offset` and `RecvRequest::offset` address.
    pub local_lkey: u32,
    /// The value put in `Completion::qp` (the QP's index in its endpoint).
    pub(crate) cq_tag: u32,
    /// How lost packets are repaired: go-back-N (the spec's) or selective repeat (both sides must
    /// run it: its packets carry roceperf's own extension, docs/lossy-roce.md).
    pub recovery: Recovery,
    /// Go-back-N as between two roceperf endpoints: a silence is answered after the fast
    /// retransmission timeout (`rto_ns`) with a probe, not after the ACK timeout (a lost tail, NAK or
    /// resend costs a round trip, not 67 ms). Off (the default, and against rxe, perftest or a NIC):
    /// only the ACK timeout, as rxe.
    pub gbn_fast: bool,
    /// With `gbn_fast`: the window halves per loss episode (down to rxe's 128 PSNs) and grows back
    /// by 8 PSNs per window acknowledged, so a loss costs fewer resends; a cut whose next clean
    /// round is expected to deliver less than 90 % of the goodput of the round before it is undone
    /// (a host whose peer waits for a core needs the deep window). The soft endpoint sets it with
    /// `gbn_fast`; off here.
    pub gbn_loss_window: bool,
    /// The fast retransmission timeout (selective repeat, and go-back-N with `gbn_fast`): the least
    /// it is, ns, above the measured round trip plus four deviations (doubling per timeout without
    /// progress until it reaches the ACK timeout of `timeout`; 0: none, only the ACK timeout).
    pub rto_ns: u64,
    /// The same with at most three packets out (a ping-pong), ns: a lost tail packet costs this.
    pub rto_small_ns: u64,
    /// Congestion control (`--cc`): DCQCN's notification and reaction point, or none.
    pub cc: CongestionControl,
    /// DCQCN's parameters (`--cc-param`), ConnectX's names and defaults.
    pub cc_params: CcParams,
}

impl QpConfig {
    /// rxe/perftest defaults for a QP pair: PMTU 1024, timeout 14 (≈67 ms), retry 7 (finite here),
    /// rnr_retry 7, min_rnr_timer 12, 16 outstanding READs, 128-PSN window, AckReq every 64.
    pub fn new(
        qpn: u32,
        remote_qpn: u32,
        send_psn: u32,
        recv_psn: u32,
        local_lkey: u32,
    ) -> QpConfig {
        QpConfig {
            qpn,
            remote_qpn,
            send_psn,
            recv_psn,
            pmtu: 1024,
            timeout: 14,
            retry_cnt: 7,
            retry_cnt_7_is_infinite: false,
            retry_backoff_max_shift: 0,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            sq_depth: 256,
            rq_depth: 256,
            max_unacked_psns: 128,
            ack_req_every: 64,
            local_lkey,
            cq_tag: 0,
            recovery: Recovery::Gbn,
            gbn_fast: false,
            gbn_loss_window: false,
            rto_ns: 1_000_000,
            rto_small_ns: 250_000,
            cc: CongestionControl::default(),
            cc_params: CcParams::default(),
        }
    }

    /// Checks the attributes; the error names the one that is wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !matches!(self.pmtu, 256 | 512 | 1024 | 2048 | 4096) {
            return Err(ConfigError::Pmtu(self.pmtu));
        }
        if self.qpn == 0 || self.qpn > 0x00ff_ffff {
            return Err(ConfigError::Qpn(self.qpn));
        }
        if self.remote_qpn == 0 || self.remote_qpn > 0x00ff_ffff {
            return Err(ConfigError::Qpn(self.remote_qpn));
        }
        if self.retry_cnt > 7 || self.rnr_retry > 7 || self.timeout > 31 || self.min_rnr_timer > 31
        {
            return Err(ConfigError::Field(
                "retry_cnt, rnr_retry (0..=7), timeout or min_rnr_timer (0..=31)",
            ));
        }
        if self.sq_depth == 0 || self.rq_depth == 0 {
            return Err(ConfigError::Field(
                "sq_depth and rq_depth must be at least 1",
            ));
        }
        if self.max_unacked_psns == 0 || self.max_unacked_psns >= 1 << 22 {
            return Err(ConfigError::Field("max_unacked_psns must be in 1..2^22"));
        }
        if self.max_rd_atomic > 1 << 16 || self.max_dest_rd_atomic > 1 << 16 {
            return Err(ConfigError::Field(
                "max_rd_atomic and max_dest_rd_atomic must be at most 65536",
            ));
        }
        Ok(())
    }

    /// True when `retry_cnt` never runs out.
    pub(crate) fn retry_infinite(&self) -> bool {
        self.retry_cnt == 7 && self.retry_cnt_7_is_infinite
    }
}

/// A queue-pair attribute that cannot work.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ConfigError {
    /// The path MTU is not an IB MTU.
    #[error("path MTU {0} is not one of 256, 512, 1024, 2048, 4096; pass one of them with -m")]
    Pmtu(u32),
    /// A QPN is 0 or wider than 24 bits.
    #[error("queue pair number {0:#x} must be in 1..=0xffffff")]
    Qpn(u32),
    /// The local region does not exist.
    #[error("local_lkey {0:#x} names no registered memory region; register the buffer first")]
    LocalKey(u32),
    /// Another attribute is out of range; the text names it.
    #[error("queue pair attribute out of range: {0}")]
    Field(&'static str),
}
