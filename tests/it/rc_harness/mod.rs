//! Shared setup for the RC engine tests: two queue pairs over simulated links.
#![allow(dead_code)]

use roceperf::params::Recovery;
use roceperf::transport::soft::rc::{MemoryTable, MrKeys, Qp, QpConfig};
use roceperf::transport::soft::sim::{Link, LinkConfig, SimPair};
use roceperf::transport::{
    Access, Completion, CompletionOp, CompletionStatus, RecvRequest, RemoteAddr,
};
use roceperf::wire::{IbRepr, Opcode};

pub use crate::common::work_request::wr;

mod stream;
pub use stream::{Stream, StreamSpec, stream};

/// Every right a test buffer may need.
pub const ALL: Access = Access(1 | 2 | 4 | 8);

/// QPN of side A.
pub const QPN_A: u32 = 0x11;
/// QPN of side B.
pub const QPN_B: u32 = 0x12;

/// What differs between test setups.
#[derive(Clone)]
pub struct Setup {
    pub pmtu: u32,
    pub buf_len: usize,
    pub psn_a: u32,
    pub psn_b: u32,
    pub ab: LinkConfig,
    pub ba: LinkConfig,
    pub seed: u64,
    pub tweak: fn(&mut QpConfig),
    /// Applied after `tweak`: the requester's window of unacknowledged PSNs.
    pub window: Option<u32>,
    /// Applied after `tweak`: the loss recovery both sides run.
    pub recovery: Option<Recovery>,
    /// Applied after `tweak` when true: go-back-N as between roceperf endpoints (`QpConfig::gbn_fast`).
    pub gbn_fast: bool,
    /// Applied after `tweak` when true: go-back-N's loss-reactive window (`QpConfig::gbn_loss_window`).
    pub gbn_loss_window: bool,
}

impl Setup {
    pub fn new(pmtu: u32, buf_len: usize) -> Setup {
        Setup {
            pmtu,
            buf_len,
            psn_a: 100,
            psn_b: 5000,
            ab: LinkConfig::perfect(),
            ba: LinkConfig::perfect(),
            seed: 1,
            tweak: |_| {},
            window: None,
            recovery: None,
            gbn_fast: false,
            gbn_loss_window: false,
        }
    }

    /// [`Setup::new`] with `tweak` applied to both sides' configuration.
    pub fn tweaked(pmtu: u32, buf_len: usize, tweak: fn(&mut QpConfig)) -> Setup {
        Setup {
            tweak,
            ..Setup::new(pmtu, buf_len)
        }
    }

    /// A pair with 1024-byte MTU and 4 KiB buffers whose A→B link loses every packet, with `tweak`
    /// applied to both sides' configuration: the setup of the retry-exhaustion tests.
    pub fn dead_link(tweak: fn(&mut QpConfig)) -> Setup {
        Setup {
            ab: LinkConfig {
                loss: 1.0,
                ..LinkConfig::perfect()
            },
            tweak,
            ..Setup::new(1024, 4096)
        }
    }

    /// Builds the pair; each side has one buffer with every right, registered whole.
    pub fn build(&self) -> (SimPair, MrKeys, MrKeys) {
        let (qa, ka) = self.qp(QPN_A, QPN_B, self.psn_a, self.psn_b, 0xa);
        let (qb, kb) = self.qp(QPN_B, QPN_A, self.psn_b, self.psn_a, 0xb);
        (
            SimPair::new(qa, qb, self.ab.clone(), self.ba.clone(), self.seed),
            ka,
            kb,
        )
    }

    fn qp(&self, qpn: u32, peer: u32, send_psn: u32, recv_psn: u32, salt: u32) -> (Qp, MrKeys) {
        let mut mem = MemoryTable::new(salt);
        let keys = mem.add_registered(self.buf_len, ALL);
        let mut cfg = QpConfig::new(qpn, peer, send_psn, recv_psn, keys.lkey);
        cfg.pmtu = self.pmtu;
        (self.tweak)(&mut cfg);
        if let Some(w) = self.window {
            cfg.max_unacked_psns = w;
        }
        if let Some(r) = self.recovery {
            cfg.recovery = r;
        }
        cfg.gbn_fast |= self.gbn_fast;
        cfg.gbn_loss_window |= self.gbn_loss_window;
        (Qp::new(cfg, mem).expect("valid test config"), keys)
    }
}

/// A receive.
pub fn recv(wr_id: u64, offset: u64, len: u32) -> RecvRequest {
    RecvRequest { wr_id, offset, len }
}

/// A remote address in the peer's buffer.
pub fn at(keys: &MrKeys, offset: u64) -> Option<RemoteAddr> {
    Some(RemoteAddr {
        addr: keys.va + offset,
        rkey: keys.rkey,
    })
}

/// Deterministic test bytes (xorshift, eight bytes per step so 8 MiB stays cheap in debug builds).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Fills `len` bytes at `offset` of a QP's buffer with `pattern(seed)`.
pub fn fill(qp: &mut Qp, offset: usize, len: usize, seed: u64) {
    let lkey = qp.config().local_lkey;
    qp.memory_mut().region_bytes_mut(lkey).unwrap()[offset..offset + len]
        .copy_from_slice(&pattern(seed, len));
}

/// `len` bytes at `offset` of a QP's buffer.
pub fn bytes(qp: &Qp, offset: usize, len: usize) -> Vec<u8> {
    let lkey = qp.config().local_lkey;
    qp.memory().region_bytes(lkey).unwrap()[offset..offset + len].to_vec()
}

/// Runs until `a` has `na` completions and `b` has `nb`, or panics naming what is missing.
pub fn run_to(p: &mut SimPair, na: usize, nb: usize) {
    let ok = p.run_until(600_000_000_000, |p| {
        p.a_done.len() >= na && p.b_done.len() >= nb
    });
    assert!(
        ok,
        "stuck at t={}ns: A has {}/{na} completions {:?}, B has {}/{nb} {:?}; A {:?} B {:?}",
        p.now,
        p.a_done.len(),
        p.a_done.last(),
        p.b_done.len(),
        p.b_done.last(),
        p.a.counters(),
        p.b.counters()
    );
}

/// A ping-pong's shape at virtual time: `n` WRITEs of 64 bytes, one at a time, each waited for,
/// over 5 µs links that lose 5 % both ways (`s` says the rest: seed, recovery, go-back-N's timing).
/// Returns the virtual time it took and A's counters.
pub fn lossy_pings(mut s: Setup, n: u64) -> (u64, roceperf::transport::soft::rc::Counters) {
    let link = LinkConfig {
        delay_ns: 5_000,
        loss: 0.05,
        ..LinkConfig::perfect()
    };
    s.ab = link.clone();
    s.ba = link;
    let (mut p, _, kb) = s.build();
    for i in 0..n {
        p.a.post_send(&wr(
            i,
            roceperf::transport::SendOp::Write,
            0,
            64,
            at(&kb, 1024),
        ))
        .unwrap();
        run_to(&mut p, i as usize + 1, 0);
    }
    (p.now, *p.a.counters())
}

/// Asserts that `c` ended with `status`, showing how that status reads when it did not.
#[track_caller]
pub fn ended_with(c: &Completion, status: CompletionStatus) {
    assert_eq!(c.status, status, "{}", c.status.describe());
}

/// Asserts a completion's identity and success.
pub fn ok(c: &Completion, wr_id: u64, op: CompletionOp, byte_len: u32) {
    assert_eq!(
        (c.wr_id, c.op, c.status, c.byte_len),
        (wr_id, op, CompletionStatus::Success, byte_len),
        "completion {c:?}"
    );
}

/// Opcode and PSN of a logged packet.
pub fn head(packet: &[u8]) -> (Opcode, u32, IbRepr) {
    let (r, _) = IbRepr::parse(packet).expect("engine emits parseable packets");
    (r.bth.opcode, r.bth.psn, r)
}

/// [`head`] of every packet `link` logged, in order (its `log` must have been switched on).
pub fn logged(link: &Link) -> Vec<(Opcode, u32, IbRepr)> {
    let log = link.log.as_ref().expect("the link's log is on");
    log.iter().map(|b| head(b)).collect()
}
