//! The RDMA port's own counters around a run: `-W/--report-counters` (perftest's: files under
//! `/sys/class/infiniband/<dev>/ports/<port>/`, e.g. `counters/port_xmit_data`,
//! `hw_counters/out_of_buffer`) and, by default, the short set a user of congestion control reads
//! (CNPs, ECN marks, sequence errors, timeouts, RNR; the netdev's PFC pause counters).
//!
//! Every name is resolved once, at set-up, against the tree and the netdev: a name that does not
//! exist is an error then, with what does (perftest says "Unable to access performance counters"
//! and nothing more). Reading is then one file per counter and one ioctl for the netdev.

use super::ethtool::{self, Ethtool, EthtoolError};
use super::sysfs::Sysfs;
use crate::params::{CounterRequest, ETHTOOL_PREFIX};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default set's RDMA counters, read from `hw_counters/` when the driver has them: mlx5's names
/// first, then kernel Soft-RoCE's (rxe), which names its own.
pub const DEFAULT_HW: &[&str] = &[
    // mlx5: congestion control (notification and reaction point).
    "np_cnp_sent",
    "np_ecn_marked_roce_packets",
    "rp_cnp_handled",
    "rp_cnp_ignored",
    // mlx5: loss and its repair.
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "implied_nak_seq_err",
    "duplicate_request",
    "out_of_buffer",
    // rxe (duplicate_request and, before 5.x, out_of_sequence are shared with mlx5).
    "sent_pkts",
    "rcvd_pkts",
    "out_of_seq_request",
    "rcvd_seq_err",
    "retry_exceeded_err",
    "retry_rnr_exceeded_err",
    "rcvd_rnr_err",
    "send_rnr_err",
    "completer_retry_err",
];

/// Why a counter cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CounterError {
    /// A name given to `-W` that the port does not have.
    #[error("-W {name}: {dir} has no {leaf}; it has: {available}")]
    Missing {
        /// The name as given.
        name: String,
        /// The directory looked in.
        dir: String,
        /// The last part of the name.
        leaf: String,
        /// What the directory holds (or the port's directory, when the name's directory is missing).
        available: String,
    },
    /// A file that holds no counter (`state` reads "4: ACTIVE").
    #[error(
        "-W {name}: {path} is not a counter (it reads {text:?}); name a file of counters/ or hw_counters/"
    )]
    NotACounter {
        /// The name as given.
        name: String,
        /// Its file.
        path: String,
        /// What it holds.
        text: String,
    },
    /// A counter file that could not be read.
    #[error("reading the port counter {path}: {source}")]
    Unreadable {
        /// Its file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// `-W ethtool/...` without a netdev behind the port.
    #[error(
        "-W {name}: no network interface is known behind {device} port {port} (its GID table names none); drop the {ETHTOOL_PREFIX} counters"
    )]
    NoNetdev {
        /// The name as given.
        name: String,
        /// The RDMA device.
        device: String,
        /// Its port.
        port: u8,
    },
    /// A netdev statistic that does not exist.
    #[error("-W {name}: {ifname} has no statistic {stat}; it has: {available}")]
    NoStatistic {
        /// The name as given.
        name: String,
        /// The netdev.
        ifname: String,
        /// The statistic asked for.
        stat: String,
        /// Some of those it has.
        available: String,
    },
    /// The netdev's statistics could not be read.
    #[error("-W {name}: {source}")]
    Ethtool {
        /// The name as given (or the first ethtool one).
        name: String,
        /// The ioctl's error.
        #[source]
        source: EthtoolError,
    },
}

/// Not a counter: how many milliseconds the kernel caches `hw_counters/` values.
const LIFESPAN: &str = "hw_counters/lifespan";

/// Where a counter's value comes from.
#[derive(Debug)]
enum Source {
    /// A sysfs file.
    File(PathBuf),
    /// The netdev's statistic at this index of `ethtool -S`.
    Stat(usize),
}

/// One counter to read.
#[derive(Debug)]
pub struct Counter {
    /// Its name as printed: the path under the port's directory, or `ethtool/<name>`.
    pub name: String,
    /// The value counts 4-byte words (`port_xmit_data`, `port_rcv_data`: the InfiniBand PMA's unit).
    pub words: bool,
    /// A PFC pause counter: its priority.
    pub pfc_priority: Option<u8>,
    source: Source,
}

/// The counters of one port, resolved: read them around the sizes of a run.
#[derive(Debug)]
pub struct PortCounters {
    /// The RDMA device.
    pub device: String,
    /// Its port.
    pub port: u8,
    /// The netdev behind the port, when the tree names one.
    pub netdev: Option<String>,
    /// What is read, in the order printed.
    pub counters: Vec<Counter>,
    /// Why the default set has no PFC counters, when it asked for them and found none.
    pub pfc_note: Option<String>,
    /// How long the kernel keeps `hw_counters/` values before it asks the driver again
    /// (`hw_counters/lifespan`, 10 ms by default): a read sooner than that after the last one
    /// returns the same values. Zero when no `hw_counters/` file is read.
    pub lifespan: Duration,
    /// The netdev's statistics, when a counter is one, and how many it has.
    ethtool: Option<(Ethtool, usize)>,
}

impl PortCounters {
    /// Resolves `req` on `device` port `port` of the sysfs tree at `sysfs_root` (`/sys`; a fake
    /// tree in tests); `None` when nothing is asked or found. A named counter that does not exist is
    /// an error; the default set skips what the driver lacks.
    pub fn open(
        sysfs_root: &Path,
        device: &str,
        port: u8,
        req: &CounterRequest,
    ) -> Result<Option<PortCounters>, CounterError> {
        let sysfs = Sysfs::at(sysfs_root);
        let dir = sysfs.port_dir(device, port);
        let netdev = sysfs.port_netdev(device, port);
        let mut pc = PortCounters {
            device: device.to_string(),
            port,
            netdev,
            counters: Vec::new(),
            pfc_note: None,
            lifespan: Duration::ZERO,
            ethtool: None,
        };
        let mut stats: Option<Vec<String>> = None;
        for name in &req.named {
            if let Some(stat) = name.strip_prefix(ETHTOOL_PREFIX) {
                let names = pc.stat_names(&mut stats, name)?;
                let Some(i) = names.iter().position(|s| s == stat) else {
                    return Err(CounterError::NoStatistic {
                        name: name.clone(),
                        ifname: pc.netdev.clone().unwrap_or_default(),
                        stat: stat.to_string(),
                        available: like(names, stat),
                    });
                };
                pc.push_stat(stat, i);
                continue;
            }
            let path = dir.join(name);
            if !path.is_file() {
                return Err(missing(&dir, name));
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.trim().parse::<u64>().is_err() || name == LIFESPAN {
                return Err(CounterError::NotACounter {
                    name: name.clone(),
                    path: path.display().to_string(),
                    text: text.trim().to_string(),
                });
            }
            pc.counters.push(Counter {
                words: is_words(name),
                name: name.clone(),
                pfc_priority: None,
                source: Source::File(path),
            });
        }
        if req.default_set {
            for leaf in DEFAULT_HW {
                let name = format!("hw_counters/{leaf}");
                let path = dir.join(&name);
                if path.is_file() && !pc.counters.iter().any(|c| c.name == name) {
                    pc.counters.push(Counter {
                        name,
                        words: false,
                        pfc_priority: None,
                        source: Source::File(path),
                    });
                }
            }
            pc.default_pfc(&mut stats);
        }
        if pc
            .counters
            .iter()
            .any(|c| c.name.starts_with("hw_counters/"))
        {
            let ms = std::fs::read_to_string(dir.join(LIFESPAN)).ok();
            pc.lifespan =
                Duration::from_millis(ms.and_then(|t| t.trim().parse().ok()).unwrap_or(10));
        }
        Ok((!pc.counters.is_empty()).then_some(pc))
    }

    /// The default set's PFC counters: every one the netdev has; none, with a note saying why.
    fn default_pfc(&mut self, stats: &mut Option<Vec<String>>) {
        let names = match self.stat_names(stats, "default") {
            Ok(n) => n.clone(),
            Err(e) => {
                self.pfc_note = Some(match e {
                    CounterError::Ethtool { source, .. } => {
                        format!("no PFC pause counters: {source}")
                    }
                    _ => "no PFC pause counters: no network interface is known behind the port"
                        .into(),
                });
                return;
            }
        };
        let before = self.counters.len();
        for (i, stat) in names.iter().enumerate() {
            let taken = |c: &Counter| c.name.strip_prefix(ETHTOOL_PREFIX) == Some(stat.as_str());
            if ethtool::is_pfc(stat) && !self.counters.iter().any(taken) {
                self.push_stat(stat, i);
            }
        }
        if self.counters.len() == before {
            let ifname = self.netdev.as_deref().unwrap_or("?");
            self.pfc_note = Some(format!(
                "no PFC pause counters: {ifname}'s driver has no rx_prio<N>_pause / tx_prio<N>_pause statistics"
            ));
        }
    }

    /// The netdev's statistic names, read once (opening its reader).
    fn stat_names<'a>(
        &mut self,
        cache: &'a mut Option<Vec<String>>,
        name: &str,
    ) -> Result<&'a Vec<String>, CounterError> {
        if cache.is_none() {
            let Some(ifname) = self.netdev.clone() else {
                return Err(CounterError::NoNetdev {
                    name: name.to_string(),
                    device: self.device.clone(),
                    port: self.port,
                });
            };
            let wrap = |source| CounterError::Ethtool {
                name: name.to_string(),
                source,
            };
            let e = Ethtool::open(&ifname).map_err(wrap)?;
            let names = e.names().map_err(wrap)?;
            self.ethtool = Some((e, names.len()));
            *cache = Some(names);
        }
        Ok(cache.as_ref().expect("filled above"))
    }

    fn push_stat(&mut self, stat: &str, index: usize) {
        self.counters.push(Counter {
            name: format!("{ETHTOOL_PREFIX}{stat}"),
            words: false,
            pfc_priority: pfc_priority(stat),
            source: Source::Stat(index),
        });
    }

    /// How long after a read the next one surely asks the driver again: the kernel refreshes
    /// `hw_counters/` when `lifespan`, rounded up to whole jiffies, has passed since its last
    /// refresh, and its check counts the jiffy it ends in (at HZ=100, 10 ms can last 20 ms). Twice
    /// the lifespan and one more 100 Hz jiffy covers every HZ. Zero without `hw_counters/`.
    pub fn refresh_after(&self) -> Duration {
        if self.lifespan.is_zero() {
            return Duration::ZERO;
        }
        2 * self.lifespan + Duration::from_millis(10)
    }

    /// Every counter's value now, in the order of [`PortCounters::counters`].
    pub fn read(&self) -> Result<Vec<u64>, CounterError> {
        let stats = match &self.ethtool {
            Some((e, n))
                if self
                    .counters
                    .iter()
                    .any(|c| matches!(c.source, Source::Stat(_))) =>
            {
                Some(e.values(*n).map_err(|source| CounterError::Ethtool {
                    name: format!("{ETHTOOL_PREFIX}*"),
                    source,
                })?)
            }
            _ => None,
        };
        self.counters
            .iter()
            .map(|c| match &c.source {
                Source::File(p) => read_value(p),
                Source::Stat(i) => Ok(stats.as_ref().map_or(0, |s| s[*i])),
            })
            .collect()
    }
}

/// A sysfs counter's value (decimal text).
fn read_value(path: &Path) -> Result<u64, CounterError> {
    let text = std::fs::read_to_string(path).map_err(|source| CounterError::Unreadable {
        path: path.display().to_string(),
        source,
    })?;
    text.trim().parse().map_err(|_| CounterError::Unreadable {
        path: path.display().to_string(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not a number: {:?}", text.trim()),
        ),
    })
}

/// `port_xmit_data` and `port_rcv_data` count 4-byte words (IBA's PortXmitData / PortRcvData).
fn is_words(name: &str) -> bool {
    matches!(
        name.rsplit('/').next(),
        Some("port_xmit_data" | "port_rcv_data")
    )
}

/// The priority of a PFC counter's name.
fn pfc_priority(stat: &str) -> Option<u8> {
    ethtool::is_pfc(stat).then(|| stat.as_bytes()[7] - b'0')
}

/// The error of a name the port directory does not have, listing what it has.
fn missing(port_dir: &Path, name: &str) -> CounterError {
    let (parent, leaf) = match name.rsplit_once('/') {
        Some((p, l)) => (port_dir.join(p), l),
        None => (port_dir.to_path_buf(), name),
    };
    let (dir, listed) = if parent.is_dir() {
        (parent.clone(), list(&parent))
    } else {
        (port_dir.to_path_buf(), list(port_dir))
    };
    let available = if listed.is_empty() {
        "nothing (is this the right device and port? -d, -i)".to_string()
    } else {
        listed.join(", ")
    };
    CounterError::Missing {
        name: name.to_string(),
        dir: format!("{}/", dir.display()),
        leaf: leaf.to_string(),
        available,
    }
}

fn list(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    if e.path().is_dir() {
                        format!("{n}/")
                    } else {
                        n
                    }
                })
                .filter(|n| n != "lifespan")
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Up to 20 of `names` that share a word with `stat` (all of them when few), for an error.
fn like(names: &[String], stat: &str) -> String {
    const SHOWN: usize = 20;
    let words: Vec<&str> = stat.split('_').filter(|w| w.len() > 2).collect();
    let mut near: Vec<&str> = names
        .iter()
        .filter(|n| words.iter().any(|w| n.contains(w)))
        .map(String::as_str)
        .collect();
    if near.is_empty() {
        near = names.iter().map(String::as_str).collect();
    }
    let more = near.len().saturating_sub(SHOWN);
    let mut text = near[..near.len().min(SHOWN)].join(", ");
    if more > 0 {
        text.push_str(&format!(", … ({} in all: ethtool -S)", names.len()));
    }
    text
}

#[cfg(test)]
mod tests;
