//! [`VerbsEndpoint`]: `n` RC queue pairs on one device, one shared CQ, one registered buffer per QP.
//!
//! QP attributes follow perftest's `ctx_connect` (reference §3.3) so a perftest-built peer sees what
//! it expects: INIT with the remote access rights, RTR with the negotiated MTU, `min_rnr_timer` 12,
//! a GRH with hop limit 255 and the chosen source GID index, RTS with `retry_cnt` 7, `rnr_retry` 7 and
//! the `-u` timeout; each side's responder depth is its own `out_reads` and its initiator depth the
//! peer's.

use super::device;
use super::error::VerbsError;
use super::gid;
use super::qp_attrs::{self, LocalSide, Rtr, Rts};
use super::sysfs::Sysfs;
use super::wc;
use super::{VerbsConfig, VerbsSetup};
use crate::params::TransportKind;
use crate::transport::rng;
use crate::transport::{
    Access, Completion, CompletionOp, ConnInfo, Endpoint, Error, QpInfo, RecvRequest, Result,
    SendOp, SendRequest,
};
use rdma_mummy_sys as sys;
use sideway::ibverbs::AccessFlags;
use sideway::ibverbs::address::{AddressHandleAttribute, Gid as VerbsGid};
use sideway::ibverbs::completion::{BasicCompletionQueue, CompletionQueue as _};
use sideway::ibverbs::device_context::{DeviceContext, Mtu};
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{
    BasicQueuePair, QueuePair as _, QueuePairAttribute, QueuePairState,
};
use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::io;
use std::net::Ipv6Addr;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// Completions fetched per `ibv_poll_cq` call at most.
const POLL_BATCH: usize = 64;
const PAGE: usize = 4096;

/// A zeroed, page-aligned buffer that the NIC may read and write (hence raw, not a `Vec`).
struct PinnedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl PinnedBuf {
    fn new(len: usize) -> PinnedBuf {
        let len = len.div_ceil(PAGE).max(1) * PAGE;
        let layout = Layout::from_size_align(len, PAGE).expect("page-aligned layout");
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        PinnedBuf { ptr, layout }
    }

    fn len(&self) -> usize {
        self.layout.size()
    }

    fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the MR that pinned it is dropped first
        // (field order in `Qp`).
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// One queue pair with its buffer. Field order is drop order: QP, then MR, then the memory.
struct Qp {
    qp: BasicQueuePair,
    raw: *mut sys::ibv_qp,
    mr: Arc<MemoryRegion>,
    buf: PinnedBuf,
    lkey: u32,
    psn: u32,
}

/// One side of a test on a real RDMA device. See the module documentation.
pub struct VerbsEndpoint {
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

        let mut notes = Vec::new();
        let mtu = match cfg.mtu {
            Some(m) if m > port.active_mtu => {
                notes.push(format!(
                    "-m {m} is above the active MTU of {name} port {} ({}); using {}",
                    port.port, port.active_mtu, port.active_mtu
                ));
                port.active_mtu
            }
            Some(m) => m,
            None => port.active_mtu,
        };
        let max_rd = dev.info.max_qp_rd_atom.clamp(1, 255);
        let out_reads = match cfg.out_reads {
            Some(o) if o > max_rd => {
                notes.push(format!(
                    "-o {o} is above what {name} allows ({max_rd}); using {max_rd}"
                ));
                max_rd
            }
            Some(o) => o.max(1),
            None => max_rd,
        };
        if dev.info.max_qp_wr > 0
            && (cfg.tx_depth > dev.info.max_qp_wr || cfg.rx_depth > dev.info.max_qp_wr)
        {
            return Err(VerbsError::Config(format!(
                "-t {} / -r {}: {name} allows at most {} work requests per queue",
                cfg.tx_depth, cfg.rx_depth, dev.info.max_qp_wr
            )));
        }

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
            let buf = PinnedBuf::new(cfg.buf_size);
            // SAFETY: `buf` lives in the same `Qp` as the MR and is freed only after it (field order).
            let mr = unsafe { pd.reg_mr(buf.addr() as usize, buf.len(), access_flags(cfg.access)) }
                .map_err(|e| call_err("ibv_reg_mr", &name, e))?;
            let mut qp = pd
                .create_qp_builder()
                .setup_max_send_wr(cfg.tx_depth)
                .setup_max_recv_wr(cfg.rx_depth)
                .setup_max_send_sge(1)
                .setup_max_recv_sge(1)
                .setup_max_inline_data(cfg.inline_size)
                .setup_send_cq(Arc::clone(&cq))
                .setup_recv_cq(Arc::clone(&cq))
                .build()
                .map_err(|e| call_err("ibv_create_qp", &name, e))?;
            let mut init = QueuePairAttribute::new();
            init.setup_state(QueuePairState::Init)
                .setup_pkey_index(0)
                .setup_port(port.port)
                .setup_access_flags(access_flags(cfg.access));
            qp.modify(&init)
                .map_err(|e| call_err("ibv_modify_qp(INIT)", &name, e))?;
            // SAFETY: the pointer stays valid as long as `qp`, which lives in the same `Qp`.
            let raw = unsafe { qp.qp().as_ptr() };
            let lkey = mr.lkey();
            qps.push(Qp {
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
            mtu,
            path_mtu: None,
            out_reads,
            inline_size: cfg.inline_size,
            notes,
        };
        Ok(VerbsEndpoint {
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
            timeout: self.cfg.timeout,
            retry_cnt: self.cfg.retry_cnt,
        }
    }

    fn connect_qp(
        &mut self,
        i: usize,
        rtr: &Rtr,
        rts: &Rts,
    ) -> std::result::Result<(), VerbsError> {
        let dev = &self.setup.device;
        let mut ah = AddressHandleAttribute::new();
        ah.setup_port(rtr.port)
            .setup_service_level(rtr.sl)
            .setup_dest_lid(0)
            .setup_grh(
                &VerbsGid::from(Ipv6Addr::from(rtr.dgid)),
                0,
                rtr.sgid_index,
                rtr.hop_limit,
                rtr.traffic_class,
            );
        let mut a = QueuePairAttribute::new();
        a.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(Mtu::from(rtr.path_mtu))
            .setup_dest_qp_num(rtr.dest_qp_num)
            .setup_rq_psn(rtr.rq_psn)
            .setup_max_dest_read_atomic(rtr.max_dest_rd_atomic)
            .setup_min_rnr_timer(rtr.min_rnr_timer)
            .setup_address_vector(&ah);
        let q = &mut self.qps[i];
        q.qp.modify(&a)
            .map_err(|e| call_err("ibv_modify_qp(RTR)", dev, e))?;
        let mut b = QueuePairAttribute::new();
        b.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(rts.sq_psn)
            .setup_timeout(rts.timeout)
            .setup_retry_cnt(rts.retry_cnt)
            .setup_rnr_retry(rts.rnr_retry)
            .setup_max_read_atomic(rts.max_rd_atomic);
        q.qp.modify(&b)
            .map_err(|e| call_err("ibv_modify_qp(RTS)", dev, e))?;
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

fn post_error(call: &str, ret: i32) -> Error {
    if ret == libc::ENOMEM {
        Error::QueueFull
    } else {
        Error::Io {
            context: call.to_string(),
            source: io::Error::from_raw_os_error(ret),
        }
    }
}

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
        }
    }

    fn connect(&mut self, peer: &ConnInfo) -> Result<()> {
        if self.connected {
            return Err(Error::InvalidRequest(
                "this endpoint is already connected".into(),
            ));
        }
        let plan = qp_attrs::plan(&self.local_side(), peer)?;
        for (i, (rtr, rts)) in plan.qps.iter().enumerate() {
            self.connect_qp(i, rtr, rts)?;
        }
        self.setup.path_mtu = Some(plan.path_mtu);
        self.connected = true;
        Ok(())
    }

    fn qp_count(&self) -> usize {
        self.qps.len()
    }

    fn buffer(&self, qp: usize) -> &[u8] {
        let b = &self.qps[qp].buf;
        // SAFETY: the allocation is `len()` bytes and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(b.ptr.as_ptr(), b.len()) }
    }

    fn buffer_mut(&mut self, qp: usize) -> &mut [u8] {
        let b = &self.qps[qp].buf;
        // SAFETY: as in `buffer`, and `&mut self` makes this the only Rust reference.
        unsafe { std::slice::from_raw_parts_mut(b.ptr.as_ptr(), b.len()) }
    }

    fn post_send(&mut self, qp: usize, wr: &SendRequest) -> Result<()> {
        let inline_size = self.cfg.inline_size;
        let q = self.qp_checked(qp, wr.offset, wr.len)?;
        let mut sge = sys::ibv_sge {
            addr: q.buf.addr() + wr.offset,
            length: wr.len,
            lkey: q.lkey,
        };
        // SAFETY: ibv_send_wr is plain old data (integers, pointers, unions of them).
        let mut swr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
        swr.wr_id = wr.wr_id;
        swr.sg_list = &mut sge;
        swr.num_sge = 1;
        let mut flags = 0;
        if wr.signaled {
            flags |= sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
        }
        if wr.inline {
            if wr.len > inline_size {
                return Err(Error::InvalidRequest(format!(
                    "inline send of {} bytes but the QP was created with -I {inline_size}",
                    wr.len
                )));
            }
            flags |= sys::ibv_send_flags::IBV_SEND_INLINE.0;
        }
        swr.send_flags = flags;
        let remote = || {
            wr.remote.ok_or_else(|| {
                Error::InvalidRequest("WRITE and READ need a remote address and rkey".into())
            })
        };
        swr.opcode = match wr.op {
            SendOp::Send => sys::ibv_wr_opcode::IBV_WR_SEND,
            SendOp::SendWithImm(imm) => {
                swr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
                sys::ibv_wr_opcode::IBV_WR_SEND_WITH_IMM
            }
            SendOp::Write => {
                let r = remote()?;
                swr.wr.rdma = sys::rdma_t {
                    remote_addr: r.addr,
                    rkey: r.rkey,
                };
                sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE
            }
            SendOp::WriteWithImm(imm) => {
                let r = remote()?;
                swr.wr.rdma = sys::rdma_t {
                    remote_addr: r.addr,
                    rkey: r.rkey,
                };
                swr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
                sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM
            }
            SendOp::Read => {
                if wr.inline {
                    return Err(Error::InvalidRequest("a READ cannot be inline".into()));
                }
                let r = remote()?;
                swr.wr.rdma = sys::rdma_t {
                    remote_addr: r.addr,
                    rkey: r.rkey,
                };
                sys::ibv_wr_opcode::IBV_WR_RDMA_READ
            }
            SendOp::FetchAdd(add) => {
                let r = remote()?;
                swr.wr.atomic = sys::atomic_t {
                    remote_addr: r.addr,
                    compare_add: add,
                    swap: 0,
                    rkey: r.rkey,
                };
                sys::ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD
            }
            SendOp::CompareSwap { compare, swap } => {
                let r = remote()?;
                swr.wr.atomic = sys::atomic_t {
                    remote_addr: r.addr,
                    compare_add: compare,
                    swap,
                    rkey: r.rkey,
                };
                sys::ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP
            }
        };
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: `q.raw` is a live QP; `swr` and `sge` outlive the call, which copies them (and the
        // inline data) into the send queue before returning.
        let ret = unsafe { sys::ibv_post_send(q.raw, &mut swr, &mut bad) };
        if ret != 0 {
            return Err(post_error("ibv_post_send", ret));
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
            return Err(post_error("ibv_post_recv", ret));
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
            let with_imm = w.wc_flags & sys::ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0;
            let status = wc::map_status(w.status);
            if w.status != 0 && self.failure.is_none() {
                self.failure = Some(wc::describe(w.status, w.vendor_err, qp, w.wr_id));
            }
            *slot = Completion {
                wr_id: w.wr_id,
                qp,
                status,
                op: match w.opcode {
                    sys::ibv_wc_opcode::IBV_WC_RDMA_WRITE => CompletionOp::Write,
                    sys::ibv_wc_opcode::IBV_WC_RDMA_READ => CompletionOp::Read,
                    sys::ibv_wc_opcode::IBV_WC_RECV => CompletionOp::Recv,
                    sys::ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM => CompletionOp::RecvWithImm,
                    sys::ibv_wc_opcode::IBV_WC_FETCH_ADD => CompletionOp::FetchAdd,
                    sys::ibv_wc_opcode::IBV_WC_COMP_SWAP => CompletionOp::CompareSwap,
                    _ => CompletionOp::Send,
                },
                byte_len: w.byte_len,
                // SAFETY: reading a u32 out of a union of u32s.
                imm: with_imm
                    .then(|| u32::from_be(unsafe { w.imm_data_invalidated_rkey_union.imm_data })),
            };
        }
        Ok(got as usize)
    }
}
