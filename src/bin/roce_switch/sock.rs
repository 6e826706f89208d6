//! One switch port: an AF_PACKET socket bound to an interface for every EtherType, frames received in
//! batches (`recvmmsg`, each with the VLAN tag the kernel moved into its metadata) into a fixed set
//! of buffers, and sent in batches (`sendmmsg`) straight to the driver (past the qdisc).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use roceperf::transport::sockopt::set_int;
use roceperf::transport::soft::netdev::{NetDev, NetdevError};

use crate::error::{Error, Result};
use crate::frame::{ETH_HEADER, VLAN_TAG};

/// Frames taken per `recvmmsg`.
pub const BATCH: usize = 64;
/// `PACKET_AUXDATA`: each frame's VLAN tag as a control message.
const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// `SO_TIMESTAMPNS` (asm-generic/socket.h, `SO_TIMESTAMPNS_OLD`: a `struct timespec` of 64-bit
/// fields on 64-bit Linux), which the libc crate names on Android only; also its cmsg type.
const SO_TIMESTAMPNS: libc::c_int = 35;
/// The receive buffer asked for: a burst at 10 Gb/s for a few ms waits here while the switch sleeps.
const RCVBUF: libc::c_int = 32 << 20;
/// Room for a `tpacket_auxdata` and an `SO_TIMESTAMPNS` control message.
const CONTROL: usize = 128;

/// `struct tpacket_auxdata` (linux/if_packet.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct AuxData {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
}

/// `struct tpacket_stats`.
#[repr(C)]
#[derive(Default)]
struct TpacketStats {
    tp_packets: u32,
    tp_drops: u32,
}

/// A received frame: where its bytes are and the tag the kernel took off, if any.
#[derive(Debug, Clone, Copy)]
pub struct Rx {
    /// Its buffer's index.
    pub slot: usize,
    /// Its length.
    pub len: usize,
    /// The 802.1Q TCI from its metadata.
    pub tci: Option<u16>,
    /// It did not fit the buffer (larger than the port's MTU allows).
    pub truncated: bool,
    /// When the kernel took it in, `CLOCK_REALTIME` ns (`SO_TIMESTAMPNS`; 0: not stamped).
    pub stamp_ns: u64,
}

/// One port.
pub struct Sock {
    fd: OwnedFd,
    /// The interface.
    pub name: String,
    /// Its MAC.
    pub mac: [u8; 6],
    /// Its MTU.
    pub mtu: usize,
    /// The link speed its sysfs `speed` reports, Mb/s (`None`: unreadable; it may read -1).
    pub speed: Option<i64>,
    /// The receive buffers, `slot_len` bytes each.
    bufs: Vec<u8>,
    slot_len: usize,
    controls: Vec<[u8; CONTROL]>,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

/// The largest frame a port of `mtu` passes: header, a tag, the MTU.
pub fn max_frame(mtu: usize) -> usize {
    ETH_HEADER + VLAN_TAG + mtu
}

impl Sock {
    /// Opens the port on `name`; with `stamps`, each frame carries its arrival time
    /// ([`Rx::stamp_ns`]).
    pub fn open(name: &str, stamps: bool) -> Result<Sock> {
        let dev = NetDev::by_name(name).map_err(|e| match e {
            NetdevError::NotFound { available, .. } => Error::Usage(format!(
                "no interface {name} in this network namespace (here: {}); run the switch in the \
                 namespace that holds its ports: ip netns exec NS roce_switch ...",
                available.join(", ")
            )),
            other => Error::Usage(format!("interface {name}: {other}")),
        })?;
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket creation; ownership goes to OwnedFd at once.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::c_int::from(proto),
            )
        };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => Error::Usage(format!(
                    "opening an AF_PACKET socket on {name} needs CAP_NET_RAW: run roce_switch as root"
                )),
                _ => Error::setup(format!("opening an AF_PACKET socket on {name}"), e),
            });
        }
        // SAFETY: raw is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let ctx = |what: &str| format!("{what} on the AF_PACKET socket of {name}");
        for (opt, what) in [
            (PACKET_IGNORE_OUTGOING, "PACKET_IGNORE_OUTGOING"),
            (PACKET_AUXDATA, "PACKET_AUXDATA"),
            (PACKET_QDISC_BYPASS, "PACKET_QDISC_BYPASS"),
        ] {
            set_int(&fd, libc::SOL_PACKET, opt, 1).map_err(|e| Error::setup(ctx(what), e))?;
        }
        if stamps {
            set_int(&fd, libc::SOL_SOCKET, SO_TIMESTAMPNS, 1)
                .map_err(|e| Error::setup(ctx("SO_TIMESTAMPNS"), e))?;
        }
        if set_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, RCVBUF).is_err() {
            set_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF)
                .map_err(|e| Error::setup(ctx("SO_RCVBUF"), e))?;
        }
        let mtu = dev.link_mtu as usize;
        let mac = dev.mac.map_or([0; 6], |m| m.0);
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = dev.index as i32;
        // SAFETY: sll is a valid sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(Error::setup(ctx("bind"), io::Error::last_os_error()));
        }
        // One byte more than the largest frame: a frame that fills it was cut (MSG_TRUNC says so too).
        let slot_len = max_frame(mtu) + 1;
        Ok(Sock {
            fd,
            name: name.to_owned(),
            mac,
            mtu,
            speed: dev.sysfs_speed(),
            bufs: vec![0; slot_len * BATCH],
            slot_len,
            controls: vec![[0; CONTROL]; BATCH],
            // SAFETY: all-zero iovecs and mmsghdrs are valid (null pointers, zero lengths).
            iovs: vec![unsafe { std::mem::zeroed() }; BATCH],
            // SAFETY: as above.
            msgs: vec![unsafe { std::mem::zeroed() }; BATCH],
        })
    }

    /// The descriptor, for `ppoll`.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Receive buffer `slot`'s frame.
    pub fn frame(&self, rx: &Rx) -> &[u8] {
        let at = rx.slot * self.slot_len;
        &self.bufs[at..at + rx.len.min(self.slot_len)]
    }

    /// Receive buffer `slot`'s frame, to rewrite.
    pub fn frame_mut(&mut self, rx: &Rx) -> &mut [u8] {
        let at = rx.slot * self.slot_len;
        &mut self.bufs[at..at + rx.len.min(self.slot_len)]
    }

    /// Receives up to [`BATCH`] frames into `out` (cleared first); none when nothing waits.
    pub fn recv(&mut self, out: &mut Vec<Rx>) -> io::Result<()> {
        out.clear();
        let base = self.bufs.as_mut_ptr();
        for i in 0..BATCH {
            // SAFETY: slot i lies inside bufs.
            self.iovs[i] = libc::iovec {
                iov_base: unsafe { base.add(i * self.slot_len) } as *mut libc::c_void,
                iov_len: self.slot_len,
            };
            let h = &mut self.msgs[i].msg_hdr;
            h.msg_name = std::ptr::null_mut();
            h.msg_namelen = 0;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = self.controls[i].as_mut_ptr() as *mut libc::c_void;
            h.msg_controllen = CONTROL as _;
            h.msg_flags = 0;
            self.msgs[i].msg_len = 0;
        }
        // SAFETY: every mmsghdr points at live buffers of the lengths given, owned by self.
        let n = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(()),
                _ => Err(e),
            };
        }
        for i in 0..n as usize {
            let m = &self.msgs[i];
            let len = m.msg_len as usize;
            let (tci, stamp_ns) = control(&m.msg_hdr);
            out.push(Rx {
                slot: i,
                len,
                tci,
                truncated: len >= self.slot_len || m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                stamp_ns,
            });
        }
        Ok(())
    }

    /// Sends `frames` (each a list of byte runs, sent as one frame) in as few `sendmmsg` calls as it
    /// takes; returns how many the kernel took (a full transmit queue refuses the rest).
    pub fn send(&self, iovs: &mut [[libc::iovec; 3]], counts: &[usize]) -> io::Result<usize> {
        let n = counts.len().min(iovs.len());
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: all-zero mmsghdrs are valid; filled below.
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        let mut sent = 0;
        while sent < n {
            let k = (n - sent).min(BATCH);
            for j in 0..k {
                let h = &mut msgs[j].msg_hdr;
                h.msg_iov = iovs[sent + j].as_mut_ptr();
                h.msg_iovlen = counts[sent + j] as _;
            }
            // SAFETY: every message's iovecs point at live frames the caller holds during the call.
            let rc = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), msgs.as_mut_ptr(), k as u32, 0) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(sent),
                    _ => Err(e),
                };
            }
            sent += rc as usize;
            if (rc as usize) < k {
                break;
            }
        }
        Ok(sent)
    }

    /// Frames the kernel dropped because this socket's receive buffer was full, since the last call.
    pub fn kernel_drops(&self) -> u64 {
        let mut st = TpacketStats::default();
        let mut len = std::mem::size_of::<TpacketStats>() as libc::socklen_t;
        // SAFETY: st and len are live and sized as the option needs.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                PACKET_STATISTICS,
                &mut st as *mut TpacketStats as *mut libc::c_void,
                &mut len,
            )
        };
        if rc == 0 { u64::from(st.tp_drops) } else { 0 }
    }
}

/// A received message's control data: the VLAN TCI in its `PACKET_AUXDATA`, if the kernel took a
/// tag off, and its `SO_TIMESTAMPNS` arrival stamp (`CLOCK_REALTIME` ns; 0 if none).
fn control(h: &libc::msghdr) -> (Option<u16>, u64) {
    let (mut tci, mut stamp) = (None, 0);
    // SAFETY: the kernel wrote h's control buffer; CMSG_* walk only within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                let aux = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const AuxData);
                let valid = aux.tp_status & TP_STATUS_VLAN_VALID != 0 || aux.tp_vlan_tci != 0;
                tci = valid.then_some(aux.tp_vlan_tci);
            } else if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_TIMESTAMPNS {
                let t = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                stamp = t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64;
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    (tci, stamp)
}
