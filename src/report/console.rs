//! The console report in perftest's layout, byte for byte where perftest defines it.
//!
//! Scripts which parse `ib_write_bw` / `ib_send_lat` output keep working; our own figures come after
//! perftest's.
//!
//! Every function returns whole lines, each ending in `\n`: print them with `print!`, not `println!`.
//! Order, as perftest prints it: [`header_block`], [`address_block`], [`table_header`], one
//! [`table_row`] per size, [`table_footer`], then [`extras`] per size (below the table, so that a script
//! reading rows up to the dashes sees only perftest's rows).
//!
//! Departures from perftest, each on purpose:
//! * extra header lines (tool, transport, RoCE version, core, "why" notes) come after perftest's last
//!   standard line, in its ` Key : value` style, like the `NUMA node` line newer perftest adds there;
//! * `t_max` is the true maximum (perftest prints the second largest), `t_stdev` a real standard deviation
//!   (perftest truncates deviations to whole µs), and the latency columns come from the HDR histogram
//!   (3 significant digits) in duration mode too, where perftest prints only an average;
//! * `CQE Poll Batch` (newer perftest only) is not printed, and CPU utilisation appears in [`extras`]
//!   rather than as a trailing column, because the column header is printed before it is known;
//! * a percentile with fewer than 10 samples beyond it is `n/a` in its column (the row keeps its nine
//!   columns) and `p99.9 n/a (needs 10,000 samples)` in [`extras`]: perftest prints the largest sample
//!   of a 1,000-iteration run as its "99.9% percentile".

use super::wrap::wrap;
use crate::params::OutputSelect;
use crate::params::{Metric, Role, TransportKind, Verb};
use crate::results::{AddressLine, EndlessRun, Measured, RunInfo, SizeResult};
use crate::stats::{BandwidthStats, LatencyStats, percentile_label, withheld_reason};
use std::fmt::Write;

/// perftest's RESULT_LINE: 87 dashes and a newline.
pub(crate) const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------\n";

const BW_HEADER_MIB: &str =
    " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]";
const BW_HEADER_GBIT: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";

/// Appends one ` Key             : value` line (perftest pads keys to 16 characters).
fn kv(out: &mut String, key: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, " {key:<16}: {value}");
}

fn on_off(b: bool) -> &'static str {
    if b { "ON" } else { "OFF" }
}

/// perftest's name for a verb in titles: `Send`, `RDMA_Write`, `RDMA_Read`, `Atomic`.
fn verb_title(v: Verb) -> &'static str {
    match v {
        Verb::Send => "Send",
        Verb::Write => "RDMA_Write",
        Verb::Read => "RDMA_Read",
        Verb::Atomic => "Atomic",
    }
}

/// The title perftest prints: `RDMA_Write BW Test`, `Send Bidirectional BW Test`, `Send Latency Test`,
/// `Atomic FETCH_AND_ADD BW Test`.
pub(crate) fn title(info: &RunInfo) -> String {
    let kind = match info.test.metric {
        Metric::Bandwidth if info.bidirectional => "Bidirectional BW",
        Metric::Bandwidth => "BW",
        Metric::Latency => "Latency",
    };
    match info.atomic_type {
        Some(op) => format!("{} {op} {kind} Test", verb_title(info.test.verb)),
        None => format!("{} {kind} Test", verb_title(info.test.verb)),
    }
}

/// The header block: dashes, title, perftest's parameter lines, then ours, then dashes; every line
/// within [`wrap::WIDTH`](super::wrap::WIDTH) columns.
///
/// A TCP run keeps perftest's lines that mean something over TCP and leaves out the RDMA ones
/// (dual port, connection type, SRQ, PCIe ordering, the verbs API, inline data, rdma_cm, the exchange
/// method): its `Device` is no device but the local address of its connections, and says so.
pub fn header_block(info: &RunInfo) -> String {
    let mut s = String::with_capacity(1024);
    s.push_str(RESULT_LINE);
    let _ = writeln!(s, "                    {}", title(info));
    let rdma = info.transport != TransportKind::Tcp;
    // perftest prints "IB" for RoCE too: it is the verbs transport type, not the link. Which of our
    // transports carries it follows in brackets, on this one transport line.
    let transport_type = match info.transport {
        TransportKind::Verbs => "IB (verbs)",
        TransportKind::Soft => "IB (soft)",
        TransportKind::Tcp => "TCP",
    };
    if rdma {
        let _ = writeln!(
            s,
            " Dual-port       : OFF\t\tDevice         : {}",
            info.device
        );
    }
    let _ = writeln!(
        s,
        " Number of qps   : {}\t\tTransport type : {transport_type}",
        info.qps
    );
    if rdma {
        let _ = writeln!(
            s,
            " Connection type : {}\t\tUsing SRQ      : OFF",
            info.connection.unwrap_or_default()
        );
        s.push_str(" PCIe relax order: OFF\t\tLock-free      : OFF\n");
        s.push_str(" ibv_wr* API     : OFF\t\tUsing Enhanced Reorder      : OFF\n");
    } else {
        kv(&mut s, "Local address", &info.device);
    }
    if info.role == Role::Client || info.bidirectional {
        kv(&mut s, "TX depth", info.tx_depth);
    }
    if let Some(rx) = info.rx_depth
        && info.test.verb.consumes_receive()
        && (info.role == Role::Server || info.bidirectional)
    {
        kv(&mut s, "RX depth", rx);
    }
    if info.test.metric == Metric::Bandwidth {
        kv(&mut s, "CQ Moderation", info.cq_mod);
    }
    if let Some(mtu) = info.mtu {
        kv(&mut s, "Mtu", format_args!("{mtu}[B]"));
    }
    if rdma {
        kv(&mut s, "Link type", &info.link_type);
    }
    if let Some(gid) = info.gid_index {
        kv(&mut s, "GID index", gid);
    }
    if rdma {
        rdma_lines(&mut s, info);
    }

    // Ours, after perftest's last standard line.
    kv(&mut s, "Tool", format_args!("roceperf {}", info.version));
    if let Some(roce) = info.roce {
        kv(&mut s, "RoCE version", roce);
    }
    if let Some(peer) = &info.peer {
        kv(&mut s, "Peer", peer);
    }
    match info.cpu {
        Some(core) => kv(&mut s, "Pinned core", core),
        None => kv(&mut s, "Pinned core", "none"),
    }
    kv(
        &mut s,
        "Completions",
        if info.events {
            "events (-e: sleeps in poll(2) when idle)"
        } else {
            "busy polling"
        },
    );
    match (info.duration_s, &info.run_infinitely) {
        (_, Some(run)) => kv(
            &mut s,
            "Duration",
            format_args!(
                "until stopped (SIGINT/SIGTERM), a line every {}[s]",
                run.report_interval_s
            ),
        ),
        (Some(d), None) => kv(
            &mut s,
            "Duration",
            format_args!("{d}[s], margin {}[s]", info.margin_s.unwrap_or(0)),
        ),
        (None, None) => kv(&mut s, "Iterations", info.iterations),
    }
    kv(&mut s, "Warm-up iters", info.warmup);
    if let Some(l) = &info.rate_limit {
        let v = l.value;
        kv(
            &mut s,
            "Rate limit",
            format_args!("{v}[{}] {}, burst {}", l.units, l.kind, l.burst_size),
        );
    }
    if let Some(ns) = info.latency_gap_ns {
        kv(
            &mut s,
            "Latency gap",
            format_args!("{}[usec]", ns as f64 / 1000.0),
        );
    }
    if info.test.metric == Metric::Latency {
        let labels: Vec<String> = info
            .percentiles
            .iter()
            .map(|p| percentile_label(*p))
            .collect();
        kv(&mut s, "Percentiles", labels.join(" "));
    }
    kv(&mut s, "Bidirectional", on_off(info.bidirectional));
    for note in &info.notes {
        kv(&mut s, "Why", note);
    }
    s.push_str(RESULT_LINE);
    wrap(&s)
}

/// perftest's lines of an RDMA run after the link type: outstanding reads or inline data, rdma_cm,
/// the exchange method.
fn rdma_lines(s: &mut String, info: &RunInfo) {
    if info.test.verb.reads_back() {
        kv(s, "Outstand reads", info.out_reads.unwrap_or(0));
    } else {
        kv(
            s,
            "Max inline data",
            format_args!("{}[B]", info.inline_size.unwrap_or(0)),
        );
    }
    // -R: the queue pairs are connected through the CM, as perftest's rdma_cm QPs.
    let cm_qps = if info.rdma_cm { "ON" } else { "OFF" };
    let _ = writeln!(s, " rdma_cm QPs\t : {cm_qps}");
    let exchange = if info.exchange_rdma_cm {
        "rdma_cm"
    } else {
        "Ethernet"
    };
    kv(s, "Data ex. method", exchange);
}

/// C's `%#0Nx`: `0x` plus zero-padded hex filling N characters, but all zeros (no `0x`) for the value 0.
fn c_alt_hex(v: u64, width: usize) -> String {
    if v == 0 {
        "0".repeat(width)
    } else {
        format!("{v:#0width$x}")
    }
}

/// perftest's GID line body: every byte in decimal, two digits at least (`...:255:255:10:00:00:05`).
pub(crate) fn gid_decimal(gid: &[u8; 16]) -> String {
    let parts: Vec<String> = gid.iter().map(|b| format!("{b:02}")).collect();
    parts.join(":")
}

fn address_line(out: &mut String, side: &str, verb: Verb, a: &AddressLine) {
    let _ = write!(
        out,
        " {side} address: LID {} QPN {} PSN {}",
        c_alt_hex(a.lid.into(), 4),
        c_alt_hex(a.qpn.into(), 6),
        c_alt_hex(a.psn.into(), 6)
    );
    if verb == Verb::Read {
        let _ = write!(
            out,
            " OUT {}",
            c_alt_hex(a.out_reads.unwrap_or(0).into(), 4)
        );
    }
    if matches!(verb, Verb::Read | Verb::Write) {
        let _ = write!(
            out,
            " RKey {} VAddr {}",
            c_alt_hex(a.rkey.unwrap_or(0).into(), 8),
            c_alt_hex(a.vaddr.unwrap_or(0), 16)
        );
    }
    out.push('\n');
    if let Some(gid) = &a.gid {
        let _ = writeln!(out, " GID: {}", gid_decimal(gid));
    }
}

/// Local then remote address lines (+ GID lines), then dashes; empty when there are none (TCP).
pub fn address_block(info: &RunInfo) -> String {
    if info.local.is_empty() && info.remote.is_empty() {
        return String::new();
    }
    let mut s = String::new();
    for a in &info.local {
        address_line(&mut s, "local", info.test.verb, a);
    }
    for a in &info.remote {
        address_line(&mut s, "remote", info.test.verb, a);
    }
    s.push_str(RESULT_LINE);
    s
}

/// The BW or LAT column header line (BW units per --report_gbits).
pub fn table_header(info: &RunInfo) -> String {
    let line = match info.test.metric {
        Metric::Bandwidth if info.report_gbits => BW_HEADER_GBIT,
        Metric::Bandwidth => BW_HEADER_MIB,
        Metric::Latency => LAT_HEADER,
    };
    format!("{line}\n")
}

/// One result row in perftest's format; a BW peak that was not measured (TCP, `-D`) is `n/a`, never
/// perftest's `0.00`, which a parser would read as a peak of zero.
pub fn table_row(info: &RunInfo, r: &SizeResult) -> String {
    match &r.measured {
        Measured::Bandwidth(b) => bw_row(info.report_gbits, r.size, r.iterations, b),
        Measured::Latency { stats, histogram } => lat_row(
            r.size,
            r.iterations,
            stats,
            stats.at(histogram, 99.0),
            stats.at(histogram, 99.9),
        ),
    }
}

fn bw_row(gbits: bool, size: u64, iters: u64, b: &BandwidthStats) -> String {
    let (peak, avg) = if gbits {
        (b.peak_gbps, b.avg_gbps)
    } else {
        (b.peak_mibps, b.avg_mibps)
    };
    let rate = b.msg_rate_mpps;
    if gbits && avg < 0.1 {
        // perftest's REPORT_FMT_EXT: six decimals so that slow links do not print 0.00.
        let peak = peak.map_or_else(|| "n/a".to_owned(), |p| format!("{p:.6}"));
        format!(
            " {size:<7}    {iters}           {peak:<7}            {avg:<7.6}            {rate:<7.6}\n"
        )
    } else {
        let peak = peak.map_or_else(|| "n/a".to_owned(), |p| format!("{p:.2}"));
        format!(
            " {size:<7}    {iters:<10}       {peak:<7}            {avg:<7.2}\t\t     {rate:<7.6}\n"
        )
    }
}

/// A percentile's cell: two decimals, or `n/a` when withheld (one word, so the row keeps its columns).
fn pct_cell(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.2}"))
}

fn lat_row(size: u64, iters: u64, s: &LatencyStats, p99: Option<f64>, p999: Option<f64>) -> String {
    let (p99, p999) = (pct_cell(p99), pct_cell(p999));
    format!(
        " {size:<7} {iters}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{p99:<7} \t\t{p999:<7}\n",
        s.min_us, s.max_us, s.median_us, s.mean_us, s.stdev_us
    )
}

/// The dashes line that closes the table.
pub fn table_footer() -> String {
    RESULT_LINE.to_owned()
}

/// The richer figures for one size, printed BELOW the table. One line per size, starting with a word so
/// that scripts matching result rows (a number after the leading space) do not pick it up:
/// bandwidth in both Gb/s and MiB/s, the average and peak, message rate and elapsed time; latency as
/// min, median, the requested percentiles (`p99.9 n/a (needs 10,000 samples)` for one with fewer than
/// 10 samples beyond it), true max, mean and real stdev, in µs with ns resolution.
pub fn extras(info: &RunInfo, r: &SizeResult) -> String {
    let mut s = String::new();
    let key = format!("Size {}[B]", r.size);
    match &r.measured {
        Measured::Bandwidth(b) => {
            let peak = match (b.peak_gbps, b.peak_mibps) {
                (Some(g), Some(m)) => format!("{g:.3} Gb/s = {m:.2} MiB/s"),
                _ => "not measured".to_owned(),
            };
            let _ = write!(
                s,
                " {key:<16}: BW average {:.3} Gb/s = {:.2} MiB/s, peak {peak}, {:.6} Mpps, {} msgs in {:.3} ms",
                b.avg_gbps,
                b.avg_mibps,
                b.msg_rate_mpps,
                b.messages,
                b.elapsed_ns as f64 / 1e6
            );
        }
        Measured::Latency { stats, .. } => {
            let _ = write!(
                s,
                " {key:<16}: latency[usec] min {:.3}  median {:.3}",
                stats.min_us, stats.median_us
            );
            // The requested percentiles (all computed ones when the run named none); p50 is the
            // median, already printed.
            let wanted = |pct: f64| info.percentiles.is_empty() || info.percentiles.contains(&pct);
            for p in stats
                .percentiles
                .iter()
                .filter(|p| p.pct != 50.0 && wanted(p.pct))
            {
                match p.us {
                    Some(us) => {
                        let _ = write!(s, "  {} {us:.3}", p.label());
                    }
                    None => {
                        let _ = write!(s, "  {} n/a ({})", p.label(), withheld_reason(p.pct));
                    }
                }
            }
            let _ = write!(
                s,
                "  max {:.3}  avg {:.3}  stdev {:.3}  ({} samples, one-way)",
                stats.max_us, stats.mean_us, stats.stdev_us, stats.samples
            );
        }
    }
    if let Some(cpu) = r.cpu_util {
        let _ = write!(s, ", CPU {cpu:.2}%");
    }
    if let Some(lost) = r.lost {
        // UC/UD: what never arrived is counted, not resent (a latency test loses whole round trips).
        let what = match r.measured {
            Measured::Bandwidth(_) => "messages",
            Measured::Latency { .. } => "iterations",
        };
        let _ = write!(
            s,
            ", lost {lost} {what} ({}: nothing is resent)",
            info.connection.unwrap_or_default()
        );
    }
    s.push('\n');
    if let Measured::Bandwidth(b) = &r.measured
        && let Some(p) = &b.pacing
    {
        let _ = writeln!(
            s,
            " {:<16}: target {} {}, achieved {:.6} {} ({:+.2} %, at the {}; {} burst {})",
            "Rate limit",
            p.target,
            p.units,
            p.achieved,
            p.units,
            p.error_pct,
            p.measured_at,
            p.limiter,
            p.burst_size
        );
    }
    wrap(&s)
}

/// Queue pairs `-v` names one by one under a row; the rest are in the JSON result.
const QP_LINE_MAX: usize = 16;

/// `-v`, a bandwidth row of several queue pairs: each one's goodput, their spread and Jain's
/// fairness index (1 when all are equal, 1/n when one takes everything); `None` otherwise.
pub(crate) fn qp_shares(r: &SizeResult) -> Option<String> {
    let Measured::Bandwidth(b) = &r.measured else {
        return None;
    };
    if b.qps.len() < 2 {
        return None;
    }
    let rates: Vec<f64> = b.qps.iter().map(|q| q.goodput_gbps).collect();
    let mut s = String::from(" per QP [Gb/s]:");
    for q in b.qps.iter().take(QP_LINE_MAX) {
        let _ = write!(s, " {}: {:.3}", q.qp, q.goodput_gbps);
    }
    if b.qps.len() > QP_LINE_MAX {
        let _ = write!(s, " ... {} more (all in --json)", b.qps.len() - QP_LINE_MAX);
    }
    let (lo, hi) = rates
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let _ = writeln!(
        s,
        "; min {lo:.3} max {hi:.3}, Jain's index {}",
        crate::stats::jain_index(&rates)
            .map_or("n/a (nothing moved)".to_string(), |j| format!("{j:.4}"))
    );
    Some(wrap(&s))
}

/// `--report-both`: perftest's "Local results" and "Remote results" blocks, each a table of one row.
pub(crate) fn report_both(info: &RunInfo, local: &SizeResult, remote: &SizeResult) -> String {
    let mut s = String::new();
    for (title, r) in [("Local", local), ("Remote", remote)] {
        s.push_str(RESULT_LINE);
        let _ = writeln!(s, "\n {title} results: ");
        s.push_str(RESULT_LINE);
        s.push_str(&table_header(info));
        s.push_str(&table_row(info, r));
    }
    s
}

/// A run without end's last line: its intervals and what stopped it.
pub(crate) fn endless_line(run: &EndlessRun) -> String {
    format!(
        " {:<16}: {} interval lines of {}[s], stopped by {}\n",
        "Run",
        run.intervals,
        run.report_interval_s,
        run.stopped_by.as_deref().unwrap_or("the end")
    )
}

/// perftest --output=...: one number with six decimals and a newline. Bandwidth is the average, in Gb/s
/// when `gbits` (perftest's --report_gbits) and MiB/s otherwise, latency the mean in µs, message rate in
/// Mpps. A selection that does not fit the result gets the nearest figure: the mean latency for a latency
/// result, the mean time per message (µs) for `Latency` on a bandwidth result.
pub(crate) fn single_value_in(sel: OutputSelect, r: &SizeResult, gbits: bool) -> String {
    let v = match (&r.measured, sel) {
        (Measured::Bandwidth(b), OutputSelect::Bandwidth) if gbits => b.avg_gbps,
        (Measured::Bandwidth(b), OutputSelect::Bandwidth) => b.avg_mibps,
        (Measured::Bandwidth(b), OutputSelect::MessageRate) => b.msg_rate_mpps,
        (Measured::Bandwidth(b), OutputSelect::Latency) => {
            if b.msg_rate_mpps > 0.0 {
                1.0 / b.msg_rate_mpps
            } else {
                0.0
            }
        }
        (Measured::Latency { stats, .. }, _) => stats.mean_us,
    };
    format!("{v:.6}\n")
}

#[cfg(test)]
mod tests;
