//! The UDP link: one non-blocking socket, connected to the peer once known.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

use crate::dgram::Datagram;
use crate::error::{Error, Result};

/// A UDP socket as a [`Datagram`] link.
pub struct UdpLink {
    sock: UdpSocket,
    rx: Vec<u8>,
    len: usize,
    last_from: Option<SocketAddr>,
    peer: Option<SocketAddr>,
}

impl UdpLink {
    /// A server's socket on `bind`:`port`; it answers whoever says hello.
    pub fn server(bind: IpAddr, port: u16) -> Result<UdpLink> {
        let sock = UdpSocket::bind((bind, port)).map_err(|e| {
            Error::setup(
                format!(
                    "binding UDP {} (--bind, -p/--port)",
                    SocketAddr::new(bind, port)
                ),
                e,
            )
        })?;
        UdpLink::new(sock, None)
    }

    /// A client's socket, connected to the server at `peer`.
    pub fn client(peer: SocketAddr) -> Result<UdpLink> {
        let any = match peer {
            SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let sock = UdpSocket::bind((any, 0))
            .map_err(|e| Error::setup("binding a UDP client socket", e))?;
        sock.connect(peer)
            .map_err(|e| Error::setup(format!("connecting UDP to the server {peer} (PEER)"), e))?;
        UdpLink::new(sock, Some(peer))
    }

    fn new(sock: UdpSocket, peer: Option<SocketAddr>) -> Result<UdpLink> {
        sock.set_nonblocking(true)
            .map_err(|e| Error::setup("making the UDP socket non-blocking", e))?;
        Ok(UdpLink {
            sock,
            rx: vec![0u8; 65_536],
            len: 0,
            last_from: None,
            peer,
        })
    }
}

impl Datagram for UdpLink {
    #[inline]
    fn send(&mut self, msg: &[u8]) -> io::Result<()> {
        self.sock.send(msg).map(|_| ())
    }

    #[inline]
    fn try_recv(&mut self) -> io::Result<Option<usize>> {
        let got = if self.peer.is_some() {
            self.sock.recv(&mut self.rx)
        } else {
            self.sock.recv_from(&mut self.rx).map(|(n, from)| {
                self.last_from = Some(from);
                n
            })
        };
        match got {
            Ok(0) => Ok(None),
            Ok(n) => {
                self.len = n;
                Ok(Some(n))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    #[inline]
    fn payload(&self) -> &[u8] {
        &self.rx[..self.len]
    }

    fn answer_last_sender(&mut self) -> io::Result<()> {
        if let (None, Some(from)) = (self.peer, self.last_from) {
            self.sock.connect(from)?;
            self.peer = Some(from);
        }
        Ok(())
    }

    fn peer(&self) -> String {
        self.peer
            .map_or_else(|| "(no client yet)".into(), |p| p.to_string())
    }

    fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    fn header(&self) -> &[u8] {
        &[]
    }
}
