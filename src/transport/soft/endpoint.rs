//! [`SoftEndpoint`]: the soft transport's [`Endpoint`]. Real RoCE packets from userspace.
//!
//! One endpoint owns one I/O backend (a UDP socket for RoCE v2, or an AF_PACKET socket for v1 and
//! v2), one receive and one transmit batch, and per queue pair one sans-IO engine (RC, UC or UD, `-c`) with
//! its registered buffer. There are no threads: [`Endpoint::poll_cq`] is the NIC. Each call
//! first transmits the work posted since the last one, then receives a batch, verifies and
//! demultiplexes it by BTH.DestQP into the engines (`ingress`), fires due timers, lets every engine
//! fill the transmit batch (`egress`: framing each packet and computing its ICRC), sends the batch
//! with one syscall, and hands out completions; a lone ACK waits for the next call and leaves with
//! what the application posts meanwhile (`endpoint/datapath.rs`). Nothing on that path allocates.
//!
//! Two endpoints on one host: RoCE v2 lives on UDP port 4791, so each side needs its own address.
//! On `lo` that is automatic: a second endpoint finds 127.0.0.1:4791 taken and moves to the next
//! free 127.0.0.x (the peer learns the address from [`ConnInfo::addr`]); an explicit `bind` is
//! never moved. Otherwise use two network namespaces (`scripts/netns.sh up`), which is also what
//! AF_PACKET and RoCE v1 need, since frames must cross a real (virtual) link.

use std::net::SocketAddr;

use super::config::PeerMismatch;
use super::egress::TxCache;
use super::engine::Engine;
use super::ingress::{FrameFilter, RxIcrcs};
use super::io::Nic;
use super::io::device::{Backend, Device};
use super::io::fault::Impaired;
use super::io::impair::ImpairConfig;
use super::io::kernel_rx::KernelRx;
use super::io::qp_filter::QpRange;
use super::io::sockaddr::Name;
use super::marks;
use super::netdev::{GidKind, NetDev};
use super::path::{LocalEnd, Path, path_to};
use super::pfc::PauseState;
use super::plan::{self, SoftNote};
use super::rc::{self, BufferId, MemoryTable, MrKeys, QpConfig};
use crate::params::{ConnType, Recovery, TransportKind};
use crate::transport::qp_counters::QpCounters;
use crate::transport::{
    Access, Completion, ConnInfo, Endpoint, Error, Gid, QpInfo, RecvRequest, Result, RoceMtu,
    SendRequest, rng,
};
use crate::wire::Ipv4IdCache;

pub use super::config::SoftConfig;
pub(crate) use super::config::SoftError;
pub(crate) use super::counters::SoftCounters;

mod cm;
mod datapath;
mod event;
#[cfg(test)]
mod tests;

/// One queue pair: its keys and, until connect, its memory; after connect, its engine.
struct QpSlot {
    qpn: u32,
    psn: u32,
    keys: MrKeys,
    /// The buffer its region spans, all of it (registered whole at open): what `buffer` hands
    /// out, indexed directly rather than looked up by key on every call.
    buffer: BufferId,
    mem: Option<MemoryTable>,
    qp: Option<Engine>,
    /// The per-QP framing (UDP source port differs per QP on AF_PACKET).
    path: Option<Path>,
    /// Where the connected peer's packets come from; others are dropped (`wrong_source`).
    peer: Gid,
    /// A UDP path's peer address encoded for the kernel once, at connect: a lone packet's
    /// sendto passes it as it is (see `transmit_unqueued`).
    name: Name,
    /// What its transmissions keep for its path: ICRC starts, AF_PACKET's headers.
    tx_cache: TxCache,
    /// Its unacknowledged PSNs when the datapath last looked (ACKs only lower the true figure).
    unacked: u32,
    /// Packets it received CE-marked (its share of `np_ecn_marked_roce_packets`).
    ce_marked: u64,
}

/// The soft transport's endpoint. See the module documentation.
pub struct SoftEndpoint {
    cfg: SoftConfig,
    dev: NetDev,
    mtu: RoceMtu,
    /// Setup decisions worth telling the user (MTU capped, address moved).
    notes: Vec<SoftNote>,
    /// UDP GSO (or AF_PACKET super-frames) was planned (the peer may still turn sending off).
    gso: bool,
    /// The deliberate impairment in force, if any.
    impair: Option<ImpairConfig>,
    /// The loss recovery both sides agreed on (go-back-N until [`Self::agree_recovery`]).
    recovery: Recovery,
    /// This side asked for a recovery other than the default and the peer has answered: the
    /// header says what runs and why.
    recovery_note: bool,
    /// The peer is roceperf (it negotiated out of band): go-back-N runs with its probe timer and
    /// loss-reactive window (`QpConfig::gbn_fast`, `gbn_loss_window`); against perftest, as rxe's.
    roceperf_peer: bool,
    /// The backend and its batches, impaired as `impair` says.
    nic: Impaired<Nic>,
    /// Our addresses and what the receive's checks keep (`datapath::RxState`).
    rx: datapath::RxState,
    slots: Vec<QpSlot>,
    /// Monotonic nanoseconds at open: the engines' time zero.
    epoch: u64,
    /// Idle polls left until the timers are checked (see `datapath::TIMER_CHECK_EVERY`): a count
    /// down, which one decrement tests.
    idle_left: u32,
    counters: SoftCounters,
    /// Round-robin start for completions and transmission, so no QP starves.
    next_qp: usize,
    /// The sum of the slots' `unacked`: at least the PSNs all queue pairs have out together, which
    /// the datapath holds to `max_unacked_psns` (see `datapath::SoftEndpoint::transmit`).
    in_flight: u32,
    /// `max_unacked_psns` (or one queue pair's window, when deeper: selective repeat's) when the
    /// queue pairs' windows together exceed it; the datapath then shares it among them. `None`
    /// (one queue pair, say): nothing to share, no bookkeeping.
    shared_budget: Option<u32>,
    /// What PFC pause frames hold (AF_PACKET: the datapath takes them with the RoCE frames).
    pfc: PauseState,
    /// The endpoint's shape allows the simple poll (`datapath::SoftEndpoint::poll_simple`): kept
    /// by [`refresh_simple`](Self::refresh_simple) wherever what it depends on changes.
    simple_shape: bool,
    /// `poll_cq` may take the simple poll: `simple_shape`, and the device holds no packet the
    /// kernel refused (so the simple poll asks the queue pair alone whether to transmit). A
    /// transmission that leaves one queued clears it; the general poll sets it again once sent.
    simple: bool,
}

impl SoftEndpoint {
    /// Discovers the interface, opens the backend and registers one buffer per QP.
    pub fn open(mut cfg: SoftConfig) -> std::result::Result<SoftEndpoint, SoftError> {
        plan::check_config(&cfg)?;
        if cfg.kernel_rx.is_none() {
            cfg.kernel_rx = Some(KernelRx::from_env()?);
        }
        let dev = NetDev::by_name(&cfg.device)?;
        dev.require_up()?;
        let mut impair = match cfg.impair {
            Some(i) => Some(i),
            None => ImpairConfig::from_env()?,
        };
        if let Some(seed) = cfg.impair_seed {
            impair.get_or_insert_with(ImpairConfig::default).seed = seed;
        }
        let mut plan = plan::plan(&cfg, &dev, impair, rng::mix(rng::run_seed()))?;
        let nic = Nic::open(&dev, &plan.backend)?;
        // A second endpoint on lo may have taken the next free address (`UdpPlan::may_move`).
        if let Some(bound) = nic.local_addr().map(|a| a.ip())
            && plan.local_ip != Some(bound)
        {
            plan.moved_to(bound, cfg.udp_port);
        }
        let access = Access::LOCAL_WRITE
            | Access::REMOTE_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_ATOMIC;
        let slots = plan
            .qps
            .iter()
            .enumerate()
            .map(|(qp, ids)| {
                let mut mem = MemoryTable::new(ids.qpn & 0xff);
                let keys = mem
                    .try_add_registered(cfg.buffer_len, access)
                    .map_err(|source| SoftError::OutOfMemory { qp, source })?;
                // A fresh table's one region is its one buffer, whole: the bytes `buffer` returns.
                let buffer = mem
                    .region(keys.lkey)
                    .map(|r| r.buffer)
                    .expect("a region just registered");
                Ok(QpSlot {
                    qpn: ids.qpn,
                    psn: ids.psn,
                    keys,
                    buffer,
                    mem: Some(mem),
                    qp: None,
                    path: None,
                    peer: Gid::ZERO,
                    name: Name::of(SocketAddr::from(([0, 0, 0, 0], 0))),
                    tx_cache: TxCache::new(),
                    unacked: 0,
                    ce_marked: 0,
                })
            })
            .collect::<std::result::Result<Vec<_>, SoftError>>()?;
        // Once the queue pairs exist, the socket keeps out the frames of its neighbours' (another
        // endpoint's on the same interface): they never reach the poll, nor its "unknown QP" count.
        let mut nic = nic;
        if let Some(first) = slots.first() {
            nic.accept_only(QpRange {
                first: first.qpn,
                count: slots.len() as u32,
            })?;
        }
        let framed = nic.local_addr().is_none();
        let classes = marks::classes(
            cfg.version,
            &cfg.marks,
            cfg.cnp_dscp(),
            cfg.cnp_prio(),
            framed,
        );
        let pfc = PauseState::new(
            crate::wire::pfc::link_speed_mbps(dev.sysfs_speed()),
            classes.data.priority(plan.encap),
            classes.cnp.priority(plan.encap),
            // Tagged frames on AF_PACKET: a switch may pause this priority at any time, and the
            // first pause must find this side checking (see `PauseState::armed`).
            framed && cfg.marks.sl.is_some(),
        );
        let rx = datapath::RxState {
            me: FrameFilter {
                encap: plan.encap,
                ip: plan.local_ip,
                gid: plan.gid,
            },
            local: nic.local_addr(),
            ipv4_ids: Ipv4IdCache::new(),
            icrcs: RxIcrcs::new(),
            cm: None,
        };
        Ok(SoftEndpoint {
            nic: Impaired::new(nic, plan.impair.as_ref()),
            rx,
            cfg,
            dev,
            mtu: plan.mtu,
            notes: plan.notes,
            gso: plan.gso,
            impair: plan.impair,
            recovery: Recovery::Gbn,
            recovery_note: false,
            roceperf_peer: false,
            slots,
            epoch: datapath::monotonic_ns(),
            idle_left: datapath::TIMER_CHECK_EVERY,
            counters: SoftCounters::default(),
            next_qp: 0,
            in_flight: 0,
            shared_budget: None,
            pfc,
            simple_shape: false,
            simple: false,
        })
    }

    /// Recomputes `simple_shape` (and `simple`): one connected RC queue pair on an unimpaired UDP socket, no `-e`, no
    /// shared budget, no CM and PFC not armed (a latency test's every poll). The inputs change only
    /// at connect (queue pairs, budget, GSO) and when the CM starts; `-e` and the impairment are
    /// fixed at open, and PFC never arms on UDP (no MAC Control frame reaches a socket).
    pub(super) fn refresh_simple(&mut self) {
        let lone_rc = matches!(
            &self.slots[..],
            [QpSlot {
                qp: Some(Engine::Rc(_)),
                path: Some(Path::Udp { .. }),
                ..
            }]
        );
        self.simple_shape = lone_rc
            && !self.cfg.events
            && self.impair.is_none()
            && self.shared_budget.is_none()
            && !self.pfc.armed()
            && self.rx.cm.is_none()
            && matches!(self.nic.inner(), Nic::Udp(_));
        self.simple = self.simple_shape && Device::tx_idle(&self.nic);
    }

    /// Takes the loss recovery the peer asked for out of band: selective repeat when both asked for
    /// it, else go-back-N with roceperf's loss-reactive window and probe timer (rxe's fixed window
    /// and ACK timeout run when this is never called: a perftest peer). Call before
    /// [`Endpoint::connect`].
    pub fn agree_recovery(&mut self, peer: Recovery) -> Recovery {
        self.recovery = self.cfg.recovery.agree(peer);
        // `gbn-rxe` asks for rxe's timing against a roceperf peer too.
        self.roceperf_peer = self.recovery != Recovery::GbnRxe;
        if self.cfg.recovery != Recovery::Gbn {
            self.recovery_note = true;
        }
        self.recovery
    }

    /// The deliberate impairment in force, if any.
    pub fn impairment(&self) -> Option<&ImpairConfig> {
        self.impair.as_ref()
    }

    /// The loss recovery the queue pairs use (or will use when connected).
    pub fn recovery(&self) -> Recovery {
        self.recovery
    }

    /// The active path MTU (before connect: ours; after: the one both sides use).
    pub fn mtu(&self) -> u32 {
        self.mtu.bytes()
    }

    /// The GID this endpoint uses.
    pub fn gid(&self) -> Gid {
        self.rx.me.gid
    }

    /// The interface it runs on.
    pub fn netdev(&self) -> &NetDev {
        &self.dev
    }

    /// The setup decisions worth telling the user (MTU capped, address moved, GSO off).
    pub fn notes(&self) -> &[SoftNote] {
        &self.notes
    }

    /// Counters of the endpoint and all its engines.
    pub fn counters(&self) -> SoftCounters {
        let mut c = self.counters;
        for q in self.slots.iter().filter_map(|s| s.qp.as_ref()) {
            q.add_counters(&mut c);
        }
        c.tx_batches += self.nic.inner().tx_batches();
        (c.impair, c.impair_rx) = self.nic.stats();
        c.pfc = self.pfc.counters(self.now().as_nanos());
        c
    }

    /// Each queue pair's own counters (`test.counters.per_qp`), in queue-pair order.
    pub fn qp_counters(&self) -> Vec<QpCounters> {
        self.slots
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut c = QpCounters {
                    qp: i as u32,
                    qpn: Some(s.qpn),
                    ce_marked_packets: Some(s.ce_marked),
                    ..QpCounters::default()
                };
                if let Some(q) = &s.qp {
                    q.qp_counters(&mut c);
                }
                c
            })
            .collect()
    }

    /// What this endpoint is and why, for `-v`: interface (with its MTU and GID tables), backend, GID,
    /// MTU, impairment.
    pub fn describe(&self) -> String {
        self.setup_lines(true).join("\n  ")
    }

    /// What the run header keeps of [`describe`](Self::describe): one line each for the backend, the
    /// interface (without its tables), the GID, the MTU, every note and the impairment.
    pub fn setup_notes(&self) -> Vec<String> {
        self.setup_lines(false)
    }

    fn setup_lines(&self, interface_tables: bool) -> Vec<String> {
        let backend = self.nic.inner().describe();
        let interface = if interface_tables {
            self.dev.describe().replace('\n', "\n  ")
        } else {
            self.dev.summary()
        };
        let mut lines = vec![
            format!(
                "soft transport: {} ({} I/O) over {backend}",
                self.rx.me.encap,
                self.cfg.io.name()
            ),
            format!("interface {interface}"),
            format!(
                "GID {} ({})",
                self.rx.me.gid,
                self.rx
                    .me
                    .ip
                    .map(|ip| format!("address {ip}"))
                    .unwrap_or_else(|| "RoCE v1 GRH GID".into()),
            ),
            format!(
                "active MTU {} (link MTU {}, {} bytes of {} headers)",
                self.mtu,
                self.dev.link_mtu,
                self.rx.me.encap.mtu_overhead(),
                self.rx.me.encap,
            ),
        ];
        lines.extend(self.notes.iter().map(|n| format!("note: {n}")));
        if self.recovery_note {
            lines.push(match self.recovery {
                Recovery::Sr => "loss recovery: selective repeat (--recovery sr on both sides; see docs/lossy-roce.md)",
                Recovery::GbnRxe => "loss recovery: go-back-N timed as rxe times it (--recovery gbn-rxe: a fixed window, resends after a NAK or the ACK timeout)",
                Recovery::Gbn => "loss recovery: go-back-N: this side asked for --recovery sr, the peer did not",
            }.into());
        }
        let framed = self.nic.inner().local_addr().is_none();
        lines.push(marks::describe(
            &self.classes(),
            &self.cfg.marks,
            self.rx.me.encap,
            framed,
        ));
        if interface_tables {
            lines.push(self.pfc_line(framed));
        }
        if let Some(i) = &self.impair {
            lines.push(format!(
                "deliberate impairment: {i} (per RoCE packet{})",
                if self.gso {
                    ", inside GSO/GRO batches"
                } else {
                    ""
                }
            ));
        }
        lines
    }

    /// The `-v` line on PFC: which priorities pause frames hold, the speed their quanta are timed
    /// at; on the UDP backend, that none can arrive.
    fn pfc_line(&self, framed: bool) -> String {
        if !framed {
            return "PFC: not honoured on the UDP backend (the kernel hands MAC Control frames to no \
                    socket); a lossless run needs --io packet"
                .into();
        }
        let (data, cnp) = self.pfc.priorities();
        let speed = self.pfc.speed_mbps();
        let source = match self.dev.sysfs_speed() {
            Some(s) if s > 0 => "the interface's speed",
            _ => "assumed: the interface reports no speed",
        };
        format!(
            "PFC: pause frames for priority {data} hold data, for priority {cnp} CNPs; quanta of \
             512 bit times at {speed} Mb/s ({source})"
        )
    }

    /// The engines' time now (outside a poll, which reads it at most once through its `PollClock`).
    fn now(&self) -> rc::Instant {
        rc::Instant::from_nanos(datapath::monotonic_ns().saturating_sub(self.epoch))
    }

    /// `--tclass`, `-S`, `--flow_label` as configured.
    pub fn marks(&self) -> &crate::params::Marks {
        &self.cfg.marks
    }

    /// What data and CNPs are marked with on this endpoint's backend.
    pub(crate) fn classes(&self) -> marks::Classes {
        let cfg = &self.cfg;
        let framed = self.nic.inner().local_addr().is_none();
        marks::classes(
            cfg.version,
            &cfg.marks,
            cfg.cnp_dscp(),
            cfg.cnp_prio(),
            framed,
        )
    }

    /// What this side contributes to every path.
    fn local_end(&self) -> LocalEnd {
        let socket = self.nic.inner().local_addr();
        LocalEnd {
            classes: self.classes(),
            version: self.cfg.version,
            socket,
            ip: self.rx.me.ip,
            gid: self.rx.me.gid,
            mac: self.dev.mac,
            ifindex: self.dev.index,
            loopback: self.dev.loopback,
            udp_port: self.cfg.udp_port,
        }
    }

    /// The queue pairs' connection type (`-c`).
    pub fn connection(&self) -> ConnType {
        self.cfg.connection
    }

    /// Queue pair `i`'s connection type: `-c`'s, but RC for the last `rc_tail` ones.
    fn conn_of(&self, i: usize) -> ConnType {
        self.cfg
            .connection
            .of_qp(i, self.slots.len(), self.cfg.rc_tail)
    }

    /// Connects queue pair `i` to `remote`, a queue pair of `peer`, with path MTU `mtu`.
    fn connect_slot(
        &mut self,
        i: usize,
        peer: &ConnInfo,
        remote: &QpInfo,
        mtu: RoceMtu,
    ) -> Result<()> {
        let local = self.local_end();
        let (qpn, psn, lkey) = {
            let s = &self.slots[i];
            (s.qpn, s.psn, s.keys.lkey)
        };
        let dev = &self.dev;
        let label = self.cfg.marks.flow_label(i);
        let path = path_to(&local, peer, (qpn, remote.qpn), label, |l, p| {
            super::neighbour::resolve(dev, l, p)
        })
        .map_err(SoftError::from)?;
        let mut qcfg = QpConfig::new(qpn, remote.qpn, psn, remote.psn, lkey);
        qcfg.pmtu = mtu.bytes();
        qcfg.timeout = self.cfg.timeout;
        qcfg.retry_cnt = self.cfg.retry_cnt;
        // Both ends of a soft test are busy-polling processes that the scheduler can stall for
        // hundreds of milliseconds on a loaded machine; rxe's fixed 67 ms × 7 budget would call
        // such a peer dead. Back off up to 8× per retry: a lost packet is still resent after one
        // timeout, while a dead peer is declared after about 47 timeouts (3.2 s at -u 14).
        qcfg.retry_backoff_max_shift = 3;
        qcfg.max_rd_atomic = self.cfg.max_rd_atomic.min(remote.max_rd_atomic.max(1));
        qcfg.max_dest_rd_atomic = self.cfg.max_rd_atomic;
        qcfg.max_unacked_psns = self.cfg.max_unacked_psns.min(self.ring_window(peer));
        qcfg.sq_depth = self.cfg.sq_depth;
        qcfg.rq_depth = self.cfg.rq_depth;
        qcfg.cq_tag = i as u32;
        qcfg.recovery = self.recovery;
        qcfg.gbn_fast = self.roceperf_peer;
        qcfg.cc = self.cfg.cc;
        qcfg.cc_params = self.cfg.cc_params;
        qcfg.gbn_loss_window = self.roceperf_peer;
        let slot = &mut self.slots[i];
        let Some(mem) = slot.mem.take() else {
            return Err(Error::InvalidRequest(format!(
                "queue pair {i} is already connected; connect once per endpoint"
            )));
        };
        let remote_qkey = peer.qkey.unwrap_or(crate::params::DEFAULT_QKEY);
        let conn = self.conn_of(i);
        let qp =
            Engine::new(conn, qcfg, mem, self.cfg.qkey, remote_qkey).map_err(SoftError::from)?;
        let window = qp.window_max();
        let budget = self.cfg.max_unacked_psns.max(window);
        let windows = u64::from(window) * self.slots.len() as u64;
        self.shared_budget = (windows > budget.into()).then_some(budget);
        let slot = &mut self.slots[i];
        slot.qp = Some(qp);
        slot.peer = path.peer_source();
        if let Path::Udp { dst, .. } = path {
            slot.name = Name::of(dst);
        }
        slot.path = Some(path);
        self.refresh_simple();
        Ok(())
    }

    /// The most PSNs each queue pair may have unacknowledged when an AF_PACKET receive ring is on
    /// the path: a receiver buffers no more frames than its ring holds, and a frame beyond it is
    /// lost and costs a go-back-N retransmission of everything sent after it (at 64 KiB WRITEs over
    /// a veth pair a quarter of all frames went twice). The peer's ring is not in its description;
    /// it runs the same default as ours. Unlimited (as configured) when no ring is involved.
    fn ring_window(&self, peer: &ConnInfo) -> u32 {
        let ours = !self.nic.inner().takes_super_frames();
        if !(ours || peer.needs_single_datagrams) || self.cfg.packet_rx_ring == 0 {
            return u32::MAX;
        }
        let per_qp = self.cfg.packet_rx_ring / self.slots.len().max(1);
        per_qp.clamp(16, u32::MAX as usize) as u32
    }

    /// Queue pair `qp` when it is a connected RC one: the postings' straight path.
    #[inline(always)]
    fn rc_qp(&mut self, qp: usize) -> Option<&mut rc::Qp> {
        match self.slots.get_mut(qp) {
            Some(QpSlot {
                qp: Some(Engine::Rc(q)),
                ..
            }) => Some(q),
            _ => None,
        }
    }

    /// [`Endpoint::post_send`] to a UC or UD queue pair, or one not connected (or none): out of
    /// line, so that an RC posting pays for none of their inlined paths' frame.
    #[inline(never)]
    fn post_send_other(&mut self, qp: usize, wr: &SendRequest) -> Result<()> {
        self.connected(qp)?.post_send(wr)
    }

    /// [`Endpoint::post_recv`] to a UC or UD queue pair, or one not connected (or none), out of
    /// line as [`post_send_other`](Self::post_send_other).
    #[inline(never)]
    fn post_recv_other(&mut self, qp: usize, wr: &RecvRequest) -> Result<()> {
        self.connected(qp)?.post_recv(wr)
    }

    fn connected(&mut self, qp: usize) -> Result<&mut Engine> {
        let count = self.slots.len();
        match self.slots.get_mut(qp) {
            Some(QpSlot { qp: Some(q), .. }) => Ok(q),
            found => Err(not_connected(qp, count, found.is_some())),
        }
    }
}

/// Why queue pair `qp` (of `count`; `exists` when it is one of them) takes no work request. Out of
/// line and cold: its message's formatting would otherwise widen every posting's frame.
#[cold]
#[inline(never)]
fn not_connected(qp: usize, count: usize, exists: bool) -> Error {
    if !exists {
        return Error::InvalidRequest(format!("queue pair {qp} of {count}"));
    }
    Error::InvalidRequest(format!(
        "queue pair {qp} is not connected yet; call connect with the peer's description first"
    ))
}

impl Endpoint for SoftEndpoint {
    fn local_info(&self) -> ConnInfo {
        ConnInfo {
            needs_single_datagrams: !self.nic.inner().takes_super_frames(),
            transport: TransportKind::Soft,
            gid: self.rx.me.gid,
            // The index in the whole table, as -v prints it and -x takes it.
            gid_index: self
                .dev
                .gids()
                .iter()
                .position(|e| e.gid == self.rx.me.gid && e.kind == GidKind::of(self.cfg.version))
                .map(|i| i as u32),
            mac: self.dev.mac,
            addr: self
                .nic
                .inner()
                .local_addr()
                .or_else(|| {
                    self.rx
                        .me
                        .ip
                        .map(|ip| SocketAddr::new(ip, self.cfg.udp_port))
                })
                .map(|a| a.to_string()),
            mtu: self.mtu.bytes(),
            qps: self
                .slots
                .iter()
                .map(|s| QpInfo {
                    qpn: s.qpn,
                    psn: s.psn,
                    rkey: s.keys.rkey,
                    vaddr: s.keys.va,
                    len: s.keys.len,
                    max_rd_atomic: self.cfg.max_rd_atomic,
                })
                .collect(),
            connection: self.cfg.connection,
            qkey: (self.cfg.connection == ConnType::Ud).then_some(self.cfg.qkey),
        }
    }

    fn connect(&mut self, peer: &ConnInfo) -> Result<()> {
        if peer.transport != TransportKind::Soft {
            return Err(SoftError::from(PeerMismatch::Transport(peer.transport)).into());
        }
        if peer.connection != self.cfg.connection {
            let mismatch = PeerMismatch::Connection {
                peer: peer.connection,
                ours: self.cfg.connection,
            };
            return Err(SoftError::from(mismatch).into());
        }
        if peer.qps.len() != self.slots.len() {
            let mismatch = PeerMismatch::QpCount {
                peer: peer.qps.len(),
                ours: self.slots.len(),
            };
            return Err(SoftError::from(mismatch).into());
        }
        let mtu = RoceMtu::from_bytes(peer.mtu.min(self.mtu.bytes()))
            .ok_or(SoftError::Peer(PeerMismatch::Mtu(peer.mtu)))?;
        self.mtu = mtu;
        if peer.needs_single_datagrams && self.nic.inner_mut().stop_gso() {
            self.notes.push(SoftNote::GsoOffForPeer);
        }
        for i in 0..self.slots.len() {
            self.connect_slot(i, peer, &peer.qps[i], mtu)?;
        }
        Ok(())
    }

    fn qp_count(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    fn buffer(&self, qp: usize) -> &[u8] {
        let s = &self.slots[qp];
        let mem = match s.qp.as_ref() {
            Some(q) => q.memory(),
            None => s.mem.as_ref().expect("unconnected QPs keep their memory"),
        };
        mem.buffer(s.buffer)
    }

    #[inline]
    fn buffer_mut(&mut self, qp: usize) -> &mut [u8] {
        let s = &mut self.slots[qp];
        let mem = match s.qp.as_mut() {
            Some(q) => q.memory_mut(),
            None => s.mem.as_mut().expect("unconnected QPs keep their memory"),
        };
        mem.buffer_mut(s.buffer)
    }

    fn post_send(&mut self, qp: usize, wr: &SendRequest) -> Result<()> {
        // An RC queue pair's posting (every RC test's) goes straight on, a tail call without a
        // frame; the other engines' postings, inlined, and the errors needed one for every call.
        // `Qp::post_send` is inlined: its checks and queueing land here, a refusal goes out of line.
        match self.rc_qp(qp) {
            Some(q) => q.post_send(wr),
            None => self.post_send_other(qp, wr),
        }
    }

    fn post_recv(&mut self, qp: usize, wr: &RecvRequest) -> Result<()> {
        // As `post_send`: an RC queue pair's receive goes straight on.
        match self.rc_qp(qp) {
            Some(q) => q.post_recv(wr),
            None => self.post_recv_other(qp, wr),
        }
    }

    fn poll_cq(&mut self, out: &mut [Completion]) -> Result<usize> {
        // A latency test's lone RC queue pair: the tight poll, the rest out of line.
        if self.simple {
            return self.poll_simple(out);
        }
        self.poll_general(out)
    }

    fn failure(&self) -> Option<String> {
        // Rare and after the fact: a look at every queue pair costs nothing the datapath pays.
        self.slots.iter().enumerate().find_map(|(i, s)| {
            let failure = s.qp.as_ref()?.failure()?;
            // Only the connected peer's packets reach a queue pair (`ingress::from_peer`), so
            // what it refused came from (or claimed) that address.
            let from = match s.path.as_ref().and_then(|p| p.addr()) {
                Some(a) => a.to_string(),
                None => s.peer.to_string(),
            };
            Some(format!(
                "queue pair {i} (QPN {:#08x}), whose peer is {from}: {failure}",
                s.qpn
            ))
        })
    }
}
