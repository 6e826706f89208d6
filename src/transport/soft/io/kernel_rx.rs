//! What becomes of the RoCE v2 frames an AF_PACKET endpoint took. The packet socket is a tap: the
//! kernel gives it a copy of each frame and then hands the frame to its own IP and UDP receive,
//! which finds no socket on port 4791 and answers with an ICMP port-unreachable. RoCE v1 frames
//! (Ethertype 0x8915) have no such stack, so without a guard RoCE v2 pays a receive path that
//! RoCE v1 does not, and the two versions stop being compared on one path.
//!
//! The guard, best first: a TCX ingress program that drops UDP frames to our address and port
//! after the tap ([`super::tcx`]: the IP stack never sees them), or, when it cannot be attached (not
//! root, Linux before 6.6, no BPF), a UDP socket on our address and port that drops everything in
//! its filter (the frames still climb IP and UDP receive, but end there). The run header says which
//! one runs and why.

use std::fmt;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::str::FromStr;

use super::setsockopt_int;
use super::tcx;

/// The environment variable that picks the guard when [`SoftConfig::kernel_rx`] does not (tests and
/// measurements of the fallback): `tcx`, `sink` or `off`.
///
/// [`SoftConfig::kernel_rx`]: crate::transport::soft::endpoint::SoftConfig::kernel_rx
pub const KERNEL_RX_ENV: &str = "ROCEPERF_KERNEL_RX";

/// How the kernel's IP/UDP receive is kept off the RoCE v2 frames an AF_PACKET endpoint took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KernelRx {
    /// A TCX ingress program drops them after the packet socket's copy; the sink socket when the
    /// program cannot be attached.
    #[default]
    Tcx,
    /// The sink socket alone: the frames climb IP and UDP receive into a socket that drops them.
    Sink,
    /// Nothing: the kernel's UDP finds no socket and answers each frame with an ICMP error. For
    /// measuring a guard of one's own (an iptables raw rule, a tc filter).
    Off,
}

impl KernelRx {
    /// The guard [`KERNEL_RX_ENV`] asks for; the default when it is unset or empty.
    pub fn from_env() -> Result<KernelRx, KernelRxParseError> {
        match std::env::var(KERNEL_RX_ENV) {
            Ok(v) if !v.trim().is_empty() => v.trim().parse(),
            _ => Ok(KernelRx::default()),
        }
    }

    fn word(self) -> &'static str {
        match self {
            KernelRx::Tcx => "tcx",
            KernelRx::Sink => "sink",
            KernelRx::Off => "off",
        }
    }
}

impl fmt::Display for KernelRx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// [`KERNEL_RX_ENV`] holds none of its words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{KERNEL_RX_ENV}={0}: use tcx (the default: a TCX ingress program drops RoCE v2 frames after the AF_PACKET socket's copy), sink (a UDP socket absorbs them) or off"
)]
pub struct KernelRxParseError(String);

impl FromStr for KernelRx {
    type Err = KernelRxParseError;

    fn from_str(s: &str) -> Result<KernelRx, KernelRxParseError> {
        [KernelRx::Tcx, KernelRx::Sink, KernelRx::Off]
            .into_iter()
            .find(|k| k.word().eq_ignore_ascii_case(s))
            .ok_or_else(|| KernelRxParseError(s.to_string()))
    }
}

/// What holds the guard in place; dropping it removes the guard.
enum Held {
    /// The TCX link: the program detaches when it closes.
    Tcx { _link: OwnedFd },
    /// The sink socket (none when the port was taken), and why there is no TCX program.
    Sink {
        sink: Option<OwnedFd>,
        no_tcx: String,
    },
    /// Nothing, as asked.
    Off,
}

/// The guard of one AF_PACKET endpoint's RoCE v2 frames to `to`, as opened.
pub(crate) struct KernelRxGuard {
    to: SocketAddr,
    held: Held,
}

impl KernelRxGuard {
    /// Puts the guard `want` in place for UDP frames to `to` arriving on interface `ifindex`,
    /// falling back from TCX to the sink socket.
    pub(crate) fn open(ifindex: u32, to: SocketAddr, want: KernelRx) -> KernelRxGuard {
        let held = match want {
            KernelRx::Off => Held::Off,
            KernelRx::Sink => Held::Sink {
                sink: udp_sink(to),
                no_tcx: format!("{KERNEL_RX_ENV}=sink asked for the socket"),
            },
            KernelRx::Tcx => match tcx::attach_drop(ifindex, to) {
                Ok(link) => Held::Tcx { _link: link },
                Err(e) => Held::Sink {
                    sink: udp_sink(to),
                    no_tcx: e.to_string(),
                },
            },
        };
        KernelRxGuard { to, held }
    }

    /// Which guard runs: the TCX program, or the sink socket (then false).
    pub(crate) fn skips_kernel_udp(&self) -> bool {
        matches!(self.held, Held::Tcx { .. })
    }

    /// What happens to our frames in the kernel, and why, for the backend line of the run header.
    pub(crate) fn describe(&self) -> String {
        let to = self.to;
        match &self.held {
            Held::Tcx { .. } => format!(
                "kernel IP/UDP receive skipped for frames to {to} (a TCX ingress program drops them after this socket's copy)"
            ),
            Held::Sink { sink, no_tcx } => format!(
                "frames to {to} also climb the kernel's IP/UDP receive, {} (no TCX ingress program: {no_tcx})",
                match sink {
                    Some(_) => "into a socket that drops them".to_string(),
                    None => format!("to whoever owns {to} (no sink socket: the port is taken)"),
                }
            ),
            Held::Off => format!(
                "frames to {to} also climb the kernel's IP/UDP receive, unguarded ({KERNEL_RX_ENV}=off)"
            ),
        }
    }
}

/// A UDP socket on `at` that drops every datagram in its filter. While RoCE v2 frames reach an
/// AF_PACKET endpoint through its tap, the kernel also hands each to its own UDP stack, which,
/// finding no socket on the port, counts it in UdpNoPorts and tries an ICMP port-unreachable for it
/// (about half the receive side's system time per frame across a veth pair). With this socket the
/// lookup finds a home for them and the filter discards them before any queueing; UDP_GRO on it
/// keeps a GSO super-frame whole on the way to the filter instead of cut into its packets first.
/// `None` when the port is taken (whoever owns it receives them instead) or the socket cannot be
/// made: then things are as they were without it.
fn udp_sink(at: SocketAddr) -> Option<OwnedFd> {
    let fd = super::udp_socket(at.ip()).ok()?;
    // `ret #0`: keep no byte of anything.
    let drop_all = [libc::sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: 0,
    }];
    let fprog = libc::sock_fprog {
        len: 1,
        filter: drop_all.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: fprog points at drop_all, which outlives the call; the kernel copies the program.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &fprog as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return None;
    }
    // Best effort: without it a super-frame is cut up before the filter drops the pieces.
    let _ = setsockopt_int(&fd, libc::SOL_UDP, super::batch::UDP_GRO, 1, "UDP_GRO");
    rustix::net::bind(&fd, &at).ok()?;
    Some(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_word_parses_and_a_bad_one_names_the_choices() {
        assert_eq!("tcx".parse(), Ok(KernelRx::Tcx));
        assert_eq!("SINK".parse(), Ok(KernelRx::Sink));
        assert_eq!("off".parse(), Ok(KernelRx::Off));
        assert_eq!(KernelRx::default(), KernelRx::Tcx);
        let e = "xdp".parse::<KernelRx>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "ROCEPERF_KERNEL_RX=xdp: use tcx (the default: a TCX ingress program drops RoCE v2 frames after the AF_PACKET socket's copy), sink (a UDP socket absorbs them) or off"
        );
        for k in [KernelRx::Tcx, KernelRx::Sink, KernelRx::Off] {
            assert_eq!(k.to_string().parse(), Ok(k));
        }
    }

    #[test]
    fn the_sink_and_off_say_what_the_kernel_does_with_the_frames() {
        // A free port on lo, so nothing else's traffic is touched.
        let free = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = free.local_addr().unwrap();
        drop(free);
        let sink = KernelRxGuard::open(1, to, KernelRx::Sink);
        assert!(!sink.skips_kernel_udp());
        assert_eq!(
            sink.describe(),
            format!(
                "frames to {to} also climb the kernel's IP/UDP receive, into a socket that drops them (no TCX ingress program: ROCEPERF_KERNEL_RX=sink asked for the socket)"
            )
        );
        // The sink holds the port: a second one finds it taken.
        let taken = KernelRxGuard::open(1, to, KernelRx::Sink);
        assert!(
            taken.describe().contains("to whoever owns"),
            "{}",
            taken.describe()
        );
        let off = KernelRxGuard::open(1, to, KernelRx::Off);
        assert!(
            off.describe()
                .ends_with("unguarded (ROCEPERF_KERNEL_RX=off)")
        );
    }
}
