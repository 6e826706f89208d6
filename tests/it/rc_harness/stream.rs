//! A bandwidth test's shape at virtual time: a stream of 64 KiB WRITEs over a rate-limited lossy link.

use roceperf::params::Recovery;
use roceperf::transport::soft::rc::Counters;
use roceperf::transport::soft::sim::{LinkConfig, SimPair};
use roceperf::transport::{CompletionStatus, SendOp};

use super::{Setup, at, wr};

/// Bytes of each WRITE.
pub const LEN: u32 = 65_536;
/// WRITEs posted at once (the send queue a bandwidth test keeps full).
pub const DEPTH: u64 = 128;

/// One stream: what runs over which link.
#[derive(Clone, Debug)]
pub struct StreamSpec {
    pub recovery: Recovery,
    /// Loss of each direction (the long-run rate when `burst` is set).
    pub loss: f64,
    /// Gilbert–Elliott mean burst length; 0: independent losses.
    pub burst: f64,
    /// WRITEs in all.
    pub msgs: u64,
    /// The go-back-N window, PSNs (the soft transport's default: 1024).
    pub window: u32,
    /// Go-back-N as between two roceperf endpoints (the probe timer); off: as rxe.
    pub gbn_fast: bool,
    /// With `gbn_fast`: go-back-N's loss-reactive window (on between roceperf endpoints).
    pub loss_window: bool,
    pub seed: u64,
}

impl StreamSpec {
    /// `msgs` WRITEs with the soft transport's window, at `loss` (independent losses), seed 1, as
    /// between two roceperf endpoints (go-back-N: the probe and the loss-reactive window).
    pub fn new(recovery: Recovery, loss: f64, msgs: u64) -> StreamSpec {
        StreamSpec {
            recovery,
            loss,
            burst: 0.0,
            msgs,
            window: 1024,
            gbn_fast: true,
            loss_window: true,
            seed: 1,
        }
    }
}

/// What one stream of WRITEs achieved at virtual time.
#[derive(Debug)]
pub struct Stream {
    /// Goodput, Gb/s.
    pub gbps: f64,
    /// The requester's counters.
    pub a: Counters,
    /// The responder's counters.
    pub b: Counters,
    /// Packets the data link lost.
    pub lost_ab: u64,
    /// Packets the answer link lost.
    pub lost_ba: u64,
}

impl Stream {
    /// Data packets of the stream (16 per 64 KiB WRITE at PMTU 4096).
    pub fn data_packets(spec: &StreamSpec) -> u64 {
        spec.msgs * u64::from(LEN / 4096)
    }

    /// Packets resent per data packet.
    pub fn retx_per_packet(&self, spec: &StreamSpec) -> f64 {
        self.a.retransmitted_packets as f64 / Self::data_packets(spec) as f64
    }
}

/// WRITEs of 64 KiB at PMTU 4096, [`DEPTH`] in flight, over a 10 Gb/s link with a 5 µs one-way
/// delay (a path whose bandwidth-delay product is 3 packets) that loses `spec.loss` of its packets
/// in both directions: the goodput at virtual time.
pub fn stream(spec: &StreamSpec) -> Stream {
    let link = LinkConfig {
        delay_ns: 5_000,
        rate_gbps: 10.0,
        loss: spec.loss,
        burst: spec.burst,
        ..LinkConfig::perfect()
    };
    let mut s = Setup::new(4096, DEPTH as usize * LEN as usize);
    s.ab = link.clone();
    s.ba = link;
    s.seed = spec.seed;
    s.window = Some(spec.window);
    s.recovery = Some(spec.recovery);
    s.gbn_fast = spec.gbn_fast;
    s.gbn_loss_window = spec.loss_window;
    let (mut p, _, kb) = s.build();
    let msgs = spec.msgs;
    let mut posted = 0u64;
    let post = |p: &mut SimPair, i: u64| {
        let off = (i % DEPTH) * u64::from(LEN);
        p.a.post_send(&wr(i, SendOp::Write, off, LEN, at(&kb, off)))
            .unwrap();
    };
    while posted < msgs.min(DEPTH) {
        post(&mut p, posted);
        posted += 1;
    }
    loop {
        let done = p.a_done.len() as u64;
        let ok = p.run_until(600_000_000_000, |p| p.a_done.len() as u64 > done);
        assert!(
            ok,
            "{spec:?}: stuck at {} of {msgs}; A {:?}",
            p.a_done.len(),
            p.a.counters()
        );
        while posted < msgs && posted < p.a_done.len() as u64 + DEPTH {
            post(&mut p, posted);
            posted += 1;
        }
        if p.a_done.len() as u64 == msgs {
            break;
        }
    }
    assert!(
        p.a_done
            .iter()
            .all(|c| c.status == CompletionStatus::Success)
    );
    Stream {
        gbps: (msgs * u64::from(LEN) * 8) as f64 / p.now as f64,
        a: *p.a.counters(),
        b: *p.b.counters(),
        lost_ab: p.ab.stats.lost,
        lost_ba: p.ba.stats.lost,
    }
}
