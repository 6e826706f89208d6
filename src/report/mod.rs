//! Reports: console in perftest layout, CSV, JSON, the results directory, and a sweep progress bar.
//!
//! Reports know nothing of transports (DESIGN.md): everything they print comes from [`RunInfo`], which the
//! binary fills from its options and its transport, and from [`SizeResult`]s, which the drivers measure.
//! Both types also travel from client to server over the out-of-band channel (serde_json), so that both
//! sides print the same results.

pub mod compare;
pub mod console;
pub mod csv;
pub mod hdrlog;
pub mod histogram_text;
pub mod json;
pub mod progress;
pub mod svg;

pub use console::{
    address_block, extras, header_block, single_value, table_footer, table_header, table_row,
};
pub use csv::append_csv;
pub use json::{to_json, write_json};

use crate::params::{RoceVersion, Role, TestKind, TransportKind};
use crate::stats::{BandwidthStats, LatencyStats};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// One perftest "local address:" / "remote address:" line (+ GID line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressLine {
    /// Local identifier (0 on RoCE).
    pub lid: u16,
    /// Queue pair number (24 bits).
    pub qpn: u32,
    /// Initial packet sequence number (24 bits).
    pub psn: u32,
    /// Outstanding RDMA READs (READ tests).
    pub out_reads: Option<u32>,
    /// Remote key of the buffer (READ and WRITE tests).
    pub rkey: Option<u32>,
    /// Virtual address of the buffer (READ and WRITE tests).
    pub vaddr: Option<u64>,
    /// GID, printed in perftest's decimal-bytes format; IPv6 text in JSON.
    #[serde(with = "gid_text", default)]
    pub gid: Option<[u8; 16]>,
}

/// Everything the header block and the files need, built by the binary from its options and transport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Which of the six tests.
    pub test: TestKind,
    /// Client or server.
    pub role: Role,
    /// What moved the bytes.
    pub transport: TransportKind,
    /// RoCE encapsulation; None for TCP.
    pub roce: Option<RoceVersion>,
    /// "lo", "mlx5_0", "127.0.0.1" ...
    pub device: String,
    /// Server host as given to the client.
    pub peer: Option<String>,
    /// Number of queue pairs (-q).
    pub qps: u32,
    /// Send queue depth (-t).
    pub tx_depth: u32,
    /// Receive queue depth (-r), SEND tests.
    pub rx_depth: Option<u32>,
    /// Completions are signaled every cq_mod messages (-Q).
    pub cq_mod: u32,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// "Ethernet" / "IB" / "TCP".
    pub link_type: String,
    /// GID table index used (-x).
    pub gid_index: Option<u32>,
    /// Max inline data in bytes (-I).
    pub inline_size: u32,
    /// Outstanding reads (-o), READ tests.
    pub out_reads: Option<u32>,
    /// Core the datapath thread is pinned to.
    pub cpu: Option<usize>,
    /// Our queue pairs.
    pub local: Vec<AddressLine>,
    /// The peer's queue pairs.
    pub remote: Vec<AddressLine>,
    /// Console bandwidth in Gb/s (--report_gbits) instead of MiB/s.
    pub report_gbits: bool,
    /// Latency percentiles to report, e.g. [90, 99, 99.9, 99.99].
    pub percentiles: Vec<f64>,
    /// -n (per size) or 0 in duration mode.
    pub iterations: u64,
    /// -D seconds, duration mode.
    pub duration_s: Option<u64>,
    /// Margin at both ends of a duration run, seconds.
    pub margin_s: Option<u64>,
    /// Warm-up iterations run before measuring (excluded from the statistics).
    pub warmup: u64,
    /// Both directions at once (-b).
    pub bidirectional: bool,
    /// RFC 3339 UTC, e.g. "2026-11-29T10:24:25Z" (see [`now_rfc3339`]).
    pub started_at: String,
    /// "why" lines: transport chosen because..., core chosen because...
    pub notes: Vec<String>,
    /// env!("CARGO_PKG_VERSION").
    pub version: String,
    /// Transport counters at the end of the run (soft: packets, retransmissions, NAKs, drops), when the
    /// transport keeps any; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<serde_json::Value>,
}

/// What one message size measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measured {
    /// A bandwidth test's figures.
    Bandwidth(BandwidthStats),
    /// `histogram` is serialized in JSON as base64 of HdrHistogram V2 (deflate) format.
    Latency {
        /// Summary computed from `histogram`.
        stats: LatencyStats,
        /// One-way latencies in ns.
        #[serde(with = "json::histogram_serde")]
        histogram: hdrhistogram::Histogram<u64>,
    },
}

/// The result for one message size (one row of the table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "json::SizeResultRepr", try_from = "json::SizeResultRepr")]
pub struct SizeResult {
    /// Message size in bytes.
    pub size: u64,
    /// Iterations measured (perftest's #iterations column).
    pub iterations: u64,
    /// Bandwidth or latency figures.
    pub measured: Measured,
    /// CPU utilisation of the datapath, percent (--cpu_util).
    pub cpu_util: Option<f64>,
}

/// perftest --output=...: print one number instead of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputSelect {
    /// Average bandwidth.
    Bandwidth,
    /// Average latency.
    Latency,
    /// Average message rate.
    MessageRate,
}

/// Why a report could not be written. Every variant names the file and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Opening, reading, writing or renaming a file failed.
    #[error(
        "cannot {action} {}: {source}; check that the directory exists and is writable, or choose another path",
        path.display()
    )]
    Io {
        /// What was being done: "open", "write", ...
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The CSV file to append to has other columns than this version writes.
    #[error(
        "cannot append to {}: its header does not match roceperf's CSV columns (expected {expected:?}, found {found:?}); \
         pass a new file to --csv, or move the old one aside",
        path.display()
    )]
    CsvHeaderMismatch {
        /// The file.
        path: PathBuf,
        /// Our header line.
        expected: String,
        /// The file's first line.
        found: String,
    },
    /// The csv writer failed.
    #[error("cannot write CSV to {}: {source}", path.display())]
    Csv {
        /// The file.
        path: PathBuf,
        /// The csv crate's error.
        source: ::csv::Error,
    },
    /// JSON serialisation failed.
    #[error("cannot write JSON to {}: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// serde_json's error.
        source: serde_json::Error,
    },
}

/// `(csv, json)` paths for a run in `dir`: `<dir>/<YYYYmmdd-HHMMSS>-<test>-<transport>[-<roce>]-<role>.{csv,json}`.
///
/// The timestamp is taken from `info.started_at` (UTC), so both files of a run share it and names sort by
/// time; the role keeps a client and a server writing into the same directory apart. The binary creates
/// `dir`.
pub fn results_paths(dir: &Path, info: &RunInfo) -> (PathBuf, PathBuf) {
    let stamp = compact_timestamp(&info.started_at)
        .unwrap_or_else(|| compact_timestamp(&now_rfc3339()).unwrap_or_default());
    let mut stem = format!("{stamp}-{}-{}", info.test.name(), info.transport.name());
    if let Some(roce) = info.roce {
        stem.push('-');
        stem.push_str(roce.name());
    }
    stem.push('-');
    stem.push_str(role_name(info.role));
    (
        dir.join(format!("{stem}.csv")),
        dir.join(format!("{stem}.json")),
    )
}

/// Creates the `--results` directory (and its parents) if needed; the error names it and what to do.
pub fn create_results_dir(dir: &Path) -> Result<(), ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        action: "create the results directory",
        path: dir.to_owned(),
        source,
    })
}

/// `client` or `server`.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Client => "client",
        Role::Server => "server",
    }
}

/// `2026-11-29T10:24:25Z` -> `20261129-102425`; None when the text has no full date and time.
pub(crate) fn compact_timestamp(rfc3339: &str) -> Option<String> {
    let digits: String = rfc3339
        .chars()
        .take(19)
        .filter(char::is_ascii_digit)
        .collect();
    (digits.len() == 14).then(|| format!("{}-{}", &digits[..8], &digits[8..]))
}

/// The current time as RFC 3339 UTC with seconds, e.g. `2026-11-29T10:24:25Z`, for `RunInfo::started_at`.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// `t` as RFC 3339 UTC with whole seconds; times before 1970 print as the epoch.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's days-to-civil algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Serde form of a GID: IPv6 text (`::ffff:10.0.0.5`), readable in JSON files and exact on the wire.
mod gid_text {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::net::Ipv6Addr;

    pub fn serialize<S: Serializer>(gid: &Option<[u8; 16]>, s: S) -> Result<S::Ok, S::Error> {
        gid.map(|g| Ipv6Addr::from(g).to_string()).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[u8; 16]>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| {
                text.parse::<Ipv6Addr>().map(|a| a.octets()).map_err(|_| {
                    D::Error::custom(format!("GID {text:?} is not an IPv6-style address"))
                })
            })
            .transpose()
    }
}

#[cfg(test)]
pub(crate) mod testdata {
    //! RunInfo and results shared by the report tests.
    use super::*;
    use crate::params::{Metric, Verb};
    use crate::stats::{self, BandwidthStats, LatencyStats};

    /// A write_bw client over soft RoCE v2, like the perftest reference run.
    pub fn bw_info() -> RunInfo {
        RunInfo {
            test: TestKind::new(Verb::Write, Metric::Bandwidth),
            role: Role::Client,
            transport: TransportKind::Soft,
            roce: Some(RoceVersion::V2),
            device: "lo".into(),
            peer: Some("127.0.0.1".into()),
            qps: 1,
            tx_depth: 128,
            rx_depth: None,
            cq_mod: 100,
            mtu: 4096,
            link_type: "Ethernet".into(),
            gid_index: Some(3),
            inline_size: 0,
            out_reads: None,
            cpu: Some(1),
            local: vec![AddressLine {
                lid: 0,
                qpn: 0x108,
                psn: 0x63ad7d,
                out_reads: None,
                rkey: Some(0x17eedf),
                vaddr: Some(0x7f760c947000),
                gid: Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 10, 0, 0, 5]),
            }],
            remote: vec![AddressLine {
                lid: 0,
                qpn: 0x76,
                psn: 0xf3810c,
                out_reads: None,
                rkey: Some(0x201600),
                vaddr: Some(0x7fbb4c981000),
                gid: Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 10, 0, 0, 4]),
            }],
            report_gbits: false,
            percentiles: vec![90.0, 99.0, 99.9, 99.99],
            iterations: 5000,
            duration_s: None,
            margin_s: None,
            warmup: 0,
            bidirectional: false,
            started_at: "2026-11-29T10:24:25Z".into(),
            notes: vec!["transport soft: -d lo is a network interface, not an RDMA device".into()],
            version: "0.1.0".into(),
            counters: None,
        }
    }

    /// A send_lat server over TCP.
    pub fn lat_info() -> RunInfo {
        RunInfo {
            test: TestKind::new(Verb::Send, Metric::Latency),
            role: Role::Server,
            transport: TransportKind::Tcp,
            roce: None,
            link_type: "TCP".into(),
            rx_depth: Some(512),
            tx_depth: 1,
            cq_mod: 1,
            gid_index: None,
            peer: None,
            iterations: 1000,
            local: vec![],
            remote: vec![],
            ..bw_info()
        }
    }

    /// The ib_write_bw reference row: 65536 B x 5000, 11030.12 peak / 11028.45 average MiB/s.
    pub fn bw_result() -> SizeResult {
        let mib = 1_048_576.0;
        let elapsed = (5000.0 * 65536.0 / (11028.45 * mib) * 1e9_f64).round() as u64;
        let best = 65536.0 * 1e9 / (11030.12 * mib);
        SizeResult {
            size: 65536,
            iterations: 5000,
            measured: Measured::Bandwidth(BandwidthStats::compute(
                65536,
                5000,
                elapsed,
                Some(best),
            )),
            cpu_util: None,
        }
    }

    /// A latency result for 2-byte messages: 1000 samples from 950 ns to 3120 ns.
    pub fn lat_result() -> SizeResult {
        let mut h = stats::new_latency_histogram();
        for i in 0..1000u64 {
            h.record(950 + (i * i) % 2171).unwrap();
        }
        SizeResult {
            size: 2,
            iterations: 1000,
            measured: Measured::Latency {
                stats: LatencyStats::from_histogram(&h, &[90.0, 99.0, 99.9, 99.99]),
                histogram: h,
            },
            cpu_util: Some(12.5),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testdata::*;
    use super::*;

    #[test]
    fn results_paths_are_timestamped_and_named() {
        let (csv, json) = results_paths(Path::new("results"), &bw_info());
        assert_eq!(
            csv,
            Path::new("results/20261129-102425-write_bw-soft-v2-client.csv")
        );
        assert_eq!(
            json,
            Path::new("results/20261129-102425-write_bw-soft-v2-client.json")
        );
        let (csv, _) = results_paths(Path::new("/tmp/r"), &lat_info());
        assert_eq!(
            csv,
            Path::new("/tmp/r/20261129-102425-send_lat-tcp-server.csv")
        );
    }

    #[test]
    fn results_paths_survive_a_bad_timestamp() {
        let mut info = bw_info();
        info.started_at = "yesterday".into();
        let (csv, _) = results_paths(Path::new("d"), &info);
        let name = csv.file_name().unwrap().to_str().unwrap().to_owned();
        // Falls back to the current time: 8 digits, dash, 6 digits.
        assert_eq!(
            name.len(),
            "20261129-102425-write_bw-soft-v2-client.csv".len()
        );
        assert!(name[..8].chars().all(|c| c.is_ascii_digit()) && &name[8..9] == "-");
    }

    #[test]
    fn results_dir_is_created_or_named_in_the_error() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        create_results_dir(&dir).unwrap();
        assert!(dir.is_dir());
        create_results_dir(&dir).unwrap();
        let file = tmp.path().join("plain-file");
        std::fs::write(&file, "x").unwrap();
        let err = create_results_dir(&file.join("sub")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("plain-file/sub") && msg.contains("results directory"),
            "{msg}"
        );
    }

    #[test]
    fn rfc3339_formats_known_instants() {
        let at = |s: u64| rfc3339(UNIX_EPOCH + std::time::Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_795_947_865), "2026-11-29T10:24:25Z");
        assert_eq!(at(4_102_444_799), "2099-12-31T23:59:59Z");
        assert_eq!(compact_timestamp(&now_rfc3339()).map(|s| s.len()), Some(15));
    }

    #[test]
    fn run_info_round_trips_through_json() {
        for info in [bw_info(), lat_info()] {
            let text = serde_json::to_string(&info).unwrap();
            let back: RunInfo = serde_json::from_str(&text).unwrap();
            assert_eq!(back, info);
        }
        let v = serde_json::to_value(bw_info()).unwrap();
        assert_eq!(v["local"][0]["gid"], "::ffff:10.0.0.5");
        assert_eq!(v["test"]["verb"], "write");
        assert_eq!(v["role"], "client");
    }

    #[test]
    fn bad_gid_text_is_named() {
        let mut v = serde_json::to_value(bw_info()).unwrap();
        v["local"][0]["gid"] = "not-a-gid".into();
        let err = serde_json::from_value::<RunInfo>(v).unwrap_err();
        assert!(err.to_string().contains("not-a-gid"), "{err}");
    }
}
