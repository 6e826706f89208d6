//! The run plan: the validated options, and what they resolve to, computed once at the top.
//!
//! The plan keeps the options whole rather than copying them field by field, and adds only what is
//! derived (atomic sequences, receive depths, buffer layout, timeouts); what the drivers below the
//! app get is built from it (`bench`'s specs), so nothing below the app looks at the options.

use crate::bench::Layout;
use crate::bench::atomic::Atomics;
use crate::cli::Options;
use crate::oob::{self, TestParams};
use crate::params::{ConnType, Metric, Role, RunMode, TestKind};
use std::time::Duration;

/// Everything one run does: the validated options it came from, and what they resolve to.
///
/// A plan reads as its options (it dereferences to [`Options`]: `plan.qps` is `-q` itself, never a
/// copy); its own fields are only what is derived from them, computed once here.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The options, as checked (a UD run's sizes fitted to the path MTU by [`Plan::fit_datagrams`]).
    opts: Options,
    /// Atomic tests: the operations each queue pair runs (words, result slots).
    pub atomics: Option<Atomics>,
    /// Receive depths of every size.
    pub depths: Depths,
    /// How each queue pair's buffer is split (sized for the largest message).
    pub layout: Layout,
    /// How long a blocking out-of-band read waits for the peer: the default, plus the connect
    /// timeout (the peer may still be retrying its own), plus a timed run's length.
    pub io_timeout: Duration,
    /// Verbs: the NIC counters `-W` resolved to on the opened device, read around each size; `None`
    /// until the device is open, and for the other transports.
    pub nic: Option<std::sync::Arc<crate::transport::verbs::counters::PortCounters>>,
    /// `--persist`: the port the server keeps open across runs, and which run this plan is (from
    /// 1); `None` for a server of one run, and a client.
    pub serving: Option<(std::sync::Arc<oob::Listener>, u64)>,
}

impl std::ops::Deref for Plan {
    type Target = Options;

    fn deref(&self) -> &Options {
        &self.opts
    }
}

/// `path` with `-run<k>` before its extension (`bw.json`: `bw-run3.json`; `bw`: `bw-run3`).
fn run_path(path: &std::path::Path, k: u64) -> std::path::PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-run{k}.{}", ext.to_string_lossy()),
        None => format!("{stem}-run{k}"),
    };
    path.with_file_name(name)
}

/// Receive depths of every size (the send queue's is `-t`, [`Options::tx_depth`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Depths {
    /// Receives kept posted per queue pair by SEND tests (perftest's rx_depth 512, capped at the iterations).
    pub rx: u32,
    /// Receives posted per queue pair before a size starts: a SEND receiver keeps `rx`, a latency side one.
    pub initial_receives: u32,
}

impl Depths {
    /// The depths of `test` for this side. Before a size starts, a SEND test posts receives as perftest
    /// does, so a peer that sends the moment the run begins finds them (else an RNR NAK and a wasted
    /// timeout): in bandwidth tests the receiving side keeps rx posted and a sender none; in latency
    /// tests one, on both sides.
    fn new(opts: &Options) -> Depths {
        let receives = opts.test.verb.consumes_receive();
        let rx = match opts.test.metric {
            Metric::Bandwidth if receives => {
                let n = match opts.mode {
                    RunMode::Iterations(n) => n,
                    RunMode::Duration { .. } => 512,
                };
                let rx = 512.min(n.max(u64::from(opts.tx_depth))) as u32;
                // perftest's UC/UD receivers post up to 16000 (UC_MAX_RX): with no RNR NAK to hold the
                // sender back, a receive missing when a SEND arrives loses it. Ours cover the warm-up
                // too (perftest has none), so a slow receiver has a receive for every message of a size.
                if opts.connection.is_unreliable() {
                    let warmup = opts.warmup * u64::from(!opts.mode.is_duration());
                    16_000.min((n + warmup).max(512)) as u32
                } else {
                    rx
                }
            }
            _ => 1,
        };
        let initial_receives = match opts.test.metric {
            _ if !receives => 0,
            Metric::Bandwidth if opts.role == Role::Server || opts.bidirectional => rx,
            Metric::Bandwidth => 0,
            Metric::Latency => 1,
        };
        Depths {
            rx,
            initial_receives,
        }
    }
}

impl Plan {
    /// Resolves the options.
    pub(crate) fn new(opts: Options) -> Plan {
        let depths = Depths::new(&opts);
        let atomics = opts.atomic_type.map(|op| match opts.test.metric {
            Metric::Bandwidth => Atomics::bandwidth(op, opts.tx_depth, opts.validate),
            Metric::Latency => Atomics::latency(op),
        });
        // Atomics: the result slots in the first half, the words and their tally in the second.
        let max_size = opts
            .sizes
            .iter()
            .copied()
            .chain(atomics.map(|a| a.half_len()))
            .max()
            .unwrap_or(1);
        let run = opts
            .mode
            .duration_secs()
            .map_or(Duration::ZERO, Duration::from_secs);
        let layout = Layout::for_size(max_size);
        // --validate, READ bandwidth: the requester reads every READ into a slot of its own.
        let reads = opts.test == TestKind::READ_BW && opts.role == Role::Client;
        let layout = if opts.validate && reads {
            layout.with_read_slots(opts.tx_depth)
        } else {
            layout.with_recv_headroom(opts.connection.recv_headroom())
        };
        Plan {
            atomics,
            depths,
            layout,
            io_timeout: oob::DEFAULT_IO_TIMEOUT + opts.connect_timeout + run,
            serving: None,
            nic: None,
            opts,
        }
    }

    /// Run `k` (from 1) of a `--persist` server on `listener`: every file it writes is named apart,
    /// `-run<k>` before the extension of each file flag's path (`--results DIR`: `DIR/run<k>/`), so
    /// no run overwrites or appends to another's.
    pub(crate) fn serving_run(&self, listener: std::sync::Arc<oob::Listener>, k: u64) -> Plan {
        let mut p = self.clone();
        let out = &mut p.opts.output;
        let n = |path: &mut Option<std::path::PathBuf>| {
            if let Some(x) = path.as_mut() {
                *x = run_path(x, k);
            }
        };
        n(&mut out.files.csv);
        n(&mut out.files.json);
        n(&mut out.reporting_files.json_stream);
        n(&mut out.gate_output.junit);
        if let Some(x) = out.reporting_files.out_json() {
            out.reporting_files.out_json_file = Some(run_path(&x, k));
        }
        if let Some(d) = out.files.results.as_mut() {
            *d = d.join(format!("run{k}"));
        }
        p.serving = Some((listener, k));
        p
    }

    /// How long the whole handshake may take once connected (hello to connection details in our
    /// dialect, everything before the data path connects in perftest's): `--connect-timeout`.
    pub(crate) fn handshake_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// Completions are signaled every this many operations at `size`: -Q, or perftest's rule
    /// (100, but 1 above 8 KiB), never more than the operations in flight.
    pub(crate) fn cq_mod_at(&self, size: u64) -> u32 {
        let q = self.cq_mod.unwrap_or(if size > 8192 { 1 } else { 100 });
        q.min(self.tx_depth).max(1)
    }

    /// The largest message size of the run.
    pub(crate) fn max_size(&self) -> u64 {
        self.sizes.iter().copied().max().unwrap_or(1)
    }

    /// UD, once the endpoint says which path MTU it offers (`mtu` bytes, from `source`): a datagram
    /// carries at most one MTU, so the default size and `-a`'s sweep stop at it (as perftest's do) and
    /// an `-s` above it is a usage error naming both. Other connection types run as planned.
    pub(crate) fn fit_datagrams(&self, mtu: u32, source: &str) -> Result<Plan, crate::cli::Error> {
        if self.connection != ConnType::Ud {
            return Ok(self.clone());
        }
        let mtu = u64::from(mtu);
        if self.size_given && self.max_size() > mtu {
            return Err(crate::cli::Error::Invalid {
                flag: "-s",
                why: crate::cli::ud_too_big(self.max_size(), mtu, source),
            });
        }
        let sizes = if self.all_sizes {
            self.sizes.iter().copied().filter(|&s| s <= mtu).collect()
        } else {
            self.sizes.iter().map(|&s| s.min(mtu)).collect()
        };
        let mut fitted = self.clone();
        fitted.opts.sizes = sizes;
        Ok(fitted)
    }

    /// The parameters the peer must share: only what changes the traffic (see [`TestParams`]).
    pub(crate) fn test_params(&self) -> TestParams {
        TestParams {
            test: self.test,
            transport: self.transport,
            roce: self.device.roce,
            all_sizes: self.all_sizes,
            size: self.max_size(),
            iterations: self.mode.iterations(),
            duration: self.mode.duration_secs(),
            margin: self.mode.margin_secs(),
            qps: self.qps,
            mtu: self.device.mtu,
            bidirectional: self.bidirectional,
            warmup: self.warmup,
            validate: self.validate,
            recovery: self.device.recovery.asked(),
            run_infinitely: self.mode.is_endless(),
            latency_gap_ns: self.latency_gap.as_nanos() as u64,
            connection: self.connection,
            rdma_cm: self.rdma_cm,
            atomic_type: self.atomic_type,
            tclass: self.device.marks.tclass_or_default(),
            sl: self.device.marks.sl_or_default(),
            cc: self.device.cc,
            cc_params: self.device.cc_params,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::tests::parse_raw;
    use crate::params::AtomicOp;

    fn plan(test: &str, args: &[&str]) -> Plan {
        let args = [&["--transport", "tcp"], args].concat();
        Plan::new(parse_raw(test.parse().unwrap(), &args).unwrap())
    }

    #[test]
    fn completion_moderation_follows_perftest() {
        let p = plan("write_bw", &[]);
        assert_eq!(
            (p.tx_depth, p.cq_mod_at(65536), p.cq_mod_at(64)),
            (128, 1, 100)
        );
        assert_eq!(plan("write_bw", &["-Q", "4"]).cq_mod_at(64), 4);
    }

    #[test]
    fn send_depths_cap_at_the_iterations_and_only_receivers_pre_post() {
        let server = plan("send_bw", &["-n", "200"]);
        assert_eq!(
            (server.depths.rx, server.depths.initial_receives),
            (200, 200)
        );
        let client = plan("send_bw", &["127.0.0.1"]);
        assert_eq!((client.depths.rx, client.depths.initial_receives), (512, 0));
        let lat = plan("send_lat", &[]);
        assert_eq!((lat.depths.rx, lat.depths.initial_receives), (1, 1));
        assert_eq!(plan("write_bw", &[]).depths.initial_receives, 0);
    }

    #[test]
    fn unreliable_receivers_post_a_receive_for_every_message_of_a_size() {
        let soft = |args: &[&str]| {
            let args = [&["-d", "lo"], args].concat();
            Plan::new(parse_raw("send_bw".parse().unwrap(), &args).unwrap())
        };
        let ud = soft(&["-c", "UD", "-n", "1000"]);
        assert_eq!((ud.depths.rx, ud.depths.initial_receives), (1100, 1100));
        assert_eq!(ud.layout.recv_headroom, 40);
        assert_eq!(soft(&["-c", "UC", "-n", "100000"]).depths.rx, 16_000);
        assert_eq!(
            soft(&["-n", "1000"]).depths.rx,
            512,
            "RC keeps perftest's 512"
        );
    }

    #[test]
    fn display_options_stay_out_of_the_parameters_the_peer_checks() {
        let a = plan("write_bw", &["-D", "2"]);
        let b = plan(
            "write_bw",
            &[
                "-D",
                "2",
                "--report_gbits",
                "--output",
                "bandwidth",
                "--percentiles",
                "50",
                "-v",
                "--cpu",
                "0",
                "--min-bw",
                "1Gb/s",
                "--json",
                "/tmp/x.json",
            ],
        );
        assert_eq!(a.test_params(), b.test_params());
        assert_ne!(
            a.test_params(),
            plan("write_bw", &["-D", "2", "-s", "1024"]).test_params()
        );
    }

    #[test]
    fn atomic_buffers_hold_the_result_slots_words_and_tally() {
        let p = plan("atomic_bw", &["-A", "CMP_AND_SWAP"]);
        assert_eq!(p.atomic_type, Some(AtomicOp::CmpAndSwap));
        let a = p.atomics.unwrap();
        assert_eq!((a.words, a.slots, p.sizes.clone()), (64, 64, vec![8]));
        assert!(p.layout.half >= a.half_len() && p.layout.half >= 4096);
        let v = plan("atomic_bw", &["-t", "1000", "-n", "2000", "--validate"]);
        assert_eq!(v.atomics.unwrap().slots, 1000);
        assert!(v.layout.half >= 64 * 1000);
        let lat = plan("atomic_lat", &[]);
        assert_eq!(lat.atomics.unwrap().words, 1);
        assert_eq!(lat.atomic_type, Some(AtomicOp::FetchAndAdd));
        assert_ne!(
            plan("atomic_bw", &[]).test_params(),
            plan("atomic_bw", &["-A", "CMP_AND_SWAP"]).test_params()
        );
        assert_eq!(plan("write_bw", &[]).atomics, None);
    }

    #[test]
    fn io_timeout_covers_the_connect_timeout_and_the_run() {
        let p = plan("write_bw", &["-D", "5", "--connect-timeout", "3"]);
        assert_eq!(
            p.io_timeout,
            oob::DEFAULT_IO_TIMEOUT + Duration::from_secs(8)
        );
    }
}
