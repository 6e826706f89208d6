//! The I/O backend an endpoint opened ([`Backend`]): a UDP socket or an AF_PACKET socket, opened
//! as the [`BackendPlan`] says, and how its failures read as transport errors.

use std::net::IpAddr;

use super::io::IoError;
use super::io::packet::PacketSocket;
use super::io::udp::UdpSocket;
use super::netdev::NetDev;
use super::plan::{BackendPlan, loopback_alternatives};
use crate::transport::Error;

/// The I/O backend in use.
pub(crate) enum Backend {
    /// RoCE v2 over a UDP socket.
    Udp(UdpSocket),
    /// RoCE v1 and v2 over AF_PACKET.
    Packet(PacketSocket),
}

impl Backend {
    /// Opens the backend on `dev`. Returns the address it moved to when the plan allowed a move
    /// (a second endpoint on `lo`) and the planned one was taken.
    pub fn open(dev: &NetDev, plan: &BackendPlan) -> Result<(Backend, Option<IpAddr>), IoError> {
        match plan {
            BackendPlan::Udp { cfg, ip, may_move } => match UdpSocket::bind(dev, *ip, cfg) {
                Ok(sock) => Ok((Backend::Udp(sock), None)),
                // Two roceperfs on one host's lo: the second takes the next free 127.0.0.x by
                // itself (the peer learns it from ConnInfo), unless an address was asked for.
                Err(IoError::PortInUse { .. }) if *may_move => loopback_alternatives()
                    .find_map(|alt| {
                        let sock = UdpSocket::bind(dev, alt, cfg).ok()?;
                        Some((Backend::Udp(sock), Some(alt)))
                    })
                    .ok_or(IoError::PortInUse {
                        addr: *ip,
                        port: cfg.port,
                    }),
                Err(e) => Err(e),
            },
            BackendPlan::Packet(cfg) => Ok((Backend::Packet(PacketSocket::open(dev, cfg)?), None)),
        }
    }
}

/// A backend failure on the datapath as the transport error.
pub(crate) fn io_error(e: IoError) -> Error {
    match e {
        IoError::Os { context, source } => Error::Io { context, source },
        other => Error::Unavailable(other.to_string()),
    }
}
