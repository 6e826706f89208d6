//! A network interface's driver statistics (what `ethtool -S` prints), through the `SIOCETHTOOL`
//! ioctl: `ETHTOOL_GSSET_INFO` for how many, `ETHTOOL_GSTRINGS` for their names, `ETHTOOL_GSTATS` for
//! their values; and its driver and firmware (what `ethtool -i` prints, `ETHTOOL_GDRVINFO`), which a
//! result file's provenance names. No ethtool binary is needed at run time. Shared by the transports:
//! verbs reads the RDMA port's netdev, soft and tcp the interface they use.
//!
//! The RDMA port's PFC pause counters live here, on the netdev behind it (mlx5: `rx_prio3_pause`,
//! `tx_prio3_pause`, `rx_prio3_pause_duration`), not under the port's sysfs directory.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `SIOCETHTOOL` (linux/sockios.h).
const SIOCETHTOOL: libc::c_ulong = 0x8946;
/// `ETHTOOL_GDRVINFO` (linux/ethtool.h).
const ETHTOOL_GDRVINFO: u32 = 0x03;
/// `ETHTOOL_GSTRINGS`.
const ETHTOOL_GSTRINGS: u32 = 0x1b;
/// `ETHTOOL_GSTATS`.
const ETHTOOL_GSTATS: u32 = 0x1d;
/// `ETHTOOL_GSSET_INFO`.
const ETHTOOL_GSSET_INFO: u32 = 0x37;
/// `ETH_SS_STATS`: the string set of `ethtool -S`.
const ETH_SS_STATS: u32 = 1;
/// `ETH_GSTRING_LEN`: every name is this many bytes, NUL-padded.
const ETH_GSTRING_LEN: usize = 32;
/// More statistics than any driver has (mlx5 has about 2,000 with many channels): a bound on what
/// a misbehaving driver could make us allocate.
const MAX_STATS: u32 = 1 << 16;

/// Why an interface's statistics could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EthtoolError {
    /// The control socket the ioctl goes through.
    #[error("cannot open a socket for the SIOCETHTOOL ioctl: {0}")]
    Socket(#[source] io::Error),
    /// The interface name cannot be passed to the kernel.
    #[error("{0:?} is not an interface name (at most 15 bytes, no NUL)")]
    BadName(String),
    /// One of the three requests failed.
    #[error("{request} on {ifname} failed: {source}{hint}")]
    Ioctl {
        /// The interface.
        ifname: String,
        /// `ETHTOOL_GSSET_INFO`, `ETHTOOL_GSTRINGS` or `ETHTOOL_GSTATS`.
        request: &'static str,
        /// The kernel's error.
        #[source]
        source: io::Error,
        /// What the error usually means.
        hint: &'static str,
    },
    /// The driver has no statistics (lo, dummy).
    #[error("{0} has no driver statistics (ethtool -S {0} shows none)")]
    NoStats(String),
    /// The driver changed its list between two requests (an interface reconfigured meanwhile).
    #[error(
        "{ifname}'s statistics changed from {was} to {now} while being read (the interface was reconfigured?); run again"
    )]
    Changed {
        /// The interface.
        ifname: String,
        /// How many there were.
        was: usize,
        /// How many there are now.
        now: usize,
    },
}

/// An interface's driver and firmware, as `ethtool -i` names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverInfo {
    /// The driver (`mlx5_core`, `veth`, `virtio_net`).
    pub driver: String,
    /// The driver's version, when it gives one.
    pub version: Option<String>,
    /// The firmware's version (`22.39.1002 (MT_0000000359)`), when the device has one.
    pub firmware: Option<String>,
    /// The bus address (`0000:3b:00.0`), when on a bus.
    pub bus: Option<String>,
}

/// A NUL-padded C string of the kernel's, `None` when empty or `N/A` (ethtool's word for none).
fn c_text(bytes: &[u8]) -> Option<String> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = String::from_utf8_lossy(&bytes[..end]).trim().to_owned();
    (!text.is_empty() && text != "N/A").then_some(text)
}

/// One interface's statistics as a control socket reads them.
#[derive(Debug)]
pub struct Ethtool {
    sock: OwnedFd,
    ifname: String,
}

impl Ethtool {
    /// A reader of `ifname`'s statistics, in this network namespace.
    pub fn open(ifname: &str) -> Result<Ethtool, EthtoolError> {
        if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ || ifname.contains('\0') {
            return Err(EthtoolError::BadName(ifname.to_string()));
        }
        // SAFETY: socket(2) with constant arguments; the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(EthtoolError::Socket(io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a socket we just opened and own.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Ethtool {
            sock,
            ifname: ifname.to_string(),
        })
    }

    /// The interface read.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The statistics' names, in the driver's order (the order of [`Ethtool::values`]).
    pub fn names(&self) -> Result<Vec<String>, EthtoolError> {
        let n = self.count()?;
        // struct ethtool_gstrings { u32 cmd, string_set, len; u8 data[]; }, in u32 words for alignment.
        let mut buf = vec![0u32; 3 + n * ETH_GSTRING_LEN / 4];
        buf[0] = ETHTOOL_GSTRINGS;
        buf[1] = ETH_SS_STATS;
        buf[2] = n as u32;
        self.ioctl("ETHTOOL_GSTRINGS", buf.as_mut_ptr().cast())?;
        if buf[2] as usize != n {
            return Err(self.changed(n, buf[2] as usize));
        }
        let bytes: Vec<u8> = buf[3..].iter().flat_map(|w| w.to_ne_bytes()).collect();
        Ok(bytes
            .chunks(ETH_GSTRING_LEN)
            .map(|s| {
                let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
                String::from_utf8_lossy(&s[..end]).into_owned()
            })
            .collect())
    }

    /// Every statistic's value now, in the order of [`Ethtool::names`]; `expect` is how many the
    /// names listed (a different count is [`EthtoolError::Changed`]).
    pub fn values(&self, expect: usize) -> Result<Vec<u64>, EthtoolError> {
        // struct ethtool_stats { u32 cmd, n_stats; u64 data[]; }: the header is the first u64.
        let mut buf = vec![0u64; 1 + expect];
        let header = buf.as_mut_ptr().cast::<u32>();
        // SAFETY: `buf` has at least 8 bytes, aligned for u32; both writes are inside them.
        unsafe {
            header.write(ETHTOOL_GSTATS);
            header.add(1).write(expect as u32);
        }
        self.ioctl("ETHTOOL_GSTATS", buf.as_mut_ptr().cast())?;
        // SAFETY: as above; the kernel wrote n_stats, which says how many it filled.
        let filled = unsafe { header.add(1).read() } as usize;
        if filled != expect {
            return Err(self.changed(expect, filled));
        }
        Ok(buf[1..].to_vec())
    }

    /// The driver's name and version and the firmware's (`ethtool -i`); `EOPNOTSUPP` for an
    /// interface without a driver to name (lo).
    pub fn driver_info(&self) -> Result<DriverInfo, EthtoolError> {
        /// struct ethtool_drvinfo.
        #[repr(C)]
        struct DrvInfo {
            cmd: u32,
            driver: [u8; 32],
            version: [u8; 32],
            fw_version: [u8; 32],
            bus_info: [u8; 32],
            erom_version: [u8; 32],
            reserved2: [u8; 12],
            counts: [u32; 5],
        }
        let mut info = DrvInfo {
            cmd: ETHTOOL_GDRVINFO,
            driver: [0; 32],
            version: [0; 32],
            fw_version: [0; 32],
            bus_info: [0; 32],
            erom_version: [0; 32],
            reserved2: [0; 12],
            counts: [0; 5],
        };
        self.ioctl("ETHTOOL_GDRVINFO", (&raw mut info).cast())?;
        Ok(DriverInfo {
            driver: c_text(&info.driver).unwrap_or_default(),
            version: c_text(&info.version),
            firmware: c_text(&info.fw_version),
            bus: c_text(&info.bus_info),
        })
    }

    /// `ETH_SS_STATS`'s length, through `ETHTOOL_GSSET_INFO`.
    fn count(&self) -> Result<usize, EthtoolError> {
        /// struct ethtool_sset_info with room for the one set asked about.
        #[repr(C)]
        struct SsetInfo {
            cmd: u32,
            reserved: u32,
            sset_mask: u64,
            data: [u32; 1],
        }
        let mut info = SsetInfo {
            cmd: ETHTOOL_GSSET_INFO,
            reserved: 0,
            sset_mask: 1 << ETH_SS_STATS,
            data: [0],
        };
        self.ioctl("ETHTOOL_GSSET_INFO", (&raw mut info).cast())?;
        // The kernel clears the bit of a set the driver does not have.
        if info.sset_mask & (1 << ETH_SS_STATS) == 0 || info.data[0] == 0 {
            return Err(EthtoolError::NoStats(self.ifname.clone()));
        }
        Ok(info.data[0].min(MAX_STATS) as usize)
    }

    /// `SIOCETHTOOL` with `data` as the request.
    fn ioctl(&self, request: &'static str, data: *mut libc::c_void) -> Result<(), EthtoolError> {
        // SAFETY: ifreq is plain old data; all-zero is valid.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(self.ifname.as_bytes()) {
            *dst = *src as libc::c_char;
        }
        req.ifr_ifru.ifru_data = data.cast();
        // SAFETY: the name is NUL-terminated within IFNAMSIZ (checked in `open`, the rest zero);
        // `data` points to a request whose header says how much the kernel may write, and each
        // caller sized its buffer for that.
        if unsafe { libc::ioctl(self.sock.as_raw_fd(), SIOCETHTOOL, &mut req) } < 0 {
            let source = io::Error::last_os_error();
            let hint = match source.raw_os_error() {
                Some(libc::ENODEV) => " (no such interface in this network namespace)",
                Some(libc::EOPNOTSUPP) => " (the driver has no ethtool statistics)",
                _ => "",
            };
            return Err(EthtoolError::Ioctl {
                ifname: self.ifname.clone(),
                request,
                source,
                hint,
            });
        }
        Ok(())
    }

    fn changed(&self, was: usize, now: usize) -> EthtoolError {
        EthtoolError::Changed {
            ifname: self.ifname.clone(),
            was,
            now,
        }
    }
}

/// The statistics of `ifname` as `ethtool -S` lists them: (name, value) in the driver's order.
pub fn stats(ifname: &str) -> Result<Vec<(String, u64)>, EthtoolError> {
    let e = Ethtool::open(ifname)?;
    let names = e.names()?;
    let values = e.values(names.len())?;
    Ok(names.into_iter().zip(values).collect())
}

/// True for a per-priority PFC counter (802.1Qbb), as mlx5 names them: `rx_prio<N>_pause`,
/// `tx_prio<N>_pause`, `rx_prio<N>_pause_duration`, `tx_prio<N>_pause_duration`.
pub fn is_pfc(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix("rx_prio")
        .or_else(|| name.strip_prefix("tx_prio"))
    else {
        return false;
    };
    let Some((prio, tail)) = rest.split_once('_') else {
        return false;
    };
    matches!(prio.parse::<u8>(), Ok(0..=7)) && matches!(tail, "pause" | "pause_duration")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pfc_counters_are_told_from_the_rest_by_name() {
        for yes in [
            "rx_prio0_pause",
            "tx_prio3_pause",
            "rx_prio7_pause_duration",
            "tx_prio5_pause_duration",
        ] {
            assert!(is_pfc(yes), "{yes}");
        }
        for no in [
            "rx_pause_ctrl_phy",
            "rx_prio8_pause",
            "rx_prio3_packets",
            "rx_prio3_pause_transition",
            "peer_ifindex",
            "rx_prio_pause",
            "xrx_prio3_pause",
        ] {
            assert!(!is_pfc(no), "{no}");
        }
    }

    #[test]
    fn loopback_has_no_statistics_and_a_missing_interface_is_named() {
        let e = stats("lo").unwrap_err();
        assert!(
            matches!(e, EthtoolError::NoStats(_) | EthtoolError::Ioctl { .. }),
            "{e}"
        );
        let e = stats("nosuchif0").unwrap_err().to_string();
        assert!(
            e.contains("nosuchif0") && e.contains("ETHTOOL_GSSET_INFO"),
            "{e}"
        );
        assert!(e.contains("network namespace"), "{e}");
        assert!(matches!(
            Ethtool::open("an-interface-name-too-long"),
            Err(EthtoolError::BadName(_))
        ));
    }
}
