//! What the fault injector costs per packet when it is on but hits (almost) nothing: the price of
//! impairing the fast path, against the per-packet budget of the soft transport.
//!
//! A device that only copies each 4 KiB packet into a ring of slots (what a batch does) is driven
//! plain and wrapped in `Impaired` with a loss of 1e-9 (every packet draws a number; none is lost),
//! and with every impairment at 1e-9. Reports ns per packet for each, best of five rounds.
//!
//! `cargo run --release --example impair_bench -- [packets per round, default 5000000]`

use std::time::Instant;

use roceperf::transport::soft::io::IoError;
use roceperf::transport::soft::io::device::Device;
use roceperf::transport::soft::io::fault::Impaired;
use roceperf::transport::soft::io::impair::ImpairConfig;
use roceperf::transport::soft::rc::Instant as RcInstant;

const PACKET: usize = 4096 + 28;
const SLOTS: usize = 64;

/// A batch of slots the packets are written into and forgotten at each flush.
struct Slots {
    mem: Vec<u8>,
    queued: usize,
}

impl Device for Slots {
    type Addr = ();
    type Meta = ();
    fn max_packet(&self) -> usize {
        PACKET
    }
    fn tx_full(&self) -> bool {
        self.queued == SLOTS
    }
    fn tx_pending(&self) -> usize {
        self.queued
    }
    fn tx_push(
        &mut self,
        _now: RcInstant,
        _to: (),
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool {
        let at = self.queued * PACKET;
        match fill(&mut self.mem[at..at + PACKET]) {
            Some(_) => {
                self.queued += 1;
                true
            }
            None => false,
        }
    }
    fn flush(&mut self, _now: RcInstant) -> Result<(), IoError> {
        // What a send would read: the copies must happen.
        std::hint::black_box(&mut self.mem);
        self.queued = 0;
        Ok(())
    }
    fn receive(&mut self, _now: RcInstant, _each: impl FnMut((), &[u8])) -> Result<usize, IoError> {
        Ok(0)
    }
}

fn round<D: Device<Addr = ()>>(dev: &mut D, packets: u64, src: &[u8]) -> f64 {
    let start = Instant::now();
    for k in 0..packets {
        if dev.tx_full() {
            dev.flush(RcInstant::from_nanos(k)).unwrap();
        }
        dev.tx_push(RcInstant::from_nanos(k), (), |buf| {
            buf[..src.len()].copy_from_slice(std::hint::black_box(src));
            Some(src.len())
        });
    }
    start.elapsed().as_nanos() as f64 / packets as f64
}

fn best<D: Device<Addr = ()>>(dev: &mut D, packets: u64, src: &[u8]) -> f64 {
    (0..5)
        .map(|_| round(dev, packets, src))
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let packets: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000_000);
    let src = vec![0x5au8; PACKET];
    let slots = || Slots {
        mem: vec![0u8; SLOTS * PACKET],
        queued: 0,
    };
    let plain = best(&mut slots(), packets, &src);
    let loss = ImpairConfig::parse("loss=0.0000001%,seed=1").unwrap();
    let lossy = best(&mut Impaired::new(slots(), Some(&loss)), packets, &src);
    let all = ImpairConfig::parse(
        "loss=0.0000001%,dup=0.0000001%,reorder=0.0000001%,corrupt=0.0000001%,seed=1",
    )
    .unwrap();
    let every = best(&mut Impaired::new(slots(), Some(&all)), packets, &src);
    println!("4 KiB packets, ns per packet (best of 5 rounds of {packets}):");
    println!("  plain device               {plain:7.1}");
    println!(
        "  impaired, loss 1e-9        {lossy:7.1}  (+{:.1} ns)",
        lossy - plain
    );
    println!(
        "  impaired, all four 1e-9    {every:7.1}  (+{:.1} ns)",
        every - plain
    );
}
