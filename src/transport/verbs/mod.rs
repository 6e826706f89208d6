//! The verbs transport: real RDMA NICs (ConnectX, E810, kernel Soft-RoCE) through libibverbs.
//!
//! Setup (devices, protection domain, memory regions, CQ, QPs, state changes) goes through the
//! `sideway` crate; the hot path (post send, post receive, poll) calls libibverbs' provider entry
//! points directly with work requests built on the stack, because sideway's post guards allocate per
//! call. libibverbs is loaded at run time (rdma-mummy-sys), so the same binary starts where rdma-core
//! is absent and [`VerbsEndpoint::open`] then says which piece is missing ([`VerbsError`]).
//!
//! Without the `verbs` cargo feature every entry point returns [`VerbsError::NotBuilt`].

pub mod counters;
pub(crate) mod error;
/// The interface statistics reader, shared with the soft transport (its driver's identity).
pub use super::ethtool;
pub mod gid;
pub(crate) mod loader;
pub(crate) mod qp_attrs;
pub(crate) mod sysfs;
pub(crate) mod wc;

#[cfg(feature = "verbs")]
mod buffer;
#[cfg(feature = "verbs")]
mod datagram;
#[cfg(feature = "verbs")]
mod device;
#[cfg(feature = "verbs")]
mod endpoint;
#[cfg(feature = "verbs")]
mod limits;
#[cfg(feature = "verbs")]
mod post;

pub use error::VerbsError;
pub(crate) use gid::{GidChoice, GidEntry, GidPolicy};

use crate::params::{ConnType, DEFAULT_QKEY, RoceVersion};
use crate::transport::Access;

/// Everything needed to open a verbs endpoint; the flag each field comes from is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbsConfig {
    /// `-d`: RDMA device name; the first device when `None`.
    pub device: Option<String>,
    /// `-i`: port number, from 1.
    pub ib_port: u8,
    /// `-x`: GID index, used as given.
    pub gid_index: Option<u32>,
    /// `--roce v1|v2`: only GIDs of that type.
    pub roce: Option<RoceVersion>,
    /// `--ipv6`: prefer IPv6 GIDs.
    pub ipv6: bool,
    /// `-q`: number of queue pairs.
    pub qps: usize,
    /// Bytes of registered buffer per QP (rounded up to whole pages).
    pub buf_size: usize,
    /// `-t`: send-queue depth per QP.
    pub tx_depth: u32,
    /// `-r`: receive-queue depth per QP.
    pub rx_depth: u32,
    /// `-I`: largest inline message; 0 disables inline.
    pub inline_size: u32,
    /// `-m`: path MTU in bytes (256..4096); the port's active MTU when `None`.
    pub mtu: Option<u32>,
    /// Access rights the peer gets on each QP's buffer (local write is always added).
    pub access: Access,
    /// `-o`: outstanding RDMA READs per QP as responder; the device maximum when `None`.
    pub out_reads: Option<u32>,
    /// `-u`: local ACK timeout exponent (4.096 µs × 2^n).
    pub timeout: u8,
    /// `--retry_count`: transport retries before IBV_WC_RETRY_EXC_ERR (perftest: 7). Soft-RoCE (rxe)
    /// treats 7 as "retry forever", so against a vanished rxe peer only a smaller value ends in an error.
    pub retry_cnt: u8,
    /// `-S`: service level.
    pub sl: u8,
    /// `--tclass`: traffic class in the GRH.
    pub traffic_class: u8,
    /// `--flow_label`: GRH flow labels, queue pair `i` takes entry `i % len`.
    pub flow_labels: Vec<u32>,
    /// `-c`: RC, UC or UD queue pairs.
    pub connection: ConnType,
    /// UD: the Q_Key our queue pairs accept (perftest's 0x11111111, which perftest never exchanges).
    pub qkey: u32,
    /// The last this many queue pairs are RC whatever `connection` says: perftest's `-R` message
    /// queue pair is RC even when the test's are UD (its `create_comm_struct`).
    pub rc_tail: usize,
}

impl Default for VerbsConfig {
    /// perftest's defaults: port 1, one QP, tx depth 128, rx depth 512, timeout 14.
    fn default() -> Self {
        VerbsConfig {
            device: None,
            ib_port: 1,
            gid_index: None,
            roce: None,
            ipv6: false,
            qps: 1,
            buf_size: 65536,
            tx_depth: 128,
            rx_depth: 512,
            inline_size: 0,
            mtu: None,
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            out_reads: None,
            timeout: 14,
            retry_cnt: 7,
            sl: 0,
            traffic_class: 0,
            flow_labels: Vec::new(),
            connection: ConnType::Rc,
            qkey: DEFAULT_QKEY,
            rc_tail: 0,
        }
    }
}

impl VerbsConfig {
    /// Queue pair `i`'s connection type: `-c`'s, but RC for the last `rc_tail` ones.
    pub fn conn_of(&self, i: usize) -> ConnType {
        self.connection.of_qp(i, self.qps, self.rc_tail)
    }

    /// The GID part of the configuration.
    pub(crate) fn gid_policy(&self) -> GidPolicy {
        GidPolicy {
            index: self.gid_index,
            roce: self.roce,
            ipv6: self.ipv6,
        }
    }

    /// Checks ranges that do not need the device.
    pub fn validate(&self) -> Result<(), VerbsError> {
        if self.qps == 0 {
            return Err(VerbsError::Config("-q must be at least 1".into()));
        }
        if self.tx_depth == 0 || self.rx_depth == 0 {
            return Err(VerbsError::Config("-t and -r must be at least 1".into()));
        }
        if self.ib_port == 0 {
            return Err(VerbsError::Config("-i: ports are numbered from 1".into()));
        }
        if self.buf_size == 0 || self.buf_size > u32::MAX as usize {
            return Err(VerbsError::Config(format!(
                "buffer of {} bytes per QP: must be between 1 byte and 4 GiB",
                self.buf_size
            )));
        }
        if self.retry_cnt > 7 || self.timeout > 31 {
            return Err(VerbsError::Config(format!(
                "--retry_count {} / -u {}: the retry count is 0..=7 and the timeout exponent 0..=31",
                self.retry_cnt, self.timeout
            )));
        }
        if let Some(m) = self.mtu
            && ![256, 512, 1024, 2048, 4096].contains(&m)
        {
            return Err(VerbsError::Config(format!(
                "-m {m}: the RoCE path MTU is one of 256, 512, 1024, 2048, 4096"
            )));
        }
        Ok(())
    }
}

/// One port of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Port number (from 1).
    pub port: u8,
    /// `ACTIVE`, `DOWN`, ...
    pub state: String,
    /// True when the port can carry traffic.
    pub active: bool,
    /// True for RoCE (Ethernet link layer).
    pub ethernet: bool,
    /// `Ethernet` or `InfiniBand`.
    pub link_layer: String,
    /// Active MTU in bytes.
    pub active_mtu: u32,
    /// Largest MTU in bytes.
    pub max_mtu: u32,
    /// The GID table.
    pub gids: Vec<GidEntry>,
}

/// One RDMA device as `discover` sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// `mlx5_0`, `rxe0`, ...
    pub name: String,
    /// PCI vendor id (0 for rxe).
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Firmware version text.
    pub firmware: String,
    /// Largest work-queue depth.
    pub max_qp_wr: u32,
    /// Largest outstanding RDMA READs per QP as responder.
    pub max_qp_rd_atom: u32,
    /// The device executes atomics (`atomic_cap` is not `IBV_ATOMIC_NONE`).
    pub atomics: bool,
    /// Its ports.
    pub ports: Vec<PortInfo>,
}

/// What an opened endpoint uses, for the header block: device, port, GID and why, MTU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbsSetup {
    /// Device name.
    pub device: String,
    /// Port number.
    pub port: u8,
    /// The source GID and why it was chosen.
    pub gid: GidChoice,
    /// The port's active MTU in bytes.
    pub active_mtu: u32,
    /// The MTU offered to the peer (the smaller of `-m` and the active MTU).
    pub mtu: u32,
    /// Path MTU agreed with the peer, once connected.
    pub path_mtu: Option<u32>,
    /// Outstanding READs accepted as responder.
    pub out_reads: u32,
    /// Inline size requested with `-I`.
    pub inline_size: u32,
    /// Adjustments made, in words (e.g. "-m 4096 above the active MTU 1024: using 1024").
    pub notes: Vec<String>,
}

impl VerbsSetup {
    /// The RoCE version in use (the type of the chosen GID).
    pub fn roce(&self) -> RoceVersion {
        self.gid.entry.kind.version()
    }

    /// One line for the header: `GID index 1 ::ffff:10.0.0.1 RoCE v2 on veth0 (auto-selected: ...)`.
    pub fn gid_line(&self) -> String {
        let e = &self.gid.entry;
        format!(
            "GID index {} {} {}{} ({})",
            e.index,
            e.address(),
            e.kind,
            e.netdev
                .as_ref()
                .map(|n| format!(" on {n}"))
                .unwrap_or_default(),
            self.gid.why
        )
    }
}

/// Lists every RDMA device with its ports and GID tables, or says why there is none.
pub fn discover() -> Result<Vec<DeviceInfo>, VerbsError> {
    #[cfg(feature = "verbs")]
    {
        device::discover(&sysfs::Sysfs::default())
    }
    #[cfg(not(feature = "verbs"))]
    {
        Err(VerbsError::NotBuilt)
    }
}

#[cfg(feature = "verbs")]
pub use endpoint::VerbsEndpoint;

/// Stand-in when built without the `verbs` feature: it cannot be constructed.
#[cfg(not(feature = "verbs"))]
#[derive(Debug)]
pub enum VerbsEndpoint {}

#[cfg(not(feature = "verbs"))]
impl VerbsEndpoint {
    /// Always [`VerbsError::NotBuilt`].
    pub fn open(_cfg: &VerbsConfig) -> Result<VerbsEndpoint, VerbsError> {
        Err(VerbsError::NotBuilt)
    }

    /// Never called: the type has no values.
    pub fn setup(&self) -> &VerbsSetup {
        match *self {}
    }

    /// Never called: the type has no values.
    pub fn failure_detail(&self) -> Option<&str> {
        match *self {}
    }
}

#[cfg(not(feature = "verbs"))]
impl crate::transport::cm::CmEndpoint for VerbsEndpoint {
    fn cm_listen(&mut self, _port: u16) -> crate::transport::Result<()> {
        match *self {}
    }
    fn cm_connect(
        &mut self,
        _qp: usize,
        _to: std::net::SocketAddr,
        _params: &crate::transport::cm::CmQpParams,
        _private_data: &[u8],
    ) -> crate::transport::Result<()> {
        match *self {}
    }
    fn cm_accept(
        &mut self,
        _req: u32,
        _qp: usize,
        _params: &crate::transport::cm::CmQpParams,
    ) -> crate::transport::Result<()> {
        match *self {}
    }
    fn cm_reject(&mut self, _req: u32) -> crate::transport::Result<()> {
        match *self {}
    }
    fn cm_disconnect(&mut self, _qp: usize) -> crate::transport::Result<()> {
        match *self {}
    }
    fn cm_poll(&mut self) -> crate::transport::Result<Option<crate::transport::cm::CmEvent>> {
        match *self {}
    }
}

#[cfg(not(feature = "verbs"))]
impl crate::transport::Endpoint for VerbsEndpoint {
    fn local_info(&self) -> crate::transport::ConnInfo {
        match *self {}
    }
    fn connect(&mut self, _peer: &crate::transport::ConnInfo) -> crate::transport::Result<()> {
        match *self {}
    }
    fn qp_count(&self) -> usize {
        match *self {}
    }
    fn buffer(&self, _qp: usize) -> &[u8] {
        match *self {}
    }
    fn buffer_mut(&mut self, _qp: usize) -> &mut [u8] {
        match *self {}
    }
    fn post_send(
        &mut self,
        _qp: usize,
        _wr: &crate::transport::SendRequest,
    ) -> crate::transport::Result<()> {
        match *self {}
    }
    fn post_recv(
        &mut self,
        _qp: usize,
        _wr: &crate::transport::RecvRequest,
    ) -> crate::transport::Result<()> {
        match *self {}
    }
    fn poll_cq(
        &mut self,
        _out: &mut [crate::transport::Completion],
    ) -> crate::transport::Result<usize> {
        match *self {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perftests_message_queue_pair_is_rc_behind_ud_test_queue_pairs() {
        let cfg = VerbsConfig {
            qps: 3,
            connection: ConnType::Ud,
            rc_tail: 1,
            ..VerbsConfig::default()
        };
        let kinds: Vec<ConnType> = (0..3).map(|i| cfg.conn_of(i)).collect();
        assert_eq!(kinds, [ConnType::Ud, ConnType::Ud, ConnType::Rc]);
        let plain = VerbsConfig { rc_tail: 0, ..cfg };
        assert!((0..3).all(|i| plain.conn_of(i) == ConnType::Ud));
    }

    #[test]
    fn config_validation_names_the_flag() {
        let ok = VerbsConfig::default();
        assert!(ok.validate().is_ok());
        let bad = VerbsConfig {
            mtu: Some(1500),
            ..VerbsConfig::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .starts_with("-m 1500")
        );
        let bad = VerbsConfig {
            qps: 0,
            ..VerbsConfig::default()
        };
        assert!(bad.validate().unwrap_err().to_string().starts_with("-q"));
    }

    #[cfg(not(feature = "verbs"))]
    #[test]
    fn without_the_feature_open_says_so() {
        let e = VerbsEndpoint::open(&VerbsConfig::default()).unwrap_err();
        assert!(matches!(e, VerbsError::NotBuilt));
        assert!(e.to_string().contains("--transport soft"));
        assert!(matches!(discover(), Err(VerbsError::NotBuilt)));
    }
}
