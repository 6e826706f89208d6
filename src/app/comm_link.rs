//! `-R --oob perftest`: perftest's out-of-band messages on a CM-connected queue pair, one RDMA SEND
//! per message as `ib_*_bw -R` sends them (`rdma_write_data`, `rdma_write_keys`), instead of TCP.
//!
//! The endpoint is opened with one queue pair more than the test's; the last one carries the
//! messages. [`CommLink`] is the endpoint as the session loop sees it: the test's queue pairs only,
//! with the message queue pair's completions taken out of `poll_cq` into a shared inbox.
//! [`CommStream`] is the byte stream perftest's channel reads and writes. While the channel blocks
//! on it, it must move the endpoint itself: [`Described::lend`] hands the endpoint over for the
//! duration of the dialect's exchanges and takes it back, so the two never hold it at once and no
//! buffer slice the drivers took can meet a packet the stream receives.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, ErrorKind};
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::endpoints::{COMM_RECV_SLOTS, Described};
use super::notes::Note;
use crate::oob::perftest::OobStream;
use crate::params::Recovery;
use crate::transport::cm::{CmEndpoint, CmEvent, CmQpParams};
use crate::transport::{
    self, Completion, CompletionOp, CompletionStatus, ConnInfo, Endpoint, RecvRequest, SendOp,
    SendRequest,
};

/// Bytes of one message slot (perftest's largest -R message is its 64-byte key record).
const SLOT: usize = 256;
/// Work request ID of our SENDs (receives carry their slot number).
const SEND_WR: u64 = u64::MAX;
/// How long a SEND may wait for its completion (the peer's RNR retries included).
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// What the link and the stream share.
struct Comm<E> {
    /// The endpoint while it is lent to the stream.
    lent: Option<E>,
    /// The message queue pair.
    qp: usize,
    /// Bytes received and not read yet.
    inbox: VecDeque<u8>,
    /// Completions of the test's queue pairs that arrived while the stream moved the endpoint.
    stash: VecDeque<Completion>,
    /// Our SEND is in flight.
    sending: bool,
    /// The message queue pair failed: why.
    failed: Option<String>,
}

impl<E: Endpoint> Comm<E> {
    /// Takes `c` if it belongs to the message queue pair: its data into the inbox (and the receive
    /// posted again), its SEND done, or its failure noted. False for the test's completions.
    fn absorb(&mut self, ep: &mut E, c: &Completion) -> bool {
        if c.qp as usize != self.qp {
            return false;
        }
        if c.status != CompletionStatus::Success {
            self.failed.get_or_insert_with(|| {
                format!("the out-of-band queue pair failed: {}", c.status.describe())
            });
            return true;
        }
        match c.op {
            CompletionOp::Recv | CompletionOp::RecvWithImm => {
                let slot = c.wr_id as usize;
                let at = slot * SLOT;
                let len = (c.byte_len as usize).min(SLOT);
                self.inbox.extend(&ep.buffer(self.qp)[at..at + len]);
                if let Err(e) = post_slot(ep, self.qp, slot) {
                    self.failed.get_or_insert(e.to_string());
                }
            }
            _ => self.sending = false,
        }
        true
    }

    /// One turn of the lent endpoint: its completions sorted into ours and the test's.
    fn pump(&mut self) -> io::Result<()> {
        let Some(mut ep) = self.lent.take() else {
            return Err(io::Error::new(
                ErrorKind::WouldBlock,
                "the endpoint is busy with the data path",
            ));
        };
        let mut comps = [Completion::EMPTY; 16];
        let out = ep.poll_cq(&mut comps);
        if let Ok(n) = out {
            for c in &comps[..n] {
                if !self.absorb(&mut ep, c) {
                    self.stash.push_back(*c);
                }
            }
        }
        self.lent = Some(ep);
        out.map(|_| ()).map_err(io::Error::other)
    }
}

/// Posts the receive of slot `slot` on the message queue pair.
fn post_slot<E: Endpoint>(ep: &mut E, qp: usize, slot: usize) -> transport::Result<()> {
    ep.post_recv(
        qp,
        &RecvRequest {
            wr_id: slot as u64,
            offset: (slot * SLOT) as u64,
            len: SLOT as u32,
        },
    )
}

/// The endpoint with its message queue pair hidden: what the session loop and the drivers use.
pub(crate) struct CommLink<E> {
    ep: Option<E>,
    shared: Rc<RefCell<Comm<E>>>,
    /// The test's queue pairs (the message queue pair is the next index).
    qps: usize,
}

/// The byte stream over the message queue pair, for perftest's channel.
pub(crate) struct CommStream<E> {
    shared: Rc<RefCell<Comm<E>>>,
    read_timeout: Option<Duration>,
    nonblocking: bool,
}

/// Wraps `ep`, whose queue pair `qps` (the last) is connected to the peer's message queue pair, and
/// posts its receives.
pub(crate) fn link<E: Described>(
    mut ep: E,
    qps: usize,
) -> transport::Result<(CommLink<E>, CommStream<E>)> {
    for slot in 0..COMM_RECV_SLOTS {
        post_slot(&mut ep, qps, slot).map_err(|e| {
            transport::Error::Connection(format!(
                "posting receive {slot} of {COMM_RECV_SLOTS} on the out-of-band queue pair: {e}"
            ))
        })?;
    }
    let shared = Rc::new(RefCell::new(Comm {
        lent: None,
        qp: qps,
        inbox: VecDeque::new(),
        stash: VecDeque::new(),
        sending: false,
        failed: None,
    }));
    let stream = CommStream {
        shared: Rc::clone(&shared),
        read_timeout: None,
        nonblocking: false,
    };
    Ok((
        CommLink {
            ep: Some(ep),
            shared,
            qps,
        },
        stream,
    ))
}

impl<E> CommLink<E> {
    fn ep(&self) -> &E {
        self.ep
            .as_ref()
            .expect("the endpoint is home outside lend()")
    }
    fn ep_mut(&mut self) -> &mut E {
        self.ep
            .as_mut()
            .expect("the endpoint is home outside lend()")
    }
}

impl<E: Endpoint> Endpoint for CommLink<E> {
    fn local_info(&self) -> ConnInfo {
        let mut i = self.ep().local_info();
        i.qps.truncate(self.qps);
        i
    }
    fn connect(&mut self, peer: &ConnInfo) -> transport::Result<()> {
        self.ep_mut().connect(peer)
    }
    fn qp_count(&self) -> usize {
        self.qps
    }
    fn buffer(&self, qp: usize) -> &[u8] {
        self.ep().buffer(qp)
    }
    fn buffer_mut(&mut self, qp: usize) -> &mut [u8] {
        self.ep_mut().buffer_mut(qp)
    }
    fn peek(&self, qp: usize, offset: usize) -> u8 {
        self.ep().peek(qp, offset)
    }
    fn post_send(&mut self, qp: usize, wr: &SendRequest) -> transport::Result<()> {
        self.ep_mut().post_send(qp, wr)
    }
    fn post_recv(&mut self, qp: usize, wr: &RecvRequest) -> transport::Result<()> {
        self.ep_mut().post_recv(qp, wr)
    }
    fn poll_cq(&mut self, out: &mut [Completion]) -> transport::Result<usize> {
        let ep = self
            .ep
            .as_mut()
            .expect("the endpoint is home outside lend()");
        let mut comm = self.shared.borrow_mut();
        let mut n = 0;
        while n < out.len() {
            match comm.stash.pop_front() {
                Some(c) => {
                    out[n] = c;
                    n += 1;
                }
                None => break,
            }
        }
        let got = ep.poll_cq(&mut out[n..])?;
        let mut kept = n;
        for i in n..n + got {
            let c = out[i];
            if !comm.absorb(ep, &c) {
                out[kept] = c;
                kept += 1;
            }
        }
        Ok(kept)
    }
}

impl<E: Described> Described for CommLink<E> {
    fn notes(&self) -> Vec<Note> {
        self.ep().notes()
    }
    fn counters(&self) -> Option<(String, serde_json::Value)> {
        self.ep().counters()
    }
    fn failure_detail(&self) -> Option<String> {
        self.ep().failure_detail()
    }
    fn adapt_to_peer(&mut self, peer: &ConnInfo) -> Vec<Note> {
        self.ep_mut().adapt_to_peer(peer)
    }
    fn agree_recovery(&mut self, peer: Recovery) {
        self.ep_mut().agree_recovery(peer);
    }
    fn lossy(&self) -> (Option<String>, Option<Recovery>) {
        self.ep().lossy()
    }
    fn wire_marks(&self) -> Option<crate::results::RunMarks> {
        self.ep().wire_marks()
    }
    fn cm(&mut self) -> Option<&mut dyn CmEndpoint> {
        Some(self)
    }
    fn lend<R>(&mut self, f: impl FnOnce() -> R) -> R {
        self.shared.borrow_mut().lent = self.ep.take();
        let r = f();
        self.ep = self.shared.borrow_mut().lent.take();
        r
    }
}

/// The inner endpoint's CM, or the error of a transport without one.
fn inner_cm<E: Described>(l: &mut CommLink<E>) -> transport::Result<&mut dyn CmEndpoint> {
    l.ep_mut()
        .cm()
        .ok_or_else(|| transport::Error::Unavailable("this transport has no CM".into()))
}

impl<E: Described> CmEndpoint for CommLink<E> {
    fn cm_listen(&mut self, port: u16) -> transport::Result<()> {
        inner_cm(self)?.cm_listen(port)
    }
    fn cm_connect(
        &mut self,
        qp: usize,
        to: std::net::SocketAddr,
        params: &CmQpParams,
        private_data: &[u8],
    ) -> transport::Result<()> {
        inner_cm(self)?.cm_connect(qp, to, params, private_data)
    }
    fn cm_accept(&mut self, req: u32, qp: usize, params: &CmQpParams) -> transport::Result<()> {
        inner_cm(self)?.cm_accept(req, qp, params)
    }
    fn cm_reject(&mut self, req: u32) -> transport::Result<()> {
        inner_cm(self)?.cm_reject(req)
    }
    fn cm_disconnect(&mut self, qp: usize) -> transport::Result<()> {
        inner_cm(self)?.cm_disconnect(qp)
    }
    fn cm_ud_peer(&mut self, qp: usize, qpn: u32) -> transport::Result<()> {
        inner_cm(self)?.cm_ud_peer(qp, qpn)
    }
    fn cm_poll(&mut self) -> transport::Result<Option<CmEvent>> {
        inner_cm(self)?.cm_poll()
    }
}

impl<E: Endpoint> io::Read for CommStream<E> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let deadline = self.read_timeout.map(|t| Instant::now() + t);
        loop {
            let mut c = self.shared.borrow_mut();
            if !c.inbox.is_empty() {
                let n = buf.len().min(c.inbox.len());
                for (b, v) in buf.iter_mut().zip(c.inbox.drain(..n)) {
                    *b = v;
                }
                return Ok(n);
            }
            if let Some(why) = &c.failed {
                return Err(io::Error::new(ErrorKind::ConnectionReset, why.clone()));
            }
            if c.lent.is_none() || self.nonblocking {
                // Not lent: the data path polls the endpoint and fills the inbox; nothing yet.
                let _ = c.pump();
                if c.inbox.is_empty() {
                    return Err(ErrorKind::WouldBlock.into());
                }
                continue;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(ErrorKind::TimedOut.into());
            }
            c.pump()?;
        }
    }
}

impl<E: Endpoint> io::Write for CommStream<E> {
    /// One RDMA SEND per call (at most one slot), completed before it returns, as perftest's
    /// `rdma_write_data` does.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(SLOT);
        let mut c = self.shared.borrow_mut();
        let deadline = Instant::now() + SEND_TIMEOUT;
        let wait = |c: &mut Comm<E>| -> io::Result<()> {
            while c.sending && c.failed.is_none() {
                if Instant::now() >= deadline {
                    return Err(io::Error::new(
                        ErrorKind::TimedOut,
                        "the peer never acknowledged our out-of-band SEND",
                    ));
                }
                c.pump()?;
            }
            match &c.failed {
                Some(why) => Err(io::Error::new(ErrorKind::ConnectionReset, why.clone())),
                None => Ok(()),
            }
        };
        wait(&mut c)?;
        let qp = c.qp;
        let Some(ep) = c.lent.as_mut() else {
            return Err(io::Error::other(
                "an out-of-band SEND while the data path holds the endpoint",
            ));
        };
        let at = COMM_RECV_SLOTS * SLOT;
        ep.buffer_mut(qp)[at..at + n].copy_from_slice(&buf[..n]);
        let wr = SendRequest {
            wr_id: SEND_WR,
            op: SendOp::Send,
            offset: at as u64,
            len: n as u32,
            remote: None,
            signaled: true,
            inline: false,
        };
        ep.post_send(qp, &wr).map_err(io::Error::other)?;
        c.sending = true;
        wait(&mut c)?;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<E: Endpoint> OobStream for CommStream<E> {
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.read_timeout = timeout;
        Ok(())
    }
    fn set_nonblocking(&mut self, nonblocking: bool) -> io::Result<()> {
        self.nonblocking = nonblocking;
        Ok(())
    }
    /// perftest -R has no half-close: the end is the CM's disconnection.
    fn shutdown_write(&mut self) -> io::Result<()> {
        Ok(())
    }
}
