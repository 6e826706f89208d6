//! Deliberate, seeded impairment of transmitted packets: loss, duplication, reordering, corruption.
//!
//! `tc netem` (scripts/netns.sh) is the honest way to impair a link, but not every kernel has it
//! (the development VMs' kernel lacks sch_netem). The soft transport can therefore impair its own
//! transmit path, driven by `ROCEPERF_IMPAIR`, e.g. `loss=1%,duplicate=1%,reorder=5%,corrupt=0.1%,seed=7`.
//! Decisions come from a seeded generator, so a run is reproducible; the hot-path cost is one
//! random number and a few compares per packet, and nothing when impairment is off.

use std::fmt;

use super::batch::TxBatch;
use crate::transport::rng::SplitMix64;

/// The environment variable the soft transport reads its impairment from.
pub const IMPAIR_ENV: &str = "ROCEPERF_IMPAIR";

/// Probabilities (0.0..=1.0) of each impairment per transmitted packet, and the seed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ImpairConfig {
    /// Drop the packet.
    pub loss: f64,
    /// Send it twice.
    pub duplicate: f64,
    /// Swap it with the packet queued before it.
    pub reorder: f64,
    /// Flip one bit of it (the receiver's ICRC check must catch it).
    pub corrupt: f64,
    /// Seed of the generator.
    pub seed: u64,
}

/// A malformed `ROCEPERF_IMPAIR` value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "{IMPAIR_ENV}: {0}; expected comma-separated loss=P,duplicate=P,reorder=P,corrupt=P,seed=N with P like 1% or 0.01"
)]
pub struct ImpairParseError(String);

impl ImpairConfig {
    /// True when nothing is impaired.
    pub fn is_none(&self) -> bool {
        self.loss == 0.0 && self.duplicate == 0.0 && self.reorder == 0.0 && self.corrupt == 0.0
    }

    /// Parses `loss=1%,duplicate=0.5%,reorder=5%,corrupt=0.1%,seed=7` (every key optional).
    pub fn parse(spec: &str) -> Result<ImpairConfig, ImpairParseError> {
        let mut cfg = ImpairConfig {
            seed: 1,
            ..ImpairConfig::default()
        };
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| ImpairParseError(format!("'{item}' has no '='")))?;
            if key == "seed" {
                cfg.seed = value
                    .parse()
                    .map_err(|_| ImpairParseError(format!("seed '{value}' is not a number")))?;
                continue;
            }
            let p = parse_probability(value).ok_or_else(|| {
                ImpairParseError(format!("'{value}' for {key} is not a probability"))
            })?;
            match key {
                "loss" => cfg.loss = p,
                "duplicate" | "dup" => cfg.duplicate = p,
                "reorder" => cfg.reorder = p,
                "corrupt" => cfg.corrupt = p,
                _ => return Err(ImpairParseError(format!("unknown key '{key}'"))),
            }
        }
        Ok(cfg)
    }

    /// Reads `ROCEPERF_IMPAIR`; `Ok(None)` when it is unset or empty.
    pub fn from_env() -> Result<Option<ImpairConfig>, ImpairParseError> {
        match std::env::var(IMPAIR_ENV) {
            Ok(v) if !v.trim().is_empty() => ImpairConfig::parse(&v).map(Some),
            _ => Ok(None),
        }
    }
}

impl fmt::Display for ImpairConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "loss {}%, duplicate {}%, reorder {}%, corrupt {}%, seed {}",
            self.loss * 100.0,
            self.duplicate * 100.0,
            self.reorder * 100.0,
            self.corrupt * 100.0,
            self.seed
        )
    }
}

fn parse_probability(v: &str) -> Option<f64> {
    let p = match v.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().ok()? / 100.0,
        None => v.trim().parse::<f64>().ok()?,
    };
    (0.0..=1.0).contains(&p).then_some(p)
}

/// How many packets each impairment hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct ImpairStats {
    /// Packets dropped.
    pub dropped: u64,
    /// Extra copies sent.
    pub duplicated: u64,
    /// Packets swapped with their predecessor.
    pub reordered: u64,
    /// Packets with a flipped bit.
    pub corrupted: u64,
}

/// Applies an [`ImpairConfig`] to each packet as it is queued.
pub struct Impairer {
    loss: u64,
    duplicate: u64,
    reorder: u64,
    corrupt: u64,
    rng: SplitMix64,
    /// What was done so far.
    pub stats: ImpairStats,
}

/// A probability as a threshold on a uniform u64, so the per-packet test is an integer compare.
fn threshold(p: f64) -> u64 {
    if p >= 1.0 {
        u64::MAX
    } else {
        (p * u64::MAX as f64) as u64
    }
}

impl Impairer {
    /// An impairer with `cfg`'s probabilities and seed.
    pub fn new(cfg: &ImpairConfig) -> Impairer {
        Impairer {
            loss: threshold(cfg.loss),
            duplicate: threshold(cfg.duplicate),
            reorder: threshold(cfg.reorder),
            corrupt: threshold(cfg.corrupt),
            rng: SplitMix64::new(cfg.seed),
            stats: ImpairStats::default(),
        }
    }

    /// The next random bits: SplitMix64 is tiny, fast, and good enough to pick which packets to hit.
    #[inline]
    fn next(&mut self) -> u64 {
        self.rng.next_u64()
    }

    fn hit(&mut self, threshold: u64) -> bool {
        threshold != 0 && self.next() < threshold
    }

    /// Impairs the packet just queued in `tx`: maybe drops, corrupts, duplicates or swaps it with
    /// the one before.
    pub fn after_push(&mut self, tx: &mut TxBatch) {
        if self.hit(self.loss) {
            if tx.drop_last() {
                self.stats.dropped += 1;
            }
            return;
        }
        if self.hit(self.corrupt) {
            let r = self.next();
            if let Some(pkt) = tx.last_mut().filter(|p| !p.is_empty()) {
                let at = (r as usize >> 3) % pkt.len();
                pkt[at] ^= 1 << (r & 7);
                self.stats.corrupted += 1;
            }
        }
        if self.hit(self.duplicate) && tx.duplicate_last() {
            self.stats.duplicated += 1;
        }
        if self.hit(self.reorder) && tx.swap_last_two() {
            self.stats.reordered += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_percentages_fractions_and_seed() {
        let c =
            ImpairConfig::parse("loss=1%, duplicate=0.5%,reorder=0.05,corrupt=0,seed=42").unwrap();
        assert_eq!(
            (c.loss, c.duplicate, c.reorder, c.corrupt, c.seed),
            (0.01, 0.005, 0.05, 0.0, 42)
        );
        assert!(!c.is_none());
        assert!(ImpairConfig::parse("").unwrap().is_none());
        let e = ImpairConfig::parse("los=1%").unwrap_err().to_string();
        assert!(
            e.contains("unknown key 'los'") && e.contains(IMPAIR_ENV),
            "{e}"
        );
        assert!(ImpairConfig::parse("loss=150%").is_err());
        assert!(ImpairConfig::parse("loss").is_err());
    }

    fn queue(tx: &mut TxBatch, imp: &mut Impairer, n: u8) {
        let dst = "127.0.0.1:4791".parse().unwrap();
        for k in 0..n {
            tx.push(dst, |b| {
                b[..4].copy_from_slice(&[k; 4]);
                4
            });
            imp.after_push(tx);
        }
    }

    #[test]
    fn certain_loss_drops_everything_and_none_keeps_everything() {
        let mut tx = TxBatch::new(16, 64);
        let mut all = Impairer::new(&ImpairConfig {
            loss: 1.0,
            ..ImpairConfig::default()
        });
        queue(&mut tx, &mut all, 10);
        assert_eq!((tx.pending(), all.stats.dropped), (0, 10));
        let mut none = Impairer::new(&ImpairConfig::default());
        queue(&mut tx, &mut none, 10);
        assert_eq!(tx.pending(), 10);
        assert_eq!(none.stats, ImpairStats::default());
    }

    /// Sends through a real socket and reads back the order and copies that arrived.
    fn deliver(cfg: ImpairConfig, n: u8) -> (Vec<u8>, ImpairStats) {
        use super::super::batch::RxBatch;
        use super::super::udp::{UdpConfig, UdpSocket};
        let ip: std::net::IpAddr = "127.0.0.8".parse().unwrap();
        let port = std::net::UdpSocket::bind((ip, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ucfg = UdpConfig {
            port,
            ..UdpConfig::default()
        };
        let rx_sock = UdpSocket::bind_scoped(ip, 0, &ucfg).unwrap();
        let tx_sock = UdpSocket::bind_scoped("127.0.0.9".parse().unwrap(), 0, &ucfg).unwrap();
        let mut tx = TxBatch::new(64, 64);
        let mut imp = Impairer::new(&cfg);
        for k in 0..n {
            tx.push(rx_sock.local_addr(), |b| {
                b[..4].copy_from_slice(&[k; 4]);
                4
            });
            imp.after_push(&mut tx);
            if tx.is_full() {
                tx_sock.send_batch(&mut tx).unwrap();
            }
        }
        tx_sock.send_batch(&mut tx).unwrap();
        let mut rx = RxBatch::new(64, 64);
        let mut got = Vec::new();
        for _ in 0..200 {
            rx_sock.recv_batch(&mut rx).unwrap();
            for i in 0..rx.len() {
                let d = rx.datagram(i).data;
                assert_eq!(d.len(), 4);
                got.push(d[0]);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        (got, imp.stats)
    }

    #[test]
    fn duplicates_and_swaps_arrive_as_counted() {
        let cfg = ImpairConfig {
            duplicate: 0.2,
            reorder: 0.2,
            seed: 3,
            ..ImpairConfig::default()
        };
        let (got, stats) = deliver(cfg, 40);
        assert!(stats.duplicated > 0 && stats.reordered > 0, "{stats:?}");
        assert_eq!(got.len() as u64, 40 + stats.duplicated);
        let mut sorted = got.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            sorted,
            (0..40).collect::<Vec<u8>>(),
            "every packet arrives at least once"
        );
        assert!(
            got.windows(2).any(|w| w[0] > w[1]),
            "some arrive out of order: {got:?}"
        );
        // Reproducible: the same seed hits the same packets.
        assert_eq!(deliver(cfg, 40), (got, stats));
    }

    #[test]
    fn corruption_flips_exactly_one_bit() {
        let mut tx = TxBatch::new(4, 64);
        let mut imp = Impairer::new(&ImpairConfig {
            corrupt: 1.0,
            ..ImpairConfig::default()
        });
        queue(&mut tx, &mut imp, 1);
        let pkt = tx.last_mut().unwrap();
        let flipped: u32 = pkt.iter().map(|b| b.count_ones()).sum();
        assert_eq!(flipped, 1, "{pkt:?}");
        assert_eq!(imp.stats.corrupted, 1);
    }
}
