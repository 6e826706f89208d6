//! The soft endpoint's network device: whichever backend it opened, as one `Nic` that forwards
//! every `Device` and `Backend` call to it.
//!
//! `backends!` is invoked once, in `io` (whose names it uses), over the list of backends: each line
//! names an `IoKind` variant (`--io`'s word), the module of the backend's file and the device type
//! in it, which implements `Backend` with a `Plan` of its own. From that one line it declares the
//! module, a variant of `Nic` and of the `BackendPlan` that opens it, and the dispatch from
//! `--io`'s word to the backend's own check and plan; so the datapath dispatches statically (one
//! `match` per call, no `dyn`) and neither the planner nor the endpoint names a backend. The one
//! exception is the poll's common case, the unimpaired UDP socket, which it takes by
//! `Nic::udp_mut` to receive and to send a lone packet: through the dispatch, the
//! per-packet closures stayed out of line and cost 46 to 120 instructions a round trip.

/// Declares the backend modules, `Nic` and `BackendPlan` with one variant per backend, the
/// dispatch from `IoKind` to each backend's `Plan`, and the impls that forward each call to the
/// variant's device.
macro_rules! backends {
    ($($(#[$doc:meta])* $variant:ident($module:ident::$device:ident),)+) => {
        $(pub mod $module;)+

        /// The backend an endpoint opened.
        pub(crate) enum Nic {
            $($(#[$doc])* $variant($module::$device),)+
        }

        /// How to open the backend: the plan of one of them.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub(crate) enum BackendPlan {
            $($(#[$doc])* $variant(<$module::$device as device::Backend>::Plan),)+
        }

        /// What `BackendPlan` and `Nic` do, each call forwarded to the backend's own.
        mod forward {
            use std::net::SocketAddr;

            use super::device::{Backend, Device, Plan, PlanInput, RxMeta};
            use super::{BackendPlan, IoError, Nic};
            use $crate::params::{IoKind, RoceVersion};
            use $crate::transport::soft::netdev::NetDev;
            use $crate::transport::soft::rc::Instant;

            impl BackendPlan {
                /// Refuses what backend `io` cannot carry (`version`), before the interface is
                /// looked up.
                pub(crate) fn check(io: IoKind, version: RoceVersion) -> Result<(), IoError> {
                    match io {
                        $(IoKind::$variant => {
                            <<super::$module::$device as Backend>::Plan as Plan>::check(version)
                        })+
                    }
                }

                /// Backend `io`'s own plan, from what the planner decided.
                pub(crate) fn new(io: IoKind, input: &PlanInput<'_>) -> Result<BackendPlan, IoError> {
                    match io {
                        $(IoKind::$variant => {
                            <<super::$module::$device as Backend>::Plan as Plan>::new(input)
                                .map(BackendPlan::$variant)
                        })+
                    }
                }

                /// Whether packets will leave in super-datagrams or super-frames.
                pub(crate) fn gso(&self) -> bool {
                    match self { $(BackendPlan::$variant(p) => p.gso(),)+ }
                }
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

                #[inline(always)]
                fn tx_idle(&self) -> bool {
                    match self { $(Nic::$variant(d) => d.tx_idle(),)+ }
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

                #[inline(always)]
                fn flush(&mut self, now: Instant) -> Result<(), IoError> {
                    match self { $(Nic::$variant(d) => d.flush(now),)+ }
                }

                // Always: the UDP backend's receive syscall lands in the caller's poll, so that
                // a receive that finds nothing costs it no call.
                #[inline(always)]
                fn receive(
                    &mut self,
                    now: Instant,
                    each: impl FnMut(RxMeta, &[u8]),
                ) -> Result<usize, IoError> {
                    match self { $(Nic::$variant(d) => d.receive(now, each),)+ }
                }

                #[inline(always)]
                fn receive_lazy<F: FnMut(RxMeta, &[u8])>(
                    &mut self,
                    now: Instant,
                    make: impl FnOnce() -> F,
                ) -> Result<usize, IoError> {
                    match self { $(Nic::$variant(d) => d.receive_lazy(now, make),)+ }
                }

                fn poll_at(&self) -> Option<Instant> {
                    match self { $(Nic::$variant(d) => d.poll_at(),)+ }
                }
            }

            impl Backend for Nic {
                type Plan = BackendPlan;

                fn open(dev: &NetDev, plan: &BackendPlan) -> Result<Nic, IoError> {
                    match plan {
                        $(BackendPlan::$variant(p) => {
                            <super::$module::$device>::open(dev, p).map(Nic::$variant)
                        })+
                    }
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

                fn accept_only(
                    &mut self,
                    qps: super::qp_filter::QpRange,
                ) -> Result<(), IoError> {
                    match self { $(Nic::$variant(d) => d.accept_only(qps),)+ }
                }

                fn wait_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                    match self { $(Nic::$variant(d) => d.wait_fd(),)+ }
                }
            }
        }
    };
}
pub(crate) use backends;

#[cfg(test)]
mod tests;
