use super::*;

/// A device that keeps what it is given: `cap` packets per flush, received as sent.
struct Mem {
    cap: usize,
    queued: Vec<Vec<u8>>,
    sent: Vec<Vec<u8>>,
    inbox: Vec<Vec<u8>>,
}

impl Mem {
    fn new(cap: usize) -> Mem {
        Mem {
            cap,
            queued: Vec::new(),
            sent: Vec::new(),
            inbox: Vec::new(),
        }
    }
}

impl Device for Mem {
    type Addr = u8;
    type Meta = u8;
    fn max_packet(&self) -> usize {
        64
    }
    fn tx_full(&self) -> bool {
        self.queued.len() >= self.cap
    }
    fn tx_pending(&self) -> usize {
        self.queued.len()
    }
    fn tx_push(
        &mut self,
        _now: Instant,
        _to: u8,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool {
        let mut buf = [0u8; 64];
        match fill(&mut buf) {
            Some(n) => {
                self.queued.push(buf[..n].to_vec());
                true
            }
            None => false,
        }
    }
    fn flush(&mut self, _now: Instant) -> Result<(), IoError> {
        self.sent.append(&mut self.queued);
        Ok(())
    }
    fn receive(
        &mut self,
        _now: Instant,
        mut each: impl FnMut(u8, &[u8]),
    ) -> Result<usize, IoError> {
        let n = self.inbox.len();
        for p in self.inbox.drain(..) {
            each(7, &p);
        }
        Ok(n)
    }
}

fn at(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

/// Sends packets 0..n (4 bytes each) at 1 µs intervals, flushing after each, then waits long enough
/// for everything held; returns what left, in order.
fn send(cfg: ImpairConfig, n: u8) -> (Vec<Vec<u8>>, ImpairStats) {
    let mut d = Impaired::new(Mem::new(1000), Some(&cfg));
    for k in 0..n {
        let now = at(u64::from(k) * 1000);
        assert!(d.tx_push(now, 0, |b| {
            b[..4].fill(k);
            Some(4)
        }));
        d.flush(now).unwrap();
    }
    d.flush(at(1 << 40)).unwrap();
    assert_eq!(d.held(), 0);
    (std::mem::take(&mut d.inner_mut().sent), d.stats().0)
}

#[test]
fn certain_loss_drops_everything_and_none_keeps_everything() {
    let all = ImpairConfig {
        loss: 1.0,
        ..ImpairConfig::default()
    };
    let (got, stats) = send(all, 10);
    assert_eq!((got.len(), stats.dropped), (0, 10));
    let (got, stats) = send(ImpairConfig::default(), 10);
    assert_eq!(got.len(), 10);
    assert_eq!(stats, ImpairStats::default());
}

#[test]
fn a_declined_fill_queues_nothing_and_draws_nothing() {
    let cfg = ImpairConfig {
        loss: 0.5,
        seed: 9,
        ..ImpairConfig::default()
    };
    let mut a = Impaired::new(Mem::new(100), Some(&cfg));
    let mut b = Impaired::new(Mem::new(100), Some(&cfg));
    for k in 0..40u8 {
        // `a` is asked more often, but only real packets consume the generator.
        assert!(!a.tx_push(at(0), 0, |_| None));
        let put = |d: &mut Impaired<Mem>| {
            d.tx_push(at(0), 0, |buf| {
                buf[0] = k;
                Some(1)
            })
        };
        assert!(put(&mut a));
        assert!(put(&mut b));
    }
    assert_eq!(a.inner().queued, b.inner().queued);
    assert_eq!(a.stats(), b.stats());
}

#[test]
fn duplicates_and_reordered_packets_arrive_as_counted_and_replay_from_the_seed() {
    let cfg = ImpairConfig {
        duplicate: 0.2,
        reorder: 0.2,
        reorder_ns: 2_500,
        seed: 3,
        ..ImpairConfig::default()
    };
    let (got, stats) = send(cfg, 40);
    assert!(stats.duplicated > 0 && stats.reordered > 0, "{stats:?}");
    assert_eq!(got.len() as u64, 40 + stats.duplicated);
    let mut firsts: Vec<u8> = got.iter().map(|p| p[0]).collect();
    assert!(
        firsts.windows(2).any(|w| w[0] > w[1]),
        "some arrive out of order: {firsts:?}"
    );
    firsts.sort();
    firsts.dedup();
    assert_eq!(firsts, (0..40).collect::<Vec<u8>>(), "every packet arrives");
    assert_eq!(
        send(cfg, 40),
        (got, stats),
        "the same seed hits the same packets"
    );
}

#[test]
fn corruption_flips_exactly_one_bit() {
    let (got, stats) = send(
        ImpairConfig {
            corrupt: 1.0,
            ..ImpairConfig::default()
        },
        1,
    );
    let flipped: u32 = got[0].iter().map(|b| b.count_ones()).sum();
    assert_eq!(flipped, 1, "{got:?}");
    assert_eq!(stats.corrupted, 1);
}

#[test]
fn delay_holds_every_packet_and_back_pressures_when_full() {
    let cfg = ImpairConfig {
        delay_ns: 50_000,
        ..ImpairConfig::default()
    };
    let mut d = Impaired::new(Mem::new(10_000), Some(&cfg));
    assert!(d.tx_push(at(0), 0, |b| {
        b[0] = 1;
        Some(1)
    }));
    d.flush(at(49_999)).unwrap();
    assert!(d.inner().sent.is_empty());
    assert_eq!((d.tx_pending(), d.poll_at()), (1, Some(at(50_000))));
    d.flush(at(50_000)).unwrap();
    assert_eq!(d.inner().sent, vec![vec![1]]);
    for _ in 0..DELAY_SLOTS {
        assert!(!d.tx_full());
        d.tx_push(at(60_000), 0, |_| Some(1));
    }
    assert!(d.tx_full(), "a full delay line makes the sender wait");
    assert_eq!(d.stats().0.delayed, 1 + DELAY_SLOTS as u64);
}

#[test]
fn bursts_lose_at_the_asked_rate_in_runs_of_the_asked_length() {
    let cfg = ImpairConfig {
        loss: 0.02,
        burst: 8.0,
        seed: 5,
        ..ImpairConfig::default()
    };
    let mut f: Fault<u8> = Fault::new(&cfg.tx(), cfg.seed, 16);
    let lost: Vec<bool> = (0..400_000)
        .map(|_| f.decide(at(0)) == Verdict::Drop)
        .collect();
    let rate = lost.iter().filter(|&&l| l).count() as f64 / lost.len() as f64;
    let runs = lost.windows(2).filter(|w| !w[0] && w[1]).count();
    let mean_run = lost.iter().filter(|&&l| l).count() as f64 / runs as f64;
    assert!((0.015..0.025).contains(&rate), "loss rate {rate}");
    assert!((6.5..9.5).contains(&mean_run), "mean burst {mean_run}");
}

#[test]
fn received_packets_are_impaired_on_their_own() {
    let cfg = ImpairConfig::parse("rx:loss=50%,rx:dup=20%,seed=4").unwrap();
    let mut d = Impaired::new(Mem::new(10), Some(&cfg));
    assert!(d.tx_push(at(0), 0, |_| Some(1)), "transmit is untouched");
    assert_eq!(d.stats().0, ImpairStats::default());
    d.inner_mut().inbox = (0..200u8).map(|k| vec![k]).collect();
    let mut got = Vec::new();
    d.receive(at(0), |meta, p| {
        assert_eq!(meta, 7);
        got.push(p[0]);
    })
    .unwrap();
    let rx = d.stats().1;
    assert!(rx.dropped > 60 && rx.duplicated > 5, "{rx:?}");
    assert_eq!(got.len() as u64, 200 - rx.dropped + rx.duplicated);
}
