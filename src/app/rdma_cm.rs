//! `-R`: queue pairs connected through the CM (rdma_cm's REQ / REP / RTU) instead of from the
//! out-of-band description. The client names the server by IP address and `-p` (the service ID's
//! port); the server listens there and accepts each request onto a queue pair.
//!
//! A client whose request finds no listener yet (REJ "invalid service ID") or no answer at all tries
//! again until `--connect-timeout` is up, as perftest's `rdma_cm_client_connection` retries; any
//! other REJ ends the setup with its reason.

use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::time::{Duration, Instant};

mod hello;

use super::Error;
use super::endpoints::Described;
use super::notes::Note;
use super::plan::Plan;
use crate::params::{ConnType, Role, TransportKind};
use crate::transport::ConnInfo;
use crate::transport::cm::{CmEndpoint, CmEvent, CmPeer, CmQpParams, RejectReason};

/// How long a client waits before asking again after a REJ "invalid service ID".
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// How long the end of a `-R` run waits for the peer to disconnect first.
const PEER_DREQ_GRACE: Duration = Duration::from_secs(1);
/// How long the end of a `-R` run waits for every data queue pair to be disconnected.
const DISCONNECT_WAIT: Duration = Duration::from_secs(6);

/// Why the CM could not connect the queue pairs (exit 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CmSetupError {
    /// The transport cannot connect through the CM.
    #[error("-R: the {transport} transport {why}")]
    Unsupported {
        /// The transport.
        transport: TransportKind,
        /// Why not, and what to do.
        why: String,
    },
    /// The peer's CM rejected our request.
    #[error("-R: {peer} rejected the connection request of queue pair {qp}: {reason}; {hint}")]
    Rejected {
        /// Whom we asked.
        peer: SocketAddr,
        /// Our queue pair.
        qp: usize,
        /// The REJ's reason.
        reason: RejectReason,
        /// What to check.
        hint: &'static str,
    },
    /// The peer never answered, or never listened, within the connect timeout.
    #[error(
        "-R: no CM connection to {peer} for queue pair {qp} within {secs} s ({last}); is the server running with -R on that address, with the same -p, and is the address on its RDMA interface? (--connect-timeout sets this limit)"
    )]
    Unanswered {
        /// Whom we asked.
        peer: SocketAddr,
        /// Our queue pair.
        qp: usize,
        /// The limit.
        secs: u64,
        /// The last thing that happened.
        last: String,
    },
    /// As server: fewer requests came than queue pairs wait for them.
    #[error(
        "-R: {got} of {want} connection requests reached port {port} within {secs} s; does the client run with -R, the same -q and -p? (--connect-timeout sets this limit)"
    )]
    TooFewRequests {
        /// The port listened on.
        port: u16,
        /// Requests accepted.
        got: usize,
        /// Queue pairs.
        want: usize,
        /// The limit.
        secs: u64,
    },
    /// The CM's answer contradicts what the peer said out of band.
    #[error(
        "-R: the CM connected queue pair {qp} to the peer's QPN {cm:#x}, but the peer described QPN {oob:#x} out of band"
    )]
    QpnMismatch {
        /// Our queue pair.
        qp: usize,
        /// The QPN in the CM's REQ or REP.
        cm: u32,
        /// The QPN of the peer's out-of-band description.
        oob: u32,
    },
    /// `-R -c UD` in perftest's dialect, server: the client's first datagram (its QPN) never came.
    #[error(
        "-R -c UD: no first datagram from the client on queue pair {qp} within {secs} s (perftest's client sends its QPN that way after the SIDR_REP, for latency tests and -b); does the client run the same test, with -c UD and the same -q? (--connect-timeout sets this limit)"
    )]
    NoUdHello {
        /// Our queue pair.
        qp: usize,
        /// The limit.
        secs: u64,
    },
    /// The transport failed while connecting.
    #[error("-R: {0}")]
    Transport(#[from] crate::transport::Error),
}

/// What our queue pairs ask for in the CM exchange: `-u`, `--retry_count`, 16 outstanding READs
/// each way (capped by the peer's answer), RNR retries forever (as perftest's comm connection).
pub(crate) fn params(plan: &Plan) -> CmQpParams {
    CmQpParams {
        responder_resources: 16,
        initiator_depth: 16,
        retry_count: plan.device.retry_count.unwrap_or(7),
        rnr_retry_count: 7,
        ack_timeout: plan.device.qp_timeout.unwrap_or(14),
    }
}

/// The transport's CM, or why it has none.
fn cm_of<'e, E: Described>(plan: &Plan, ep: &'e mut E) -> Result<&'e mut dyn CmEndpoint, Error> {
    ep.cm().ok_or_else(|| {
        Error::RdmaCm(CmSetupError::Unsupported {
            transport: plan.transport,
            why: "has no CM; -R needs --transport soft or verbs".into(),
        })
    })
}

/// Connects queue pairs `qps` through the CM: as client to `server` (port `-p`), as server by
/// listening on `-p`. `expect` (the peer's QPNs from its out-of-band description, per queue pair)
/// pairs each request with its queue pair and is checked against the CM's answers; without it,
/// requests are accepted onto the queue pairs in the order they come. `wait`: how long to wait for
/// the peer (`None`: forever, a server waiting for its first client). `hello`: UD queue pairs in
/// perftest's dialect whose requester tells its QPN in a first datagram ([`hello`]). Returns each
/// queue pair's peer.
pub(crate) fn connect<E: Described>(
    plan: &Plan,
    ep: &mut E,
    qps: Range<usize>,
    server: Option<IpAddr>,
    expect: Option<&[u32]>,
    wait: Option<Duration>,
    hello: bool,
) -> Result<Vec<CmPeer>, Error> {
    let p = params(plan);
    let port = plan.port;
    let deadline = wait.map(|w| Instant::now() + w);
    let secs = wait.map_or(0, |w| w.as_secs());
    let n = qps.len();
    let mut peers: Vec<Option<CmPeer>> = vec![None; n];
    let cm_error = |e| Error::RdmaCm(CmSetupError::Transport(e));
    match (plan.role, server) {
        (Role::Client, Some(ip)) => {
            let to = SocketAddr::new(ip, port);
            for qp in qps.clone() {
                cm_of(plan, ep)?
                    .cm_connect(qp, to, &p, &[])
                    .map_err(cm_error)?;
            }
            let mut retry_at: Vec<Option<Instant>> = vec![None; n];
            let mut last = "no answer yet".to_string();
            while peers.iter().any(Option::is_none) {
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    let qp = qps.start + peers.iter().position(Option::is_none).unwrap_or(0);
                    return Err(Error::RdmaCm(CmSetupError::Unanswered {
                        peer: to,
                        qp,
                        secs,
                        last,
                    }));
                }
                for (k, at) in retry_at.iter_mut().enumerate() {
                    if at.is_some_and(|t| now >= t) {
                        *at = None;
                        cm_of(plan, ep)?
                            .cm_connect(qps.start + k, to, &p, &[])
                            .map_err(cm_error)?;
                    }
                }
                match cm_of(plan, ep)?.cm_poll().map_err(cm_error)? {
                    Some(CmEvent::Established { qp, peer }) if qps.contains(&qp) => {
                        // perftest's server waits for this datagram before it takes the next request.
                        if hello && peers[qp - qps.start].is_none() {
                            hello::send(ep, qp).map_err(cm_error)?;
                        }
                        peers[qp - qps.start] = Some(peer);
                    }
                    Some(CmEvent::Rejected { qp, reason }) if qps.contains(&qp) => {
                        if reason != RejectReason::InvalidServiceId {
                            return Err(Error::RdmaCm(CmSetupError::Rejected {
                                peer: to,
                                qp,
                                reason,
                                hint: reject_hint(reason),
                            }));
                        }
                        // Nobody listens there yet: ask again shortly.
                        last = format!("the last answer was a REJ {reason}");
                        retry_at[qp - qps.start] = Some(now + RETRY_PAUSE);
                    }
                    Some(CmEvent::Unanswered { qp, detail }) if qps.contains(&qp) => {
                        last = detail;
                        retry_at[qp - qps.start] = Some(now);
                    }
                    _ => {}
                }
            }
        }
        _ => {
            cm_of(plan, ep)?.cm_listen(port).map_err(cm_error)?;
            let mut next = 0;
            while peers.iter().any(Option::is_none) {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(Error::RdmaCm(CmSetupError::TooFewRequests {
                        port,
                        got: peers.iter().filter(|p| p.is_some()).count(),
                        want: n,
                        secs,
                    }));
                }
                let cm = cm_of(plan, ep)?;
                match cm.cm_poll().map_err(cm_error)? {
                    Some(CmEvent::Request { req, peer_qpn, .. }) => {
                        let slot = match expect {
                            Some(qpns) => qpns.iter().position(|&q| q == peer_qpn),
                            None if next < n => Some(next),
                            None => None,
                        };
                        match slot {
                            Some(k) => {
                                next += 1;
                                let qp = qps.start + k;
                                // The requester's first datagram follows its SIDR_REP at once: post
                                // its receive before the SIDR_REP leaves where the queue pair takes
                                // one already (verbs, in INIT), else right after (soft).
                                let early = hello && hello::expect(ep, qp).is_ok();
                                let cm = cm_of(plan, ep)?;
                                cm.cm_accept(req, qp, &p).map_err(cm_error)?;
                                if hello && !early {
                                    hello::expect(ep, qp).map_err(cm_error)?;
                                }
                            }
                            // Not one of the peer's queue pairs (or one too many): refuse it.
                            None => cm.cm_reject(req).map_err(cm_error)?,
                        }
                    }
                    Some(CmEvent::Established { qp, peer }) if qps.contains(&qp) => {
                        peers[qp - qps.start] = Some(peer);
                    }
                    _ => {}
                }
            }
        }
    }
    let mut peers: Vec<CmPeer> = peers.into_iter().flatten().collect();
    if hello && plan.role != Role::Client {
        let limit = plan.connect_timeout;
        let learnt = hello::receive(ep, qps.clone(), limit).map_err(|e| match e {
            hello::Wait::Missing(qp) => Error::RdmaCm(CmSetupError::NoUdHello {
                qp,
                secs: limit.as_secs(),
            }),
            hello::Wait::Transport(e) => cm_error(e),
        })?;
        for (k, qpn) in learnt.into_iter().enumerate() {
            cm_of(plan, ep)?
                .cm_ud_peer(qps.start + k, qpn)
                .map_err(cm_error)?;
            peers[k].qpn = qpn;
        }
    }
    if let Some(qpns) = expect {
        for (k, (peer, &oob)) in peers.iter().zip(qpns).enumerate() {
            if peer.qpn != oob {
                return Err(Error::RdmaCm(CmSetupError::QpnMismatch {
                    qp: qps.start + k,
                    cm: peer.qpn,
                    oob,
                }));
            }
        }
    }
    Ok(peers)
}

/// `-R -c UD`, server side: SIDR has no RTU, so nothing tells this side that its SIDR_REP arrived.
/// Until the peer shows it has moved on (`moved_on`: its next out-of-band message is waiting), the
/// CM keeps running, so that a requester whose SIDR_REP was lost gets it again when it asks again,
/// instead of waiting out its connect timeout while this side waits at the barrier. Gives up
/// quietly after `--connect-timeout`: what comes next reports a peer that never came.
pub(crate) fn answer_repeats<E: Described>(
    plan: &Plan,
    ep: &mut E,
    moved_on: &mut dyn FnMut() -> Result<bool, Error>,
) -> Result<(), Error> {
    let deadline = Instant::now() + plan.connect_timeout;
    let cm = cm_of(plan, ep)?;
    while !moved_on()? && Instant::now() < deadline {
        // A UD service has no connection events left to act on: only the repeats matter.
        cm.cm_poll()
            .map_err(|e| Error::RdmaCm(CmSetupError::Transport(e)))?;
    }
    Ok(())
}

/// The peer's queue pairs as the CM agreed them (QPNs, PSNs, MTU) in `peer`, and the header's note.
/// QPN 0: a UD requester the CM told nothing of (perftest's SIDR_REQ carries no QPN, and its send_bw
/// client sends no first datagram); its out-of-band QPN stays, and the note says so.
pub(crate) fn adopt(plan: &Plan, peer: &mut ConnInfo, cm: &[CmPeer], notes: &mut Vec<Note>) {
    for (q, p) in peer.qps.iter_mut().zip(cm) {
        if p.qpn != 0 {
            q.qpn = p.qpn;
        }
        q.psn = p.psn;
    }
    if let Some(p) = cm.first() {
        peer.mtu = p.mtu;
    }
    let described: Vec<String> = cm
        .iter()
        .map(|p| match p.qpn {
            0 => "QPN not told (its SIDR_REQ carries none)".to_string(),
            qpn => format!("QPN {qpn:#x} PSN {:#x}", p.psn),
        })
        .collect();
    notes.push(Note::RdmaCm {
        port: plan.port,
        resolved: plan.connection == ConnType::Ud,
        peers: format!(
            "{} at {}",
            described.join(", "),
            cm.first().map_or(String::new(), |p| p.ip.to_string())
        ),
    });
}

/// `-R` at the end of perftest's dialect: the data queue pairs disconnected through the CM, where
/// perftest's `destroy_ctx` does. First [`PEER_DREQ_GRACE`] for the peer's DREQs (perftest 6.06's
/// client sends them, 6.29's server; the transport answers them and keeps acknowledging the last
/// operations meanwhile), then our DREQs for the rest, and at most [`DISCONNECT_WAIT`] in all. Never
/// fails the run: its figures are in; a peer that does not answer is said with -v.
pub(crate) fn disconnect<E: Described>(plan: &Plan, ep: &mut E, qps: Range<usize>) {
    let Some(cm) = ep.cm() else {
        return;
    };
    let start = Instant::now();
    let mut down = vec![false; qps.len()];
    let mut asked = false;
    while down.iter().any(|d| !d) && start.elapsed() < DISCONNECT_WAIT {
        if !asked && start.elapsed() >= PEER_DREQ_GRACE {
            asked = true;
            for (k, _) in down.iter().enumerate().filter(|(_, d)| !**d) {
                let _ = cm.cm_disconnect(qps.start + k);
            }
        }
        match cm.cm_poll() {
            Ok(Some(CmEvent::Disconnected { qp })) if qps.contains(&qp) => {
                down[qp - qps.start] = true;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let left = down.iter().filter(|d| !**d).count();
    plan.output.verbose(|| {
        format!(
            "CM disconnection: {} of {} queue pairs down in {:.1} s",
            down.len() - left,
            down.len(),
            start.elapsed().as_secs_f64()
        )
    });
}

/// What to check after a REJ of this reason.
fn reject_hint(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::ConsumerDefined => {
            "the server's application refused it: does it run the same test with the same -q?"
        }
        RejectReason::StaleConnection => {
            "the server still knows this queue pair from an earlier connection; start the client again"
        }
        RejectReason::InvalidGid => {
            "the server does not own the address asked for; give the address of its RDMA interface"
        }
        RejectReason::InvalidMtu => "give both sides the same -m",
        _ => "check that both sides run the same test with the same options",
    }
}
