//! One size on the data path: ready the buffers, run this side's driver, check what landed.
//!
//! The drivers' raw measurements become [`SizeResult`]s here.

use super::Error;
use super::notes::Warning;
use super::plan::Plan;
use crate::bench::interval::{Hooks, Intervals};
use crate::bench::pace::PaceSpec;
use crate::bench::{self, Layout, bw, lat, validate};
use crate::params::{ConnType, Metric, RateUnits, Role, RunMode, TestKind, TransportKind, Verb};
use crate::results::{Measured, SizeResult};
use crate::stats::flows::QpShare;
use crate::stats::{BandwidthStats, LatencyStats, Pacing};
use crate::transport::{self, Endpoint, RemoteAddr};
use std::time::{Duration, Instant};

/// One size as a dialect asks this side to run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SizeRun {
    /// Message size.
    pub size: u64,
    /// The part this side's drivers play (perftest's WRITE latency swaps who writes first).
    pub role: Role,
    /// Iterations or duration.
    pub mode: RunMode,
    /// Iterations run before measuring.
    pub warmup: u64,
    /// The peer marks each latency message with its iteration (a roceperf peer; a perftest one does
    /// not), so UC/UD latency tests can count a lost message and go on (`bench::unreliable`).
    pub marked: bool,
    /// Latency tests: one SEND or WRITE in this many is signaled ([`lat_signal_every`]).
    pub signal_every: u32,
}

/// `--validate`, before a size starts: the source holds the size's pattern (bandwidth tests send it as is;
/// latency tests refill it per iteration), the target (and a READ requester's slots) is cleared so that
/// missing data cannot pass, and a READ responder's target holds the pattern its peer reads.
pub(crate) fn prepare_validation<E: Endpoint>(plan: &Plan, ep: &mut E, size: u64) {
    let (n, half) = (size as usize, plan.layout.half as usize);
    let seed = validate::seed(size, None);
    let read_responder = plan.test.verb == Verb::Read && plan.role == Role::Server;
    let slots = 2 * half..2 * half + plan.layout.read_slots as usize;
    for q in 0..ep.qp_count() {
        let buf = ep.buffer_mut(q);
        validate::fill(&mut buf[..n], seed);
        if read_responder {
            validate::fill(&mut buf[half..half + n], seed);
        } else {
            buf[half..half + n].fill(0);
        }
        buf[slots.clone()].fill(0);
    }
}

/// Readies the buffers before the barrier that starts `size`: the `--validate` pattern, WRITE
/// latency's marker byte, and the atomic tests' words (with or without `--validate`, so that the
/// traffic is the same either way).
pub(crate) fn prepare<E: Endpoint>(plan: &Plan, ep: &mut E, size: u64) {
    if let Some(a) = plan.atomics {
        for q in 0..ep.qp_count() {
            a.prepare(ep.buffer_mut(q), plan.layout.half as usize, q);
        }
        return;
    }
    if plan.validate {
        prepare_validation(plan, ep, size);
    }
    if plan.test == TestKind::WRITE_LAT {
        lat::clear_marker(ep, &plan.layout, size);
    }
}

/// True where `--validate` checks the WRITE target at the end of each size: the side written to.
pub(crate) fn checks_write_target(plan: &Plan) -> bool {
    plan.validate
        && plan.test == TestKind::WRITE_BW
        && (plan.role == Role::Server || plan.bidirectional)
}

/// `--validate`, WRITE bandwidth: after the writer's last completion every target region holds the size's
/// pattern. Keeps the datapath polled for a moment, because over TCP a completed WRITE may still be in
/// the kernel's buffers.
pub(crate) fn check_write_target<E: Endpoint>(
    ep: &mut E,
    layout: Layout,
    size: u64,
) -> Result<(), Error> {
    let (n, half) = (size as usize, layout.half as usize);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut comps = [transport::Completion::EMPTY; 16];
    loop {
        let bad = (0..ep.qp_count()).find_map(|q| {
            validate::check(
                &ep.buffer(q)[half..half + n],
                size,
                None,
                None,
                "WRITE target",
            )
            .err()
        });
        match bad {
            None => return Ok(()),
            Some(e) if Instant::now() > deadline => return Err(e.into()),
            Some(_) => {
                ep.poll_cq(&mut comps)
                    .map_err(|source| bench::Error::Transport {
                        during: "waiting for the last WRITEs to land",
                        source,
                    })?;
            }
        }
    }
}

/// Bandwidth figures of `messages` of `size` in `elapsed_ns`, with the pacing of this side when
/// `--rate_limit` was given (`measured_at`: `sender` or `receiver`).
pub(crate) fn bandwidth(
    plan: &Plan,
    size: u64,
    messages: u64,
    elapsed_ns: u64,
    peak: Option<f64>,
    measured_at: &str,
) -> BandwidthStats {
    let mut b = BandwidthStats::compute(size, messages, elapsed_ns, peak);
    if let Some(l) = plan.rate_limit {
        let achieved = match l.units {
            RateUnits::GbPerSec => b.avg_gbps,
            RateUnits::MibPerSec => b.avg_mibps,
            RateUnits::MsgPerSec => b.msg_rate_mpps * 1e6,
        };
        let (units, kind) = (l.units.symbol(), l.kind.name());
        b.pacing = Some(Pacing::new(
            l.value,
            achieved,
            units,
            kind,
            l.burst_size,
            measured_at,
        ));
    }
    b
}

/// True where `--validate` checks the atomics' words at the end of each size: the side they ran on.
pub(crate) fn checks_atomic_target(plan: &Plan) -> bool {
    plan.validate && plan.atomics.is_some() && (plan.role == Role::Server || plan.bidirectional)
}

/// `--validate`, atomics: once the peer's results are in (it set its tallies before sending them),
/// every queue pair's words hold what the peer's operations leave.
pub(crate) fn check_atomic_target<E: Endpoint>(plan: &Plan, ep: &E) -> Result<(), Error> {
    if let Some(a) = plan.atomics {
        for q in 0..ep.qp_count() {
            a.check_target(ep.buffer(q), plan.layout.half as usize, q)?;
        }
    }
    Ok(())
}

/// Says on stderr when a timed run's measurement `took` longer than asked by more than its margin.
fn warn_if_overran(mode: RunMode, took: Duration, window: bool) {
    if let Some(w) = overran(mode, took, window) {
        w.emit();
    }
}

/// The warning for a timed run whose measurement `took` longer than asked by more than its margin
/// (at least 1 s): the measured `window` (`-D` less both margins), or the whole run.
fn overran(mode: RunMode, took: Duration, window: bool) -> Option<Warning> {
    let RunMode::Duration { secs, margin } = mode else {
        return None;
    };
    let expected = match window {
        true => secs.saturating_sub(2 * margin),
        false => secs,
    };
    (!mode.is_endless() && took > Duration::from_secs(expected + margin.max(1))).then_some(
        Warning::Overran {
            secs,
            margin,
            expected,
            took,
        },
    )
}

/// What a size's drivers ask while they run, each at most every half millisecond.
pub(crate) struct Stops<'a> {
    /// True once this side should stop: a signal, the peer done (its results sent) or stopped.
    pub stop: &'a mut dyn FnMut() -> bool,
    /// True once a signal stopped either side: a receiver counting `-n` messages stops on it with
    /// what arrived, where the peer merely being done is no reason to stop.
    pub cut: &'a mut dyn FnMut() -> bool,
}

/// Measures one size on this side; `None` where this side only serves (the peer measures). A timed
/// run that measured for longer than asked, by more than its margin, says so on stderr.
pub(crate) fn measure<E: Endpoint>(
    plan: &Plan,
    ep: &mut E,
    run: &SizeRun,
    stops: Stops<'_>,
    remotes: &[RemoteAddr],
    recvs: &mut bw::RecvState,
    endless: Option<Intervals<'_>>,
) -> Result<Option<SizeResult>, Error> {
    let began = Instant::now();
    let Stops { stop, cut } = stops;
    let mut stop = stop;
    let client = run.role == Role::Client;
    let test = plan.test;
    let size = run.size;
    match test.metric {
        Metric::Bandwidth => {
            let spec = bw::BwSpec {
                verb: test.verb,
                size,
                mode: run.mode,
                tx_depth: plan.tx_depth,
                cq_mod: plan.cq_mod_at(size),
                warmup: run.warmup,
                rx_depth: plan.depths.rx,
                // With TCP a completion means the kernel took the bytes, so the first socket buffer's
                // worth completes at memory speed and perftest's peak would be meaningless.
                // Paced, every burst ends on a signaled completion, which perftest's peak (one
                // completion per -Q messages) cannot place; the peak would be the burst's, anyway.
                peak: plan.transport != TransportKind::Tcp && plan.rate_limit.is_none(),
                cpu_util: plan.cpu_util,
                layout: plan.layout,
                validate: plan.validate,
                pace: plan.rate_limit.map(|l| PaceSpec {
                    msgs_per_sec: l.msgs_per_sec(size),
                    burst: l.burst_size,
                }),
                unreliable: plan.connection.is_unreliable(),
                atomic: plan.atomics,
                qp_series: plan.output.qp_series,
            };
            let receiving = !plan.bidirectional && !client && test.verb.consumes_receive();
            let m = if plan.bidirectional || client {
                let duplex = (plan.bidirectional && test.verb.consumes_receive()).then_some(recvs);
                // A run without end's intervals; and every run's stop: a signal, or the peer
                // stopped by one (in the normal course the peer says nothing while this side runs).
                let hooks = Hooks {
                    // Rebuilt, so that the sink's borrow shortens to the stop's.
                    intervals: endless.map(|i| Intervals {
                        every: i.every,
                        sink: i.sink,
                    }),
                    stop: Some(&mut *stop),
                };
                bw::active(ep, &spec, remotes, duplex, hooks)?
            } else if receiving {
                let hooks = Hooks {
                    intervals: endless.map(|i| Intervals {
                        every: i.every,
                        sink: i.sink,
                    }),
                    stop: Some(&mut *cut),
                };
                bench::bw_receiver(ep, &spec, recvs, &mut stop, hooks)?
            } else {
                bw::passive(ep, bw::SERVING, &mut stop, None)?;
                return Ok(None);
            };
            let iterations = match run.mode {
                RunMode::Iterations(n) => n,
                RunMode::Duration { .. } => m.messages,
            };
            let at = if receiving { "receiver" } else { "sender" };
            let mut b = bandwidth(plan, size, m.messages, m.elapsed_ns, m.best_ns_per_msg, at);
            b.qps = QpShare::from_counts(size, &m.per_qp, m.elapsed_ns);
            b.qp_series = m.series.map(Box::new);
            let result = SizeResult {
                size,
                iterations,
                measured: Measured::Bandwidth(b),
                cpu_util: m.cpu_util,
                lost: m.lost,
            };
            warn_if_overran(run.mode, Duration::from_nanos(m.elapsed_ns), true);
            Ok(Some(result))
        }
        Metric::Latency => {
            if test.verb.reads_back() && !client {
                bw::passive(ep, bw::SERVING, &mut stop, None)?;
                return Ok(None);
            }
            let spec = lat::LatSpec {
                verb: test.verb,
                size,
                mode: run.mode,
                warmup: run.warmup,
                rtt_factor: test.rtt_factor(),
                cpu_util: plan.cpu_util,
                layout: plan.layout,
                validate: plan.validate,
                gap: plan.latency_gap,
                unreliable: plan.connection.is_unreliable() && run.marked,
                loss_timeout: loss_timeout(plan),
                atomic: plan.atomics,
                signal_every: run.signal_every,
            };
            let m = bench::latency(ep, &spec, run.role, remotes[0], recvs, &mut stop)?;
            let stats = LatencyStats::from_histogram(&m.histogram, &plan.output.percentiles);
            let result = SizeResult {
                size,
                iterations: stats.samples,
                measured: Measured::Latency {
                    stats,
                    histogram: m.histogram,
                },
                cpu_util: m.cpu_util,
                lost: m.lost,
            };
            // The latency window starts with the run, warm-up inside it: the run's time is the
            // measurement's.
            warn_if_overran(run.mode, began.elapsed(), false);
            Ok(Some(result))
        }
    }
}

/// Latency tests between two soft RC queue pairs: SEND and WRITE are signaled one in this many (see
/// [`lat::LatSpec::signal_every`]).
const SOFT_LAT_SIGNAL_EVERY: u32 = 16;

/// How often a latency test signals its SEND or WRITE, given the peer's transport (`None`: a perftest
/// peer): one in [`SOFT_LAT_SIGNAL_EVERY`] when both sides are soft RC queue pairs, whose ACKs cost
/// the host a packet each; every post otherwise, as perftest (a NIC acknowledges in hardware, and a
/// verbs or TCP queue is one deep in a latency test). Both sides must agree: a timed run ends after
/// a multiple of it, so that the responder's last answer is signaled too.
pub(crate) fn lat_signal_every(plan: &Plan, peer: Option<TransportKind>) -> u32 {
    let soft_rc = plan.transport == TransportKind::Soft && plan.connection == ConnType::Rc;
    if soft_rc && peer == Some(TransportKind::Soft) {
        SOFT_LAT_SIGNAL_EVERY
    } else {
        1
    }
}

/// UC/UD latency: how long a client waits for a reply before it counts the iteration lost; `-u`'s
/// ACK timeout (4.096 µs × 2^N, 67 ms at perftest's default 14), which RC would retransmit after.
pub(crate) fn loss_timeout(plan: &Plan) -> Duration {
    Duration::from_nanos(4096u64 << plan.device.qp_timeout.unwrap_or(14).min(31))
}

/// Bidirectional: the sum of what each side sent, as perftest prints it. `count_both`: the row's
/// iterations are both directions' messages (roceperf's duration mode), else this side's.
pub(crate) fn combine(mine: SizeResult, theirs: &SizeResult, count_both: bool) -> SizeResult {
    match (&mine.measured, &theirs.measured) {
        (Measured::Bandwidth(a), Measured::Bandwidth(b)) => SizeResult {
            iterations: if count_both {
                a.messages + b.messages
            } else {
                mine.iterations
            },
            measured: Measured::Bandwidth(a.combined(b)),
            ..mine
        },
        _ => mine,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::tests::parse_raw;

    fn plan(args: &[&str]) -> Plan {
        Plan::new(parse_raw("write_lat".parse().unwrap(), args).unwrap())
    }

    #[test]
    fn only_two_soft_rc_queue_pairs_signal_one_latency_message_in_sixteen() {
        let soft = plan(&["-d", "lo"]);
        assert_eq!(lat_signal_every(&soft, Some(TransportKind::Soft)), 16);
        // A verbs peer's queue is one deep; a perftest peer (None) runs its own loop.
        assert_eq!(lat_signal_every(&soft, Some(TransportKind::Verbs)), 1);
        assert_eq!(lat_signal_every(&soft, None), 1);
        let uc = plan(&["-d", "lo", "-c", "UC"]);
        assert_eq!(lat_signal_every(&uc, Some(TransportKind::Soft)), 1);
        let tcp = plan(&["--transport", "tcp"]);
        assert_eq!(lat_signal_every(&tcp, Some(TransportKind::Tcp)), 1);
    }

    #[test]
    fn a_timed_measurement_longer_than_its_margin_is_said() {
        let d4 = RunMode::Duration { secs: 4, margin: 1 };
        // The window of -D 4 -f 1 is 2 s: 3 s is within the margin, 3.1 s is not.
        assert_eq!(overran(d4, Duration::from_secs(3), true), None);
        let w = overran(d4, Duration::from_millis(3100), true).unwrap();
        assert!(w.to_string().starts_with(
            "this -D 4 run took 3.1 s to measure what takes 2 s, more than the 1 s margin (-f) longer"
        ));
        assert_eq!(overran(d4, Duration::from_secs(5), false), None);
        assert!(overran(d4, Duration::from_secs(6), false).is_some());
        assert_eq!(
            overran(RunMode::Iterations(5), Duration::from_secs(60), false),
            None
        );
        assert_eq!(
            overran(RunMode::endless(), Duration::from_secs(1 << 40), false),
            None
        );
    }
}
