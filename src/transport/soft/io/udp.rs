//! RoCE v2 over an ordinary UDP socket: unprivileged, IPv4 and IPv6.
//!
//! The socket is bound to the interface's exact address on port 4791 and never connected. With
//! `IP_PMTUDISC_DO` every IPv4 datagram carries DF and, because the socket is unconnected, IP ID 0
//! (`ip_select_ident_segs`; a connected socket numbers them from a random start we cannot read):
//! the one unmasked IPv4 field we do not write ourselves is therefore known, and the ICRC we
//! compute over `45 00 len 0000 4000 ff 11 ffff src dst` is the one a capture of the wire verifies
//! (roce-wire.md §9). Bound to one address, it receives only datagrams sent to that address, so it
//! does not ask the kernel for each one's destination (no IP_PKTINFO control message). UDP
//! checksums are 0 as rxe sends them (`SO_NO_CHECK`, `UDP_NO_CHECK6_TX`), and IPv6 zero-checksum
//! datagrams are accepted (`UDP_NO_CHECK6_RX`), which rxe and ConnectX send.
//!
//! Packets move in batches: [`RxBatch`] for `recvmmsg`, [`TxBatch`] for `sendmmsg`, each with its
//! headers, iovecs, addresses and packet slots allocated once.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use rustix::io::Errno;
use rustix::net::sockopt::{self, Ipv4PathMtuDiscovery, Ipv6PathMtuDiscovery};

use super::batch::{RxBatch, TxBatch};
use super::{IoError, ROCE_V2_PORT, grow_buffer, setsockopt_int};
use crate::transport::soft::netdev::NetDev;

/// Largest UDP payload of a RoCE packet at MTU 4096: BTH 12 + RETH 16 + ImmDt 4 + 4096 + ICRC 4,
/// rounded up with room to spare.
pub const MAX_ROCE_UDP_PAYLOAD: usize = 4096 + 128;

/// Socket and batch sizes of the UDP backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpConfig {
    /// Local and peer UDP port; 4791 except in tests that must not collide.
    pub port: u16,
    /// Packets per `recvmmsg`/`sendmmsg`.
    pub batch: usize,
    /// Bytes per packet slot.
    pub slot_len: usize,
    /// Requested SO_RCVBUF and SO_SNDBUF.
    pub socket_buffer: usize,
    /// Let the kernel merge received datagrams (UDP_GRO); slots must then hold 64 KiB and the
    /// caller splits by [`super::batch::RxDatagram::gro_segment`].
    pub gro: bool,
    /// Send UDP checksum 0, as rxe does (the ICRC masks it, so any value is valid RoCE). The kernel
    /// refuses UDP_SEGMENT sends (EINVAL) on a socket without checksums, so GSO needs this off.
    pub zero_checksum: bool,
    /// Ask for each datagram's destination address (IP_PKTINFO / IPV6_RECVPKTINFO). A socket
    /// bound to one unicast address receives only datagrams sent to it, so the endpoint leaves this
    /// off and spares the kernel a control message per datagram.
    pub pktinfo: bool,
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            port: ROCE_V2_PORT,
            batch: 64,
            slot_len: MAX_ROCE_UDP_PAYLOAD,
            socket_buffer: 8 << 20,
            gro: false,
            zero_checksum: true,
            pktinfo: false,
        }
    }
}

/// A UDP socket bound to one address on port 4791 (or the configured port), non-blocking.
pub struct UdpSocket {
    fd: OwnedFd,
    local: SocketAddr,
    /// Received datagrams come with control messages (UDP_GRO, PKTINFO) that must be read.
    control: bool,
}

// Kernel constants that not every libc version exports.
const UDP_NO_CHECK6_TX: libc::c_int = 101;
const UDP_NO_CHECK6_RX: libc::c_int = 102;

impl UdpSocket {
    /// Binds `addr` (which must be configured on `dev`; any 127/8 address on `lo`).
    pub fn bind(dev: &NetDev, addr: IpAddr, cfg: &UdpConfig) -> Result<UdpSocket, IoError> {
        if !dev.has_address(addr) {
            let mut available: Vec<String> = dev.ipv4.iter().map(|a| a.to_string()).collect();
            available.extend(dev.ipv6.iter().map(|a| a.to_string()));
            return Err(IoError::AddrNotOnInterface {
                addr,
                dev: dev.name.clone(),
                available,
            });
        }
        // Link-local IPv6 needs the interface as scope.
        let scope = match addr {
            IpAddr::V6(v6) if v6.is_unicast_link_local() => dev.index,
            _ => 0,
        };
        UdpSocket::bind_scoped(addr, scope, cfg)
    }

    /// Binds `addr` without checking it against an interface (`scope` is the IPv6 scope id).
    pub fn bind_scoped(addr: IpAddr, scope: u32, cfg: &UdpConfig) -> Result<UdpSocket, IoError> {
        let fd = super::udp_socket(addr)
            .map_err(|e| IoError::os("socket(SOCK_DGRAM) for RoCE v2", e))?;
        match addr {
            IpAddr::V4(_) => {
                sockopt::set_ip_mtu_discover(&fd, Ipv4PathMtuDiscovery::DO)
                    .map_err(failed("IP_MTU_DISCOVER", libc::IP_PMTUDISC_DO))?;
                if cfg.zero_checksum {
                    setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_NO_CHECK, 1, "SO_NO_CHECK")?;
                }
                if cfg.pktinfo {
                    setsockopt_int(&fd, libc::IPPROTO_IP, libc::IP_PKTINFO, 1, "IP_PKTINFO")?;
                }
            }
            IpAddr::V6(_) => {
                sockopt::set_ipv6_v6only(&fd, true).map_err(failed("IPV6_V6ONLY", 1))?;
                sockopt::set_ipv6_mtu_discover(&fd, Ipv6PathMtuDiscovery::DO)
                    .map_err(failed("IPV6_MTU_DISCOVER", libc::IPV6_PMTUDISC_DO))?;
                if cfg.zero_checksum {
                    setsockopt_int(
                        &fd,
                        libc::IPPROTO_UDP,
                        UDP_NO_CHECK6_TX,
                        1,
                        "UDP_NO_CHECK6_TX",
                    )?;
                }
                setsockopt_int(
                    &fd,
                    libc::IPPROTO_UDP,
                    UDP_NO_CHECK6_RX,
                    1,
                    "UDP_NO_CHECK6_RX",
                )?;
                if cfg.pktinfo {
                    setsockopt_int(
                        &fd,
                        libc::IPPROTO_IPV6,
                        libc::IPV6_RECVPKTINFO,
                        1,
                        "IPV6_RECVPKTINFO",
                    )?;
                }
            }
        }
        if cfg.gro {
            setsockopt_int(&fd, libc::SOL_UDP, super::batch::UDP_GRO, 1, "UDP_GRO")?;
        }
        grow_buffer(&fd, true, cfg.socket_buffer)?;
        grow_buffer(&fd, false, cfg.socket_buffer)?;
        let local = match addr {
            IpAddr::V4(v4) => SocketAddr::new(IpAddr::V4(v4), cfg.port),
            IpAddr::V6(v6) => SocketAddr::V6(std::net::SocketAddrV6::new(v6, cfg.port, 0, scope)),
        };
        rustix::net::bind(&fd, &local).map_err(|e| match e {
            Errno::ADDRINUSE => IoError::PortInUse {
                addr,
                port: cfg.port,
            },
            Errno::ADDRNOTAVAIL => IoError::AddrNotOnInterface {
                addr,
                dev: "any interface of this network namespace".into(),
                available: Vec::new(),
            },
            _ => IoError::os(format!("bind UDP {local}"), e),
        })?;
        Ok(UdpSocket {
            fd,
            local,
            control: cfg.gro || cfg.pktinfo,
        })
    }

    /// The bound address and port.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The receive buffer the kernel actually granted (it reports twice the requested value).
    pub fn recv_buffer(&self) -> Result<usize, IoError> {
        sockopt::socket_recv_buffer_size(&self.fd)
            .map_err(|e| IoError::os("getsockopt(SO_RCVBUF)", e))
    }

    /// Receives up to a batch of datagrams without blocking; returns how many (0 when none wait).
    pub fn recv_batch(&self, rx: &mut RxBatch) -> Result<usize, IoError> {
        rx.recv(self.fd.as_raw_fd(), self.control)
            .map_err(|source| IoError::Os {
                context: format!("recvmmsg on UDP {}", self.local),
                source,
            })
    }

    /// Sends the queued datagrams of `tx` with as few `sendmmsg` calls as the kernel allows without
    /// blocking; what the kernel did not take stays queued. Returns how many were sent now.
    pub fn send_batch(&self, tx: &mut TxBatch) -> Result<usize, IoError> {
        tx.send(self.fd.as_raw_fd()).map_err(|source| IoError::Os {
            context: format!("sendmmsg from UDP {}{}", self.local, refused_hint(&source)),
            source,
        })
    }

    /// Sends the queued super-datagrams of `tx` (UDP_SEGMENT); what the kernel did not take stays
    /// queued. Returns how many super-datagrams went out. The socket needs `zero_checksum: false`.
    pub fn send_gso_batch(&self, tx: &mut super::gso::GsoTxBatch) -> Result<usize, IoError> {
        tx.send(self.fd.as_raw_fd()).map_err(|source| IoError::Os {
            context: format!(
                "sendmmsg(UDP_SEGMENT) from UDP {}{}",
                self.local,
                refused_hint(&source)
            ),
            source,
        })
    }
}

/// The error of a typed socket option setter, named as `setsockopt_int` names its own.
fn failed(what: &'static str, value: libc::c_int) -> impl FnOnce(Errno) -> IoError {
    move |e| IoError::os(format!("setsockopt({what}={value})"), e)
}

/// What EPERM on a send means: netfilter dropped the datagram on its way out.
fn refused_hint(e: &std::io::Error) -> &'static str {
    if e.raw_os_error() == Some(libc::EPERM) {
        " (refused by a netfilter/iptables rule on this host's output path: allow UDP port 4791)"
    } else {
        ""
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::batch::RxDatagram;
    use super::*;

    fn cfg(port: u16) -> UdpConfig {
        UdpConfig {
            port,
            batch: 8,
            pktinfo: true,
            ..UdpConfig::default()
        }
    }

    /// A free high port for a test, so parallel tests and a real roceperf on 4791 never collide.
    pub(in crate::transport::soft::io) fn free_port(ip: IpAddr) -> u16 {
        std::net::UdpSocket::bind((ip, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// A socket on 127.0.0.1 and one on `b_ip`, on one free port.
    fn loopback_pair(b_ip: IpAddr) -> (UdpSocket, UdpSocket) {
        let port = free_port(b_ip);
        let a = UdpSocket::bind_scoped("127.0.0.1".parse().unwrap(), 0, &cfg(port)).unwrap();
        let b = UdpSocket::bind_scoped(b_ip, 0, &cfg(port)).unwrap();
        (a, b)
    }

    #[test]
    fn batch_round_trip_over_loopback_v4() {
        let b_ip: IpAddr = "127.0.0.3".parse().unwrap();
        let (a, b) = loopback_pair(b_ip);
        let mut tx = TxBatch::new(8, 256);
        for k in 0..8u8 {
            assert!(tx.push(b.local_addr(), |buf| {
                buf[..3].copy_from_slice(&[k, k, k]);
                3 + k as usize
            }));
        }
        assert!(tx.is_full());
        assert!(!tx.push(b.local_addr(), |_| unreachable!(
            "full batch must not call fill"
        )));
        assert_eq!(a.send_batch(&mut tx).unwrap(), 8);
        assert_eq!(tx.pending(), 0);
        let mut rx = RxBatch::new(8, 256);
        let mut got = Vec::new();
        recv_datagrams(&b, &mut rx, 8, |d| {
            assert_eq!(d.src, Some(a.local_addr()));
            assert_eq!(d.dst, Some(b_ip));
            assert!(!d.truncated);
            got.push((d.data[0], d.data.len()));
        });
        assert_eq!(
            got,
            (0..8u8).map(|k| (k, 3 + k as usize)).collect::<Vec<_>>()
        );
    }

    /// Receives until one call returns data (the datagrams may take a moment on a loaded host).
    fn recv_some(s: &UdpSocket, rx: &mut RxBatch) -> usize {
        for _ in 0..1000 {
            let n = s.recv_batch(rx).unwrap();
            if n > 0 {
                return n;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("nothing arrived on {}", s.local_addr());
    }

    /// Receives until `n` datagrams have arrived (they may take a moment on a loaded host), handing
    /// each to `each`; gives up after about a second, leaving the caller's checks to fail.
    pub(in crate::transport::soft::io) fn recv_datagrams(
        s: &UdpSocket,
        rx: &mut RxBatch,
        n: usize,
        mut each: impl FnMut(RxDatagram<'_>),
    ) {
        let mut got = 0;
        for _ in 0..1000 {
            s.recv_batch(rx).unwrap();
            for i in 0..rx.len() {
                each(rx.datagram(i));
            }
            got += rx.len();
            if got >= n {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn one_datagram_at_a_time_until_two_receives_in_a_row_find_data() {
        let b_ip: IpAddr = "127.0.0.6".parse().unwrap();
        let (a, b) = loopback_pair(b_ip);
        let mut tx = TxBatch::new(8, 64);
        let mut send = |count: u8| {
            for k in 0..count {
                tx.push(b.local_addr(), |buf| {
                    buf[0] = k;
                    1
                });
            }
            assert_eq!(a.send_batch(&mut tx).unwrap(), count as usize);
        };
        let mut rx = RxBatch::new(8, 64);
        // A batch receive that finds one datagram turns to one at a time.
        send(1);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(b.recv_batch(&mut rx).unwrap(), 1);
        send(4);
        std::thread::sleep(std::time::Duration::from_millis(20));
        // Four waiting: one per receive, twice (the second in a row with data switches back) ...
        assert_eq!(b.recv_batch(&mut rx).unwrap(), 1);
        assert_eq!(rx.datagram(0).data, [0]);
        assert_eq!(b.recv_batch(&mut rx).unwrap(), 1);
        assert_eq!(rx.datagram(0).data, [1]);
        assert_eq!(rx.datagram(0).src, Some(a.local_addr()));
        // ... then the rest in one batch.
        assert_eq!(b.recv_batch(&mut rx).unwrap(), 2);
        assert_eq!(
            (rx.datagram(0).data, rx.datagram(1).data),
            (&[2u8][..], &[3u8][..])
        );
        // An empty receive turns to one at a time again; truncation is still reported there.
        assert_eq!(b.recv_batch(&mut rx).unwrap(), 0);
        a.send_batch(&mut {
            let mut t = TxBatch::new(1, 128);
            t.push(b.local_addr(), |buf| {
                buf[..100].fill(7);
                100
            });
            t
        })
        .unwrap();
        assert_eq!(recv_some(&b, &mut rx), 1);
        assert!(rx.datagram(0).truncated);
        assert_eq!(rx.datagram(0).data.len(), 64);
    }

    #[test]
    fn ipv6_loopback_with_zero_checksum_rx() {
        let ip: IpAddr = "::1".parse().unwrap();
        let Ok(probe) = std::net::UdpSocket::bind((ip, 0)) else {
            return; // no IPv6 on this host's lo: nothing to test
        };
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let b = UdpSocket::bind_scoped(ip, 0, &cfg(port)).unwrap();
        // The sender sets UDP_NO_CHECK6_TX, so the datagram really carries checksum 0; the receiver
        // only gets it because of UDP_NO_CHECK6_RX.
        let a = std::net::UdpSocket::bind((ip, 0)).unwrap();
        setsockopt_int(
            &a,
            libc::IPPROTO_UDP,
            UDP_NO_CHECK6_TX,
            1,
            "UDP_NO_CHECK6_TX",
        )
        .unwrap();
        a.send_to(b"roce", b.local_addr()).unwrap();
        let mut rx = RxBatch::new(4, 64);
        recv_some(&b, &mut rx);
        assert_eq!(rx.len(), 1);
        assert_eq!(rx.datagram(0).data, b"roce");
        assert_eq!(rx.datagram(0).dst, Some(ip));
    }

    #[test]
    fn truncation_is_flagged() {
        let ip: IpAddr = "127.0.0.4".parse().unwrap();
        let port = free_port(ip);
        let b = UdpSocket::bind_scoped(ip, 0, &cfg(port)).unwrap();
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.send_to(&[0x55; 300], b.local_addr()).unwrap();
        let mut rx = RxBatch::new(2, 64);
        recv_some(&b, &mut rx);
        assert!(rx.datagram(0).truncated);
        assert_eq!(rx.datagram(0).data.len(), 64);
    }

    #[test]
    fn port_in_use_names_the_remedies() {
        let ip: IpAddr = "127.0.0.5".parse().unwrap();
        let port = free_port(ip);
        let _first = UdpSocket::bind_scoped(ip, 0, &cfg(port)).unwrap();
        let msg = UdpSocket::bind_scoped(ip, 0, &cfg(port))
            .err()
            .unwrap()
            .to_string();
        assert!(
            msg.contains("127.0.0.5") && msg.contains("rdma_rxe"),
            "{msg}"
        );
        assert!(
            msg.contains("127.0.0.2") && msg.contains("netns.sh"),
            "{msg}"
        );
    }

    #[test]
    fn address_not_on_the_interface_is_refused() {
        let lo = NetDev::by_name("lo").unwrap();
        let err = UdpSocket::bind(&lo, "192.0.2.99".parse().unwrap(), &cfg(4791))
            .err()
            .unwrap();
        assert!(matches!(err, IoError::AddrNotOnInterface { .. }), "{err}");
        assert!(err.to_string().contains("'lo'"), "{err}");
    }
}
