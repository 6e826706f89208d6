//! Plays a running client on the wire: RoCE v2 packets from its address and UDP port, built by the
//! crate's `wire` module with a correct ICRC, sent whole (IP header included) through a raw IP
//! socket; and the server's answers to that address, copied by a raw UDP socket bound to it (the
//! client's own socket, stopped, keeps the originals). Not AF_PACKET on lo: the kernel drops a
//! frame injected there as a martian (a 127/8 source on input, unless `route_localnet`), where
//! lo's own packets arrive with their route already taken.

use std::io::Error as IoError;
use std::mem::size_of;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use roceperf::wire::{
    AtomicEthRepr, BthRepr, EthernetRepr, IbRepr, Ipv4Repr, MacAddr, NetRepr, Opcode, RethRepr,
    RoceFrameRepr, UdpRepr,
};

/// RoCE v2's UDP port: the soft transport binds it on each side's address.
const ROCE_PORT: u16 = 4791;

/// A request as the forger sends it: its IB headers and payload.
pub(super) struct Request {
    pub ib: IbRepr,
    pub payload: Vec<u8>,
}

/// BTH of an RC request to `qpn` at `psn` asking for an acknowledgement.
fn bth(opcode: Opcode, qpn: u32, psn: u32) -> BthRepr {
    BthRepr {
        ack_req: true,
        ..BthRepr::new(opcode, qpn, psn & 0xff_ffff)
    }
}

/// An RDMA WRITE Only of `payload` to `va` under `rkey`.
pub(super) fn write(qpn: u32, psn: u32, va: u64, rkey: u32, payload: &[u8]) -> Request {
    let mut ib = IbRepr::new(bth(Opcode::RC_RDMA_WRITE_ONLY, qpn, psn));
    ib.reth = Some(RethRepr {
        va,
        rkey,
        dma_len: payload.len() as u32,
    });
    Request {
        ib,
        payload: payload.to_vec(),
    }
}

/// An RDMA READ Request of `len` bytes at `va` under `rkey`.
pub(super) fn read(qpn: u32, psn: u32, va: u64, rkey: u32, len: u32) -> Request {
    let mut ib = IbRepr::new(bth(Opcode::RC_RDMA_READ_REQUEST, qpn, psn));
    ib.reth = Some(RethRepr {
        va,
        rkey,
        dma_len: len,
    });
    Request {
        ib,
        payload: Vec::new(),
    }
}

/// A CmpSwap (`compare` is `Some`) or FetchAdd of the 64-bit word at `va` under `rkey`.
pub(super) fn atomic(
    qpn: u32,
    psn: u32,
    va: u64,
    rkey: u32,
    swap_add: u64,
    compare: Option<u64>,
) -> Request {
    let opcode = match compare {
        Some(_) => Opcode::RC_COMPARE_SWAP,
        None => Opcode::RC_FETCH_ADD,
    };
    let mut ib = IbRepr::new(bth(opcode, qpn, psn));
    ib.atomic_eth = Some(AtomicEthRepr {
        va,
        rkey,
        swap_add,
        compare: compare.unwrap_or(0),
    });
    Request {
        ib,
        payload: Vec::new(),
    }
}

/// The two sockets, for one client address and one server address on lo.
pub(super) struct Forger {
    tx: OwnedFd,
    rx: OwnedFd,
    server: Ipv4Addr,
    net: NetRepr,
}

/// `ip`, port 0, as the socket calls take it.
fn sin(ip: Ipv4Addr) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// A raw IPv4 socket of `protocol`; `what` names it if it cannot be had.
fn raw_socket(protocol: libc::c_int, what: &str) -> OwnedFd {
    // SAFETY: a plain socket(2) call; the descriptor is owned at once.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, protocol);
        OwnedFd::from_raw_fd(check(fd, what))
    }
}

fn check(rc: libc::c_int, what: &str) -> libc::c_int {
    assert!(rc >= 0, "{what}: {}", IoError::last_os_error());
    rc
}

impl Forger {
    /// Frames from `client`:4791 to `server`:4791, and copies of what `server` sends to `client`.
    pub(super) fn open(client: Ipv4Addr, server: Ipv4Addr) -> Forger {
        let tx = raw_socket(libc::IPPROTO_RAW, "raw IP socket (needs CAP_NET_RAW)");
        let rx = raw_socket(libc::IPPROTO_UDP, "raw UDP socket (needs CAP_NET_RAW)");
        // A raw socket bound to an address and connected to another gets only the datagrams
        // between them (raw_v4_match): the server's answers to the client, nothing of other tests.
        let len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: sockaddr_in values that live across the calls, with their true length.
        unsafe {
            let a = sin(client);
            check(
                libc::bind(rx.as_raw_fd(), (&a as *const libc::sockaddr_in).cast(), len),
                "bind the capture to the client's address",
            );
            let b = sin(server);
            check(
                libc::connect(rx.as_raw_fd(), (&b as *const libc::sockaddr_in).cast(), len),
                "connect the capture to the server's address",
            );
        }
        let udp = UdpRepr {
            src_port: ROCE_PORT,
            dst_port: ROCE_PORT,
            checksum: 0,
        };
        Forger {
            tx,
            rx,
            server,
            net: NetRepr::V2v4(Ipv4Repr::roce(client, server), udp),
        }
    }

    /// Sends `req` as one IPv4 datagram (IPPROTO_RAW implies IP_HDRINCL: the header is ours).
    pub(super) fn send(&self, req: &Request) {
        let frame = RoceFrameRepr {
            eth: EthernetRepr {
                dst: MacAddr::ZERO,
                src: MacAddr::ZERO,
                vlan: None,
                ethertype: 0,
            },
            net: self.net,
            ib: req.ib,
        };
        let mut buf = vec![0u8; frame.frame_len(req.payload.len())];
        let n = frame.emit(&mut buf, &req.payload);
        let ip = &buf[frame.eth.header_len()..n];
        let to = sin(self.server);
        // SAFETY: `ip` is initialised and `to` is a sockaddr_in of the given length.
        let sent = unsafe {
            libc::sendto(
                self.tx.as_raw_fd(),
                ip.as_ptr().cast(),
                ip.len(),
                0,
                (&to as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        assert_eq!(
            sent,
            ip.len() as isize,
            "send: {}",
            IoError::last_os_error()
        );
    }

    /// Drops every copied datagram still queued (answers to the client from before).
    pub(super) fn drain(&self) {
        while self.next(Duration::ZERO).is_some() {}
    }

    /// The next RoCE packet the server sent the client within `within`: its IB headers and
    /// payload, its ICRC checked. `None` when nothing came.
    pub(super) fn answer(&self, within: Duration) -> Option<(IbRepr, Vec<u8>)> {
        let ip = self.next(within)?;
        // The frame as a capture would show it: lo's all-zero Ethernet header, then the datagram.
        let mut frame = vec![0u8; 14];
        frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        frame.extend_from_slice(&ip);
        let (repr, payload) = RoceFrameRepr::parse(&frame).unwrap_or_else(|e| {
            panic!("the server sent a frame that does not parse ({e}): {ip:02x?}")
        });
        Some((repr.ib, payload.to_vec()))
    }

    /// The next IPv4 datagram (header included) copied to the capture within `within`.
    fn next(&self, within: Duration) -> Option<Vec<u8>> {
        let deadline = Instant::now() + within;
        let mut buf = vec![0u8; 70_000];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut pfd = libc::pollfd {
                fd: self.rx.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd that lives across the call.
            let ready = unsafe { libc::poll(&mut pfd, 1, left.as_millis() as libc::c_int) };
            if ready <= 0 {
                return None;
            }
            // SAFETY: `buf` is writable for its length.
            let n = unsafe {
                libc::recv(
                    self.rx.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                continue;
            }
            let d = &buf[..n as usize];
            // IPv4 without options, then UDP between the two RoCE ports.
            let roce = d.len() > 28
                && d[0] == 0x45
                && d[20..22] == ROCE_PORT.to_be_bytes()
                && d[22..24] == ROCE_PORT.to_be_bytes();
            if roce {
                return Some(d.to_vec());
            }
        }
    }
}
