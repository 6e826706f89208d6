//! [`VerbsEndpoint`]: `n` queue pairs (RC, UC or UD: `-c`; the last `rc_tail` RC) on one device,
//! one shared CQ, one registered buffer per QP.
//!
//! QP attributes follow perftest's `ctx_connect` (reference §3.3) so a perftest-built peer sees what
//! it expects: INIT with the remote access rights, RTR with the negotiated MTU, `min_rnr_timer` 12,
//! a GRH with hop limit 255 and the chosen source GID index, RTS with `retry_cnt` 7, `rnr_retry` 7 and
//! the `-u` timeout; each side's responder depth is its own `out_reads` and its initiator depth the
//! peer's. UC leaves out what belongs to acknowledgements; UD takes a Q_Key at INIT and reaches the
//! peer through an address handle named in every send ([`qp_attrs`] says which attribute goes where).

use super::buffer::PinnedBuf;
use super::datagram::{self, AddressHandle};
use super::device;
use super::error::VerbsError;
use super::gid;
use super::limits;
use super::post;
use super::qp_attrs::{self, LocalSide, QpPlan};
use super::sysfs::Sysfs;
use super::wc;
use super::{VerbsConfig, VerbsSetup};
use crate::params::{ConnType, TransportKind};
use crate::transport::rng;
use crate::transport::{
    Access, Completion, ConnInfo, Endpoint, Error, QpInfo, RecvRequest, Result, SendRequest,
};
use rdma_mummy_sys as sys;
use sideway::ibverbs::AccessFlags;
use sideway::ibverbs::address::{AddressHandleAttribute, Gid as VerbsGid};
use sideway::ibverbs::completion::{BasicCompletionQueue, CompletionQueue as _};
use sideway::ibverbs::device_context::{DeviceContext, Mtu};
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{
    BasicQueuePair, QueuePair as _, QueuePairAttribute, QueuePairState, QueuePairType,
};
use std::io;
use std::net::Ipv6Addr;
use std::ptr;
use std::sync::Arc;

mod rdma_cm;

/// Completions fetched per `ibv_poll_cq` call at most.
const POLL_BATCH: usize = 64;

/// UD: where every send of a queue pair goes.
struct UdDest {
    ah: AddressHandle,
    remote_qpn: u32,
    remote_qkey: u32,
}

/// One queue pair with its buffer. Field order is drop order: the address handle (UD), the QP, the
/// MR, then the memory.
struct Qp {
    dest: Option<UdDest>,
    qp: BasicQueuePair,
    raw: *mut sys::ibv_qp,
    mr: Arc<MemoryRegion>,
    buf: PinnedBuf,
    lkey: u32,
    psn: u32,
}

/// One side of a test on a real RDMA device. See the module documentation.
pub struct VerbsEndpoint {
    /// `-R`: librdmacm's ids and channel (first, so they go before the queue pairs they connect).
    cm: Option<Box<rdma_cm::RdmaCm>>,
    qps: Vec<Qp>,
    qpns: Vec<u32>,
    wcs: Vec<sys::ibv_wc>,
    cq: Arc<BasicCompletionQueue>,
    _pd: Arc<ProtectionDomain>,
    _ctx: Arc<DeviceContext>,
    cfg: VerbsConfig,
    setup: VerbsSetup,
    connected: bool,
    failure: Option<String>,
}

fn call_err(call: &'static str, device: &str, e: impl std::error::Error + 'static) -> VerbsError {
    VerbsError::call(call, device, &e)
}

fn access_flags(a: Access) -> AccessFlags {
    let mut f = AccessFlags::LocalWrite;
    if a.contains(Access::REMOTE_WRITE) {
        f |= AccessFlags::RemoteWrite;
    }
    if a.contains(Access::REMOTE_READ) {
        f |= AccessFlags::RemoteRead;
    }
    if a.contains(Access::REMOTE_ATOMIC) {
        f |= AccessFlags::RemoteAtomic;
    }
    f
}

/// A 24-bit starting PSN per QP, different per run and per QP (perftest uses lrand48 the same way).
fn initial_psn(qp: usize) -> u32 {
    (rng::mix(rng::run_seed() ^ qp as u64) as u32) & 0x00ff_ffff
}

impl VerbsEndpoint {
    /// Opens the device, picks port and GID, creates the CQ, the buffers and memory regions, and
    /// `cfg.qps` RC queue pairs in INIT. Every failure names its cause (see [`VerbsError`]).
    pub fn open(cfg: &VerbsConfig) -> std::result::Result<VerbsEndpoint, VerbsError> {
        cfg.validate()?;
        let sysfs = Sysfs::default();
        let dev = device::open(cfg.device.as_deref(), &sysfs)?;
        let name = dev.info.name.clone();
        let ports = dev.info.ports.len() as u8;
        let port = dev
            .info
            .ports
            .iter()
            .find(|p| p.port == cfg.ib_port)
            .ok_or(VerbsError::NoSuchPort {
                device: name.clone(),
                port: cfg.ib_port,
                ports,
            })?;
        let netdev = sysfs.netdevs_of(&name, port.port).first().cloned();
        if !port.active {
            return Err(VerbsError::PortDown {
                device: name,
                port: port.port,
                state: port.state.clone(),
                netdev: netdev.unwrap_or_else(|| "IFACE".into()),
            });
        }
        if !port.ethernet {
            return Err(VerbsError::NotEthernet {
                device: name,
                port: port.port,
                link_layer: port.link_layer.clone(),
            });
        }
        let choice =
            gid::select(&port.gids, &cfg.gid_policy()).map_err(|source| VerbsError::Gid {
                device: name.clone(),
                port: port.port,
                source,
            })?;

        let limits = limits::fit(cfg, &dev.info, port)?;

        let ctx = dev.ctx;
        let pd = ctx
            .alloc_pd()
            .map_err(|e| call_err("ibv_alloc_pd", &name, e))?;
        let cqe = (cfg.qps as u64 * (u64::from(cfg.tx_depth) + u64::from(cfg.rx_depth)))
            .min(i32::MAX as u64) as u32;
        let cq = ctx
            .create_cq_builder()
            .setup_cqe(cqe)
            .build()
            .map_err(|e| call_err("ibv_create_cq", &name, e))?;

        let mut qps = Vec::with_capacity(cfg.qps);
        for i in 0..cfg.qps {
            let buf = PinnedBuf::new(cfg.buf_size)
                .map_err(|source| VerbsError::OutOfMemory { qp: i, source })?;
            let conn = cfg.conn_of(i);
            // SAFETY: `buf` lives in the same `Qp` as the MR and is freed only after it (field order).
            let mr = unsafe { pd.reg_mr(buf.addr() as usize, buf.len(), access_flags(cfg.access)) }
                .map_err(|e| call_err("ibv_reg_mr", &name, e))?;
            let mut qp = pd
                .create_qp_builder()
                .setup_qp_type(match conn {
                    ConnType::Rc => QueuePairType::ReliableConnection,
                    ConnType::Uc => QueuePairType::UnreliableConnection,
                    ConnType::Ud => QueuePairType::UnreliableDatagram,
                })
                .setup_max_send_wr(cfg.tx_depth)
                .setup_max_recv_wr(cfg.rx_depth)
                .setup_max_send_sge(1)
                .setup_max_recv_sge(1)
                .setup_max_inline_data(cfg.inline_size)
                .setup_send_cq(Arc::clone(&cq))
                .setup_recv_cq(Arc::clone(&cq))
                .build()
                .map_err(|e| call_err("ibv_create_qp", &name, e))?;
            // SAFETY: the pointer stays valid as long as `qp`, which lives in the same `Qp`.
            let raw = unsafe { qp.qp().as_ptr() };
            let init = qp_attrs::init(conn, port.port, cfg.access, cfg.qkey);
            match init.access {
                Some(access) => {
                    let mut a = QueuePairAttribute::new();
                    a.setup_state(QueuePairState::Init)
                        .setup_pkey_index(init.pkey_index)
                        .setup_port(init.port)
                        .setup_access_flags(access_flags(access));
                    qp.modify(&a)
                        .map_err(|e| call_err("ibv_modify_qp(INIT)", &name, e))?;
                }
                None => datagram::init(raw, &init, &name)?,
            }
            let lkey = mr.lkey();
            qps.push(Qp {
                dest: None,
                qp,
                raw,
                mr,
                buf,
                lkey,
                psn: initial_psn(i),
            });
        }
        let qpns = qps.iter().map(|q| q.qp.qp_number()).collect();
        // SAFETY: ibv_wc is plain old data; all-zero is a valid (unused) value.
        let wcs = vec![unsafe { std::mem::zeroed::<sys::ibv_wc>() }; POLL_BATCH];
        let setup = VerbsSetup {
            device: name,
            port: port.port,
            gid: choice,
            active_mtu: port.active_mtu,
            mtu: limits.mtu,
            path_mtu: None,
            out_reads: limits.out_reads,
            inline_size: cfg.inline_size,
            notes: limits.notes,
        };
        Ok(VerbsEndpoint {
            cm: None,
            qps,
            qpns,
            wcs,
            cq,
            _pd: pd,
            _ctx: ctx,
            cfg: cfg.clone(),
            setup,
            connected: false,
            failure: None,
        })
    }

    /// Device, port, GID (and why), MTU: what the header block prints.
    pub fn setup(&self) -> &VerbsSetup {
        &self.setup
    }

    /// The first failed completion in words (verbs status name, vendor syndrome, what to check).
    pub fn failure_detail(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    fn local_side(&self) -> LocalSide {
        LocalSide {
            gid: self.setup.gid.entry.gid,
            gid_index: self.setup.gid.entry.index,
            mtu: self.setup.mtu,
            out_reads: self.setup.out_reads,
            psns: self.qps.iter().map(|q| q.psn).collect(),
            port: self.setup.port,
            sl: self.cfg.sl,
            traffic_class: self.cfg.traffic_class,
            flow_labels: self.cfg.flow_labels.clone(),
            timeout: self.cfg.timeout,
            retry_cnt: self.cfg.retry_cnt,
            connection: self.cfg.connection,
        }
    }

    fn connect_qp(&mut self, i: usize, plan: &QpPlan) -> std::result::Result<(), VerbsError> {
        let dev = &self.setup.device;
        let mut a = QueuePairAttribute::new();
        a.setup_state(QueuePairState::ReadyToReceive);
        if let Some(rtr) = &plan.rtr {
            let r = &rtr.route;
            let mut ah = AddressHandleAttribute::new();
            ah.setup_port(r.port)
                .setup_service_level(r.sl)
                .setup_dest_lid(0)
                .setup_grh(
                    &VerbsGid::from(Ipv6Addr::from(r.dgid)),
                    r.flow_label,
                    r.sgid_index,
                    r.hop_limit,
                    r.traffic_class,
                );
            a.setup_path_mtu(Mtu::from(rtr.path_mtu))
                .setup_dest_qp_num(rtr.dest_qp_num)
                .setup_rq_psn(rtr.rq_psn)
                .setup_address_vector(&ah);
            if let Some(resp) = &rtr.responder {
                a.setup_max_dest_read_atomic(resp.max_dest_rd_atomic)
                    .setup_min_rnr_timer(resp.min_rnr_timer);
            }
        }
        let q = &mut self.qps[i];
        q.qp.modify(&a)
            .map_err(|e| call_err("ibv_modify_qp(RTR)", dev, e))?;
        let mut b = QueuePairAttribute::new();
        b.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(plan.rts.sq_psn);
        if let Some(r) = &plan.rts.retries {
            b.setup_timeout(r.timeout)
                .setup_retry_cnt(r.retry_cnt)
                .setup_rnr_retry(r.rnr_retry)
                .setup_max_read_atomic(r.max_rd_atomic);
        }
        q.qp.modify(&b)
            .map_err(|e| call_err("ibv_modify_qp(RTS)", dev, e))?;
        if let Some(d) = &plan.datagram {
            // SAFETY: the protection domain outlives every queue pair and address handle (field order).
            let pd = unsafe { self._pd.pd() };
            q.dest = Some(UdDest {
                ah: AddressHandle::create(pd, &d.ah, dev)?,
                remote_qpn: d.remote_qpn,
                remote_qkey: d.remote_qkey,
            });
        }
        Ok(())
    }

    fn qp_checked(&self, qp: usize, offset: u64, len: u32) -> Result<&Qp> {
        let q = self.qps.get(qp).ok_or_else(|| {
            Error::InvalidRequest(format!("QP {qp} does not exist ({} QPs)", self.qps.len()))
        })?;
        if offset.saturating_add(u64::from(len)) > q.buf.len() as u64 {
            return Err(Error::InvalidRequest(format!(
                "{len} bytes at offset {offset} exceed QP {qp}'s buffer of {} bytes",
                q.buf.len()
            )));
        }
        Ok(q)
    }
}

// SAFETY: libibverbs objects may be used from any thread (rdma-core serialises inside the provider);
// the raw QP pointers and buffers are owned by this value alone, so moving it to the benchmark's
// pinned thread is sound. It is not Sync: posting from two threads at once is not supported here.
unsafe impl Send for VerbsEndpoint {}

impl Endpoint for VerbsEndpoint {
    fn local_info(&self) -> ConnInfo {
        ConnInfo {
            needs_single_datagrams: false,
            transport: TransportKind::Verbs,
            gid: self.setup.gid.entry.gid,
            gid_index: Some(self.setup.gid.entry.index),
            mac: None,
            addr: None,
            mtu: self.setup.mtu,
            qps: self
                .qps
                .iter()
                .map(|q| QpInfo {
                    qpn: q.qp.qp_number(),
                    psn: q.psn,
                    rkey: q.mr.rkey(),
                    vaddr: q.buf.addr(),
                    len: q.buf.len() as u64,
                    max_rd_atomic: self.setup.out_reads,
                })
                .collect(),
            connection: self.cfg.connection,
            qkey: (self.cfg.connection == ConnType::Ud).then_some(self.cfg.qkey),
        }
    }

    fn connect(&mut self, peer: &ConnInfo) -> Result<()> {
        if self.connected {
            return Err(Error::InvalidRequest(
                "this endpoint is already connected".into(),
            ));
        }
        let plan = qp_attrs::plan(&self.local_side(), peer)?;
        for (i, q) in plan.qps.iter().enumerate() {
            self.connect_qp(i, q)?;
        }
        self.setup.path_mtu = Some(plan.path_mtu);
        self.connected = true;
        Ok(())
    }

    fn qp_count(&self) -> usize {
        self.qps.len()
    }

    fn buffer(&self, qp: usize) -> &[u8] {
        self.qps[qp].buf.as_slice()
    }

    fn buffer_mut(&mut self, qp: usize) -> &mut [u8] {
        self.qps[qp].buf.as_mut_slice()
    }

    fn post_send(&mut self, qp: usize, wr: &SendRequest) -> Result<()> {
        let inline_size = self.cfg.inline_size;
        let q = self.qp_checked(qp, wr.offset, wr.len)?;
        let mut sge = sys::ibv_sge {
            addr: q.buf.addr() + wr.offset,
            length: wr.len,
            lkey: q.lkey,
        };
        let mut swr = post::send_wr(wr, &mut sge, inline_size)?;
        if let Some(d) = &q.dest {
            swr.wr.ud = sys::ud_t {
                ah: d.ah.as_ptr(),
                remote_qpn: d.remote_qpn,
                remote_qkey: d.remote_qkey,
            };
        }
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: `q.raw` is a live QP; `swr` and `sge` outlive the call, which copies them (and the
        // inline data) into the send queue before returning.
        let ret = unsafe { sys::ibv_post_send(q.raw, &mut swr, &mut bad) };
        if ret != 0 {
            return Err(post::post_error("ibv_post_send", ret));
        }
        Ok(())
    }

    fn post_recv(&mut self, qp: usize, wr: &RecvRequest) -> Result<()> {
        let q = self.qp_checked(qp, wr.offset, wr.len)?;
        let mut sge = sys::ibv_sge {
            addr: q.buf.addr() + wr.offset,
            length: wr.len,
            lkey: q.lkey,
        };
        let mut rwr = sys::ibv_recv_wr {
            wr_id: wr.wr_id,
            next: ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // SAFETY: as in post_send.
        let ret = unsafe { sys::ibv_post_recv(q.raw, &mut rwr, &mut bad) };
        if ret != 0 {
            return Err(post::post_error("ibv_post_recv", ret));
        }
        Ok(())
    }

    fn poll_cq(&mut self, out: &mut [Completion]) -> Result<usize> {
        let n = out.len().min(self.wcs.len());
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: the CQ lives as long as `self`; `wcs` has room for `n` entries.
        let got =
            unsafe { sys::ibv_poll_cq(self.cq.cq().as_ptr(), n as i32, self.wcs.as_mut_ptr()) };
        if got < 0 {
            return Err(Error::Io {
                context: format!("ibv_poll_cq on {}", self.setup.device),
                source: io::Error::from_raw_os_error(-got),
            });
        }
        for (slot, w) in out.iter_mut().zip(&self.wcs[..got as usize]) {
            let qp = self.qpns.iter().position(|&n| n == w.qp_num).unwrap_or(0) as u32;
            let status = wc::map_status(w.status);
            if w.status != 0 && self.failure.is_none() {
                self.failure = Some(wc::describe(w.status, w.vendor_err, qp, w.wr_id));
            }
            *slot = post::completion(w, qp, status);
        }
        Ok(got as usize)
    }
}
