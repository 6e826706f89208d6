//! The soft endpoint's network device: whichever backend it opened, as one [`Nic`] that forwards
//! every [`Device`] and [`Backend`] call to it.
//!
//! The backends are listed once, in `backends!`: each line names a variant and the device type
//! that implements [`Backend`] (its own file in [`super::io`]). The list declares [`Nic`], the
//! [`BackendPlan`] that opens each variant from its own plan, and the forwarding impls, so the
//! datapath dispatches statically (one `match` per call, no `dyn`) and a new backend is one line here.

use std::net::SocketAddr;

use super::io::IoError;
use super::io::device::{Backend, Device, RxMeta};
use super::io::packet::PacketDevice;
use super::io::udp::UdpDevice;
use super::netdev::NetDev;
use super::rc::Instant;
use crate::transport::Error;

/// Declares [`Nic`] and [`BackendPlan`] with one variant per backend, and the impls that forward
/// each call to the variant's device.
macro_rules! backends {
    ($($(#[$doc:meta])* $variant:ident($device:ty),)+) => {
        /// The backend an endpoint opened.
        pub(crate) enum Nic {
            $($(#[$doc])* $variant($device),)+
        }

        /// How to open the backend: the plan of one of them.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub(crate) enum BackendPlan {
            $($(#[$doc])* $variant(<$device as Backend>::Plan),)+
        }

        impl Device for Nic {
            type Addr = Option<SocketAddr>;
            type Meta = RxMeta;

            fn max_packet(&self) -> usize {
                match self { $(Nic::$variant(d) => d.max_packet(),)+ }
            }

            #[inline]
            fn tx_full(&self) -> bool {
                match self { $(Nic::$variant(d) => d.tx_full(),)+ }
            }

            #[inline]
            fn tx_pending(&self) -> usize {
                match self { $(Nic::$variant(d) => d.tx_pending(),)+ }
            }

            #[inline]
            fn tx_push(
                &mut self,
                now: Instant,
                to: Option<SocketAddr>,
                fill: impl FnOnce(&mut [u8]) -> Option<usize>,
            ) -> bool {
                match self { $(Nic::$variant(d) => d.tx_push(now, to, fill),)+ }
            }

            #[inline]
            fn flush(&mut self, now: Instant) -> Result<(), IoError> {
                match self { $(Nic::$variant(d) => d.flush(now),)+ }
            }

            #[inline]
            fn receive(
                &mut self,
                now: Instant,
                each: impl FnMut(RxMeta, &[u8]),
            ) -> Result<usize, IoError> {
                match self { $(Nic::$variant(d) => d.receive(now, each),)+ }
            }

            fn poll_at(&self) -> Option<Instant> {
                match self { $(Nic::$variant(d) => d.poll_at(),)+ }
            }
        }

        impl Backend for Nic {
            type Plan = BackendPlan;

            fn open(dev: &NetDev, plan: &BackendPlan) -> Result<Nic, IoError> {
                match plan { $(BackendPlan::$variant(p) => <$device>::open(dev, p).map(Nic::$variant),)+ }
            }

            fn local_addr(&self) -> Option<SocketAddr> {
                match self { $(Nic::$variant(d) => d.local_addr(),)+ }
            }

            fn takes_super_frames(&self) -> bool {
                match self { $(Nic::$variant(d) => d.takes_super_frames(),)+ }
            }

            fn gso_sending(&self) -> bool {
                match self { $(Nic::$variant(d) => d.gso_sending(),)+ }
            }

            fn stop_gso(&mut self) -> bool {
                match self { $(Nic::$variant(d) => d.stop_gso(),)+ }
            }

            fn tx_batches(&self) -> u64 {
                match self { $(Nic::$variant(d) => d.tx_batches(),)+ }
            }

            fn describe(&self) -> String {
                match self { $(Nic::$variant(d) => d.describe(),)+ }
            }
        }
    };
}

backends! {
    /// RoCE v2 over a UDP socket (`--io udp`).
    Udp(UdpDevice),
    /// RoCE v1 and v2 over AF_PACKET (`--io packet`).
    Packet(PacketDevice),
}

/// A backend failure on the datapath as the transport error.
pub(crate) fn io_error(e: IoError) -> Error {
    match e {
        IoError::Os { context, source } => Error::Io { context, source },
        other => Error::Unavailable(other.to_string()),
    }
}

#[cfg(test)]
mod tests;
