//! The timed loops every link shares: ping-pong round trips, and a stream sender's run.

use std::time::{Duration, Instant};

use crate::cli::Config;
use crate::error::Result;
use crate::figures::RoundTrips;

/// Runs `trip` (one round trip) `cfg.warmup` times unrecorded, then `cfg.iters` times, or for
/// `cfg.duration` when -D is given, recording each round trip's time.
pub fn round_trips(cfg: &Config, mut trip: impl FnMut() -> Result<()>) -> Result<RoundTrips> {
    let mut trips = RoundTrips::new();
    let mut stop: Option<Instant> = None;
    let mut i = 0u64;
    loop {
        if i == cfg.warmup {
            stop = cfg.duration.map(|d| Instant::now() + d);
        }
        let t0 = Instant::now();
        trip()?;
        let t1 = Instant::now();
        if i >= cfg.warmup {
            trips.record(t1.duration_since(t0).as_nanos() as u64);
        }
        i += 1;
        let done = match stop {
            Some(s) => t1 >= s,
            None => i >= cfg.warmup + cfg.iters,
        };
        if done {
            return Ok(trips);
        }
    }
}

/// Calls `send` (which returns the bytes it sent) for the warm-up and -D; returns (bytes, ns) sent.
pub fn send_for_run(cfg: &Config, mut send: impl FnMut() -> Result<u64>) -> Result<(u64, u64)> {
    let run = Duration::from_millis(u64::from(cfg.warmup_ms)) + cfg.duration.unwrap_or_default();
    let start = Instant::now();
    let mut now = start;
    let mut sent = 0u64;
    while now.duration_since(start) < run {
        sent += send()?;
        now = Instant::now();
    }
    Ok((sent, now.duration_since(start).as_nanos() as u64))
}
