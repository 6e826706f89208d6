//! Opening the transport the plan names, and what the report needs to know about it.
//!
//! Beyond the [`Endpoint`] contract: its setup notes, counters and the detail of a failed completion.

use super::Error;
use super::notes::Note;
use super::plan::Plan;
use crate::params::{ConnType, Metric, Recovery, RoceVersion, Verb};
use crate::results::RunMarks;
use crate::transport::cm::CmEndpoint;
use crate::transport::qp_counters::QpCounters;
use crate::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use crate::transport::soft::netdev::AddrFamily;
use crate::transport::tcp::{TcpConfig, TcpEndpoint};
use crate::transport::verbs::{VerbsConfig, VerbsEndpoint};
use crate::transport::{self, Access, ConnInfo, Endpoint, probe};
use std::net::IpAddr;

/// What the report needs from a transport beyond [`Endpoint`]: setup notes, counters, error detail.
pub(crate) trait Described: Endpoint {
    /// The header's notes about the transport (what was chosen and why).
    fn notes(&self) -> Vec<Note> {
        Vec::new()
    }
    /// Counters for `-v` (text) and the JSON (value), when the transport keeps any.
    fn counters(&self) -> Option<(String, serde_json::Value)> {
        None
    }
    /// The first failed completion in words, when the transport knows more than the status.
    fn failure_detail(&self) -> Option<String> {
        None
    }
    /// Adjusts to a peer on the other RoCE transport (soft against verbs); returns notes for the header.
    fn adapt_to_peer(&mut self, _peer: &ConnInfo) -> Vec<Note> {
        Vec::new()
    }
    /// Takes the loss recovery the peer asked for out of band (before connecting); a peer that never
    /// says leaves go-back-N.
    fn agree_recovery(&mut self, _peer: Recovery) {}
    /// The deliberate impairment in force (its spec) and the loss recovery in use, for the results;
    /// `None` where the transport has neither.
    fn lossy(&self) -> (Option<String>, Option<Recovery>) {
        (None, None)
    }
    /// The path MTU this endpoint offers the peer, in bytes, where it has one (RoCE).
    fn mtu_offered(&self) -> Option<u32> {
        None
    }
    /// What the packets carry for `--tclass`, `-S`, `--flow_label` (the flags as given, and what
    /// the transport itself put on the wire), where the transport writes the packets (soft).
    fn wire_marks(&self) -> Option<RunMarks> {
        None
    }
    /// UC/UD: messages the transport itself saw arrive whole, when it can count them (soft counts
    /// WRITEs too, which no receive completion shows).
    fn messages_received(&self) -> Option<u64> {
        None
    }
    /// The transport's CM (`-R`), when it has one.
    fn cm(&mut self) -> Option<&mut dyn CmEndpoint> {
        None
    }
    /// Runs `f` while the out-of-band channel may move this endpoint itself (`-R --oob perftest`'s
    /// [`super::comm_link::CommLink`] lends it to its stream); elsewhere just runs `f`.
    fn lend<R>(&mut self, f: impl FnOnce() -> R) -> R {
        f()
    }
}

impl Described for TcpEndpoint {
    /// Each connection's retransmissions (`TCP_INFO`) and their totals.
    fn counters(&self) -> Option<(String, serde_json::Value)> {
        let per_qp = self.qp_counters();
        let (packets, bytes) = per_qp.iter().fold((0, 0), |(p, b), c| {
            (p + c.retransmitted_packets, b + c.retransmitted_bytes)
        });
        let cc = self.congestion_control();
        let text = format!(
            " TCP (TCP_INFO): congestion control {}, retransmitted segments {packets}, bytes {bytes}; ECN marks, CNPs and rates n/a (the kernel's own)\n",
            cc.as_deref().unwrap_or("unknown")
        );
        let mut value = serde_json::json!({
            "retransmitted_packets": packets,
            "retransmitted_bytes": bytes,
        });
        if let (Some(cc), serde_json::Value::Object(m)) = (cc, &mut value) {
            m.insert("congestion_control".into(), cc.into());
        }
        Some(with_per_qp(text, value, &per_qp))
    }
}

/// Queue pairs `-v` lists one by one; the JSON has them all.
const PER_QP_LINES: usize = 16;

/// The counters' text and JSON object with each queue pair's own (`per_qp`) added.
fn with_per_qp(
    mut text: String,
    mut value: serde_json::Value,
    per_qp: &[QpCounters],
) -> (String, serde_json::Value) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    for c in per_qp.iter().take(PER_QP_LINES) {
        text.push_str(&c.line());
        text.push('\n');
    }
    if per_qp.len() > PER_QP_LINES {
        let more = per_qp.len() - PER_QP_LINES;
        text.push_str(&format!(
            " ... {more} more queue pairs (all in --json: test.counters.per_qp)\n"
        ));
    }
    if let (serde_json::Value::Object(m), Ok(list)) = (&mut value, serde_json::to_value(per_qp)) {
        m.insert("per_qp".into(), list);
    }
    (text, value)
}

impl Described for SoftEndpoint {
    fn notes(&self) -> Vec<Note> {
        // The interface's MTU and GID tables are for -v; the header keeps what was chosen.
        self.setup_notes().into_iter().map(Note::Setup).collect()
    }
    fn counters(&self) -> Option<(String, serde_json::Value)> {
        let c = SoftEndpoint::counters(self);
        let v = serde_json::to_value(c).ok()?;
        Some(with_per_qp(c.to_string(), v, &self.qp_counters()))
    }
    fn agree_recovery(&mut self, peer: Recovery) {
        SoftEndpoint::agree_recovery(self, peer);
    }
    fn lossy(&self) -> (Option<String>, Option<Recovery>) {
        (self.impairment().map(|i| i.spec()), Some(self.recovery()))
    }
    fn mtu_offered(&self) -> Option<u32> {
        Some(self.mtu())
    }
    fn wire_marks(&self) -> Option<RunMarks> {
        let c = self.classes();
        let m = self.marks();
        Some(RunMarks {
            tclass: m.tclass,
            sl: m.sl,
            flow_labels: m.flow_labels.clone(),
            data_tclass: Some(c.data.tclass),
            cnp_tclass: Some(c.cnp.tclass),
            priority_tag: c.data.vlan.map(|t| t.pcp),
            so_priority: c.so_priority,
        })
    }
    fn messages_received(&self) -> Option<u64> {
        let c = SoftEndpoint::counters(self);
        (self.connection().is_unreliable()).then_some(c.unreliable.messages_received)
    }
    fn cm(&mut self) -> Option<&mut dyn CmEndpoint> {
        Some(self)
    }
}

impl Described for VerbsEndpoint {
    fn notes(&self) -> Vec<Note> {
        let s = self.setup();
        let mut v = vec![
            format!("verbs device {} port {}", s.device, s.port),
            s.gid_line(),
            format!(
                "active MTU {} bytes, path MTU offered {} bytes",
                s.active_mtu, s.mtu
            ),
        ];
        v.extend(s.notes.iter().cloned());
        v.into_iter().map(Note::Setup).collect()
    }
    fn failure_detail(&self) -> Option<String> {
        VerbsEndpoint::failure_detail(self).map(str::to_string)
    }
    fn mtu_offered(&self) -> Option<u32> {
        Some(self.setup().mtu)
    }
    fn cm(&mut self) -> Option<&mut dyn CmEndpoint> {
        Some(self)
    }
}

/// Receives kept posted on `-R --oob perftest`'s message queue pair: [`super::comm_link`] posts
/// them, and the queue pair is opened deep enough for them.
pub(crate) const COMM_RECV_SLOTS: usize = 4;

/// Queue pairs opened beyond the test's: `-R --oob perftest` carries perftest's messages on one.
pub(crate) fn comm_qps(plan: &Plan) -> usize {
    usize::from(plan.rdma_cm && plan.oob == crate::cli::OobArg::Perftest)
}

/// The error of a transport that could not be set up.
pub(crate) fn setup_error(plan: &Plan, source: transport::Error) -> Error {
    Error::Setup {
        transport: plan.transport,
        source,
    }
}

/// The soft endpoint the plan describes.
pub(crate) fn open_soft(plan: &Plan) -> Result<SoftEndpoint, Error> {
    let d = &plan.device;
    let device = d.device.as_deref().unwrap_or("lo");
    let version = d.roce.unwrap_or(RoceVersion::V2);
    let mut cfg = SoftConfig::new(device, version);
    cfg.io = d.io.unwrap_or(cfg.io);
    cfg.bind = d.bind;
    cfg.family = if d.ipv6 || d.bind.is_some_and(|b| b.is_ipv6()) {
        AddrFamily::Ipv6
    } else {
        AddrFamily::Ipv4
    };
    cfg.gid_index = d.gid_index.map(u32::from);
    cfg.mtu = d.mtu;
    cfg.timeout = d.qp_timeout.unwrap_or(cfg.timeout);
    cfg.gso = !d.no_gso;
    // GRO merges a stream's datagrams; a latency test's come one at a time and only pay for it.
    cfg.gro = plan.test.metric == Metric::Bandwidth;
    cfg.retry_cnt = d.retry_count.unwrap_or(cfg.retry_cnt);
    cfg.impair = d.impair;
    cfg.impair_seed = d.impair_seed;
    cfg.recovery = d.recovery;
    cfg.marks = d.marks.clone();
    cfg.cc = d.cc;
    cfg.cc_params = d.cc_params;
    cfg.events = plan.events;
    cfg.qps = plan.qps as usize + comm_qps(plan);
    cfg.connection = plan.connection;
    // perftest's -R message queue pair is RC whatever -c says.
    cfg.rc_tail = comm_qps(plan);
    if plan.rdma_cm && plan.connection == ConnType::Ud {
        // rdma_cm gives every queue pair of its UDP port space one Q_Key, and says it in SIDR_REP.
        cfg.qkey = crate::transport::cm::RDMA_UDP_QKEY;
    }
    cfg.buffer_len = plan.layout.buffer_len();
    // The drivers never have more than -t sends or rx_depth receives outstanding; keep the engine's
    // defaults as a floor so a sweep's finishing phase never finds a full queue.
    cfg.sq_depth = cfg.sq_depth.max(plan.tx_depth as usize);
    cfg.rq_depth = cfg.rq_depth.max(plan.depths.rx as usize);
    SoftEndpoint::open(cfg).map_err(|e| {
        let mut source: transport::Error = e.into();
        if plan.transport_reason.is_auto()
            && let transport::Error::Unavailable(m) = &mut source
        {
            // The name may have been meant as an RDMA device: say why soft was tried, and what exists.
            let rdma = probe::rdma_devices();
            m.push_str(&format!(
                " ({}; RDMA devices here: {})",
                plan.transport_reason,
                if rdma.is_empty() {
                    "none".to_string()
                } else {
                    rdma.join(", ")
                }
            ));
        }
        setup_error(plan, source)
    })
}

/// The verbs endpoint the plan describes, with the access rights perftest gives each test.
pub(crate) fn open_verbs(plan: &Plan) -> Result<VerbsEndpoint, Error> {
    let access = match plan.test.verb {
        Verb::Send => Access::LOCAL_WRITE,
        Verb::Write => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        Verb::Read => Access::LOCAL_WRITE | Access::REMOTE_READ,
        // perftest's ATOMIC → REMOTE_ATOMIC; the device must execute atomics (checked on open).
        Verb::Atomic => Access::LOCAL_WRITE | Access::REMOTE_ATOMIC,
    };
    let d = &plan.device;
    let defaults = VerbsConfig::default();
    let cfg = VerbsConfig {
        device: d.device.clone(),
        ib_port: d.ib_port.unwrap_or(1),
        gid_index: d.gid_index.map(u32::from),
        roce: d.roce,
        ipv6: d.ipv6,
        qps: plan.qps as usize + comm_qps(plan),
        buf_size: plan.layout.buffer_len(),
        tx_depth: plan.tx_depth.max(1),
        // -R --oob perftest: the message queue pair keeps comm_link's receives posted.
        rx_depth: plan
            .depths
            .rx
            .max(1)
            .max((COMM_RECV_SLOTS * comm_qps(plan)) as u32),
        inline_size: d.inline_size.unwrap_or(0),
        mtu: d.mtu,
        access,
        timeout: d.qp_timeout.unwrap_or(defaults.timeout),
        retry_cnt: d.retry_count.unwrap_or(defaults.retry_cnt),
        connection: plan.connection,
        sl: d.marks.sl_or_default(),
        traffic_class: d.marks.tclass_or_default(),
        flow_labels: d.marks.flow_labels.clone(),
        // perftest's -R message queue pair is RC whatever -c says.
        rc_tail: comm_qps(plan),
        // As on soft: rdma_cm's UDP port space has one Q_Key, which librdmacm's SIDR_REP names.
        qkey: if plan.rdma_cm && plan.connection == ConnType::Ud {
            crate::transport::cm::RDMA_UDP_QKEY
        } else {
            defaults.qkey
        },
        ..defaults
    };
    VerbsEndpoint::open(&cfg).map_err(|e| setup_error(plan, e.into()))
}

/// The TCP baseline's endpoint, its data sockets bound to `bind` (the out-of-band channel's address).
pub(crate) fn open_tcp(plan: &Plan, bind: IpAddr) -> Result<TcpEndpoint, Error> {
    TcpEndpoint::new(TcpConfig {
        role: plan.role,
        qps: plan.qps as usize,
        buf_len: plan.layout.buffer_len(),
        sq_depth: plan.tx_depth as usize,
        rq_depth: plan.depths.rx as usize,
        bind,
        connect_timeout: plan.connect_timeout,
        socket_buffer: None,
        tclass: plan.device.marks.tclass,
        priority: plan.device.marks.sl,
        congestion: plan.device.tcp_congestion.clone(),
        // -e: sleep after the first idle poll rather than spin for a few hundred.
        spin_polls: if plan.events {
            0
        } else {
            transport::tcp::DEFAULT_SPIN_POLLS
        },
    })
    .map_err(|source| setup_error(plan, source))
}
