//! The AF_PACKET link: raw Ethernet frames of our own ethertype on one interface.
//!
//! Why a veth pair between namespaces rather than `lo`: `lo` hands every frame to every packet socket
//! bound to it, so on `lo` each side also receives its own frames (the type byte tells them apart)
//! and each frame costs an extra copy; across a veth pair each frame reaches the other end only. Our
//! own transmitted frames are never looped back to us (PACKET_IGNORE_OUTGOING).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::dgram::Datagram;
use crate::error::{Error, Result};
use crate::sys::set_int;

/// `PACKET_QDISC_BYPASS` (include/uapi/linux/if_packet.h).
const PACKET_QDISC_BYPASS: libc::c_int = 20;
/// `PACKET_IGNORE_OUTGOING`.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// Bytes of an Ethernet header: destination, source, ethertype.
pub const ETH_HEADER: usize = 14;

/// An AF_PACKET socket bound to one interface and ethertype, as a [`Datagram`] link.
pub struct PacketLink {
    fd: OwnedFd,
    dev: String,
    mac: [u8; 6],
    ethertype: u16,
    header: [u8; ETH_HEADER],
    peer: [u8; 6],
    rx: Vec<u8>,
    len: usize,
}

impl PacketLink {
    /// Opens the socket on `dev` for frames of `ethertype` carrying up to `max_payload` bytes,
    /// sending to `peer` until a hello teaches it better.
    pub fn open(
        dev: &str,
        ethertype: u16,
        max_payload: usize,
        peer: [u8; 6],
    ) -> Result<PacketLink> {
        let name = CString::new(dev)
            .map_err(|_| Error::Usage(format!("-d/--dev '{dev}' is not an interface name")))?;
        // SAFETY: name is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(Error::setup(
                format!("-d/--dev {dev}: no such interface in this network namespace"),
                io::Error::last_os_error(),
            ));
        }
        let proto = ethertype.to_be();
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
            let hint = match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => " (needs CAP_NET_RAW: run as root)",
                _ => "",
            };
            return Err(Error::setup(
                format!("opening an AF_PACKET socket for {dev}{hint}"),
                e,
            ));
        }
        // SAFETY: raw is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let s = fd.as_raw_fd();
        let ctx = |what: &str| format!("{what} on the AF_PACKET socket of {dev}");
        set_int(s, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            .map_err(|e| Error::setup(ctx("PACKET_IGNORE_OUTGOING"), e))?;
        let mtu =
            ifreq_call(s, dev, libc::SIOCGIFMTU).map_err(|e| Error::setup(ctx("SIOCGIFMTU"), e))?;
        // SAFETY: the kernel filled the mtu member of the union.
        let mtu = unsafe { mtu.ifr_ifru.ifru_mtu } as usize;
        if max_payload > mtu {
            return Err(Error::Usage(format!(
                "-s {max_payload} exceeds the MTU {mtu} of {dev}: the packet modes carry -s bytes after the 14-byte Ethernet header"
            )));
        }
        let hw = ifreq_call(s, dev, libc::SIOCGIFHWADDR)
            .map_err(|e| Error::setup(ctx("SIOCGIFHWADDR"), e))?;
        let mut mac = [0u8; 6];
        // SAFETY: the kernel filled the hwaddr member of the union.
        let data = unsafe { hw.ifr_ifru.ifru_hwaddr.sa_data };
        for (m, d) in mac.iter_mut().zip(data.iter()) {
            *m = *d as u8;
        }
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: sll is a valid sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                s,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(Error::setup(ctx("bind"), io::Error::last_os_error()));
        }
        let mut link = PacketLink {
            fd,
            dev: dev.to_string(),
            mac,
            ethertype,
            header: [0; ETH_HEADER],
            peer,
            rx: vec![0u8; ETH_HEADER + mtu.max(max_payload) + 64],
            len: 0,
        };
        link.set_peer(peer);
        Ok(link)
    }

    /// Frames go to `peer` from now on.
    fn set_peer(&mut self, peer: [u8; 6]) {
        self.peer = peer;
        self.header[..6].copy_from_slice(&peer);
        self.header[6..12].copy_from_slice(&self.mac);
        self.header[12..].copy_from_slice(&self.ethertype.to_be_bytes());
    }

    /// Hands frames straight to the driver, past the qdisc.
    pub fn bypass_qdisc(&self) -> Result<()> {
        set_int(self.fd(), libc::SOL_PACKET, PACKET_QDISC_BYPASS, 1).map_err(|e| {
            Error::setup(
                format!("PACKET_QDISC_BYPASS on {} (--qdisc-bypass)", self.dev),
                e,
            )
        })
    }
}

/// An ifreq ioctl on `dev`.
fn ifreq_call(fd: RawFd, dev: &str, req: libc::c_ulong) -> io::Result<libc::ifreq> {
    let bytes = dev.as_bytes();
    if bytes.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: ifreq is plain old data; all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: these requests read ifr_name and write one member of ifr_ifru of a valid ifreq.
    let rc = unsafe { libc::ioctl(fd, req as _, &mut ifr) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ifr)
    }
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn mac_string(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

impl Datagram for PacketLink {
    #[inline]
    fn send(&mut self, msg: &[u8]) -> io::Result<()> {
        let iov = [
            libc::iovec {
                iov_base: self.header.as_ptr() as *mut libc::c_void,
                iov_len: ETH_HEADER,
            },
            libc::iovec {
                iov_base: msg.as_ptr() as *mut libc::c_void,
                iov_len: msg.len(),
            },
        ];
        // SAFETY: both iovecs point at live buffers of the given lengths, which the kernel only reads.
        let rc = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    #[inline]
    fn try_recv(&mut self) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: rx is a live buffer of the length passed.
            let rc = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.rx.as_mut_ptr() as *mut libc::c_void,
                    self.rx.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                return if e.kind() == io::ErrorKind::WouldBlock {
                    Ok(None)
                } else {
                    Err(e)
                };
            }
            let n = rc as usize;
            // A runt carries no type byte: not ours.
            if n > ETH_HEADER {
                self.len = n;
                return Ok(Some(n - ETH_HEADER));
            }
        }
    }

    #[inline]
    fn payload(&self) -> &[u8] {
        &self.rx[ETH_HEADER..self.len.max(ETH_HEADER)]
    }

    fn answer_last_sender(&mut self) -> io::Result<()> {
        if self.len >= ETH_HEADER {
            let mut src = [0u8; 6];
            src.copy_from_slice(&self.rx[6..12]);
            self.set_peer(src);
        }
        Ok(())
    }

    fn peer(&self) -> String {
        format!("{} on {}", mac_string(&self.peer), self.dev)
    }

    fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn header(&self) -> &[u8] {
        &self.header
    }
}
