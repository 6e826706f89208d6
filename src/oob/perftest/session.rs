//! Walks a script over a channel: performs every exchange itself and stops where the data path must act.
//!
//! The driver loop (a bench driver, or a test) is:
//! ```text
//! loop {
//!     match session.next()? {
//!         Action::NeedLocalKeys { buffer_len } => { create the endpoint; session.set_local_keys(..) }
//!         Action::Connect => endpoint.connect(&session.peer().unwrap().conn_info(max_size, kind))?,
//!         Action::PostReceives { size } => post receives for `size`,
//!         Action::Run { size } => { run; session.set_report(report) for BW tests }
//!         Action::AwaitPeer => while !session.poll_peer()? { endpoint.poll_cq(..)?; },
//!         Action::Finished => break,
//!     }
//! }
//! ```
//! `AwaitPeer` comes where the peer reaches the next exchange only after a test run; a software transport
//! must keep answering the peer meanwhile. A driver that need not (verbs) may call `next()` right away,
//! which then blocks (up to the run timeout).

use super::binkey;
use super::channel::{OobStream, PerftestChannel};
use super::key::{KEY_LEN_GID, KeyRecord, check_gid_families};
use super::msg::{self, BwReport, PeerVersion, REPORT_FIELD_LEN, REPORT_FIELDS, SysData};
use super::script::{ScriptOptions, Step, script};
use super::{PerftestError, Result};
use crate::oob::RunLength;
use crate::params::{Role, TestKind, TransportKind};
use crate::transport::ConnInfo;
use std::time::Duration;

/// What the driver must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Give our key records now ([`Session::set_local_keys`]); each QP's buffer must cover `buffer_len`
    /// bytes from its advertised vaddr (perftest addresses `max(size, page size)` there).
    NeedLocalKeys {
        /// Bytes the peer may address at each vaddr.
        buffer_len: u64,
    },
    /// Connect the QPs to [`Session::peer`] (perftest moves its QPs to RTR/RTS here).
    Connect,
    /// Post the receives for a run of `size` bytes (the peer starts sending after the next barrier).
    PostReceives {
        /// Message size of the coming run.
        size: u64,
    },
    /// Run this side's part of the test at `size` bytes; BW tests then call [`Session::set_report`].
    Run {
        /// Message size.
        size: u64,
    },
    /// The peer is still running: keep the data path alive and call [`Session::poll_peer`] until true.
    AwaitPeer,
    /// `-R`: connect the data queue pairs through the CM now (the client asks, the server listens).
    CmConnect,
    /// `-R`: the exchange is over; disconnect the data queue pairs through the CM (DREQ / DREP).
    CmDisconnect,
    /// The dialect is over; the connection can be closed.
    Finished,
}

/// What the peer told us, and what both sides agreed on.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerSetup {
    /// The peer's announced version.
    pub version: PeerVersion,
    /// Page size and cache line both sides use (the larger of each).
    pub sys: SysData,
    /// Path MTU both sides use, in bytes (the smaller).
    pub mtu: u32,
    /// One key record per QP, from the first key round.
    pub keys: Vec<KeyRecord>,
}

impl PeerSetup {
    /// The peer as our `transport` takes it; `max_size` is the largest message of the test.
    pub fn conn_info(&self, max_size: u64, transport: TransportKind) -> ConnInfo {
        KeyRecord::to_conn_info(
            &self.keys,
            max_size.max(u64::from(self.sys.page_size)),
            self.mtu,
            transport,
        )
    }
}

/// What an `AwaitPeer` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaiting {
    /// The first message of the current step, of this size (our half already sent if we are client).
    Message(usize),
    /// The peer closing the connection.
    Close,
}

/// What a session is for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionConfig {
    /// The test.
    pub test: TestKind,
    /// Our role (the client writes first).
    pub role: Role,
    /// Options the exchange order depends on.
    pub opts: ScriptOptions,
    /// Iterations (`-n`), checked against the peer's report.
    pub iters: u64,
    /// Our page size and cache line.
    pub sys: SysData,
    /// Our largest path MTU, in bytes.
    pub mtu: u32,
}

/// One side of a perftest-dialect session.
pub struct Session<S: OobStream> {
    chan: PerftestChannel<S>,
    steps: Vec<Step>,
    pos: usize,
    opts: ScriptOptions,
    iters: u64,
    local_sys: SysData,
    local_mtu: u32,
    local_keys: Option<Vec<KeyRecord>>,
    version: Option<PeerVersion>,
    sys: Option<SysData>,
    mtu: Option<u32>,
    peer: Option<PeerSetup>,
    awaiting: Option<Awaiting>,
    ready: bool,
    report: Option<BwReport>,
    peer_report: Option<BwReport>,
    last_run_size: Option<u64>,
    /// `-R`: the binary key record's length, once the peer's version says which.
    bin_key_len: Option<usize>,
    /// Our run length, said to a roceperf peer after the version's NUL ([`Session::announce_run`]).
    run: Option<RunLength>,
}

impl<S: OobStream> Session<S> {
    /// A session over `chan` (whose write-first side must match `cfg.role`); `keys` are our key
    /// records if already known, else the session asks for them with [`Action::NeedLocalKeys`].
    pub fn new(
        chan: PerftestChannel<S>,
        cfg: &SessionConfig,
        keys: Option<Vec<KeyRecord>>,
    ) -> Result<Self> {
        if chan.is_client() != (cfg.role == Role::Client) {
            return Err(PerftestError::Misuse(
                "the channel's write-first side must be the client".into(),
            ));
        }
        let steps = script(cfg.test, cfg.role, &cfg.opts)?;
        let mut s = Session {
            chan,
            steps,
            pos: 0,
            opts: cfg.opts,
            iters: cfg.iters,
            local_sys: cfg.sys,
            local_mtu: cfg.mtu,
            local_keys: None,
            version: None,
            sys: None,
            mtu: None,
            peer: None,
            awaiting: None,
            ready: false,
            report: None,
            peer_report: None,
            last_run_size: None,
            bin_key_len: None,
            run: None,
        };
        if let Some(k) = keys {
            s.set_local_keys(k)?;
        }
        Ok(s)
    }

    /// Says our run length after the version's NUL, where perftest does not look and a roceperf
    /// peer does: two roceperf sides that run another `-n` or `-D` then stop at the version exchange,
    /// naming both. Before the first [`Session::next`].
    pub(crate) fn announce_run(&mut self, run: RunLength) {
        self.run = Some(run);
    }

    /// The script this session follows.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Our key records, one per QP (QP 0's doubles as the barrier record).
    pub fn set_local_keys(&mut self, keys: Vec<KeyRecord>) -> Result<()> {
        if keys.len() != self.opts.num_qps {
            return Err(PerftestError::Misuse(format!(
                "{} key records for {} QPs",
                keys.len(),
                self.opts.num_qps
            )));
        }
        self.local_keys = Some(keys);
        Ok(())
    }

    /// Our report for the next report exchange (BW tests, after the run).
    pub fn set_report(&mut self, report: BwReport) {
        self.report = Some(report);
    }

    /// The peer's setup, once the first key round is done.
    pub fn peer(&self) -> Option<&PeerSetup> {
        self.peer.as_ref()
    }

    /// The peer's last meaningful report: the client's, seen by a unidirectional server, or the other
    /// direction's in a bidirectional test. `None` where perftest sends an uninitialised one.
    pub fn peer_report(&self) -> Option<BwReport> {
        self.peer_report
    }

    /// The channel (e.g. its recorded messages).
    pub fn channel(&self) -> &PerftestChannel<S> {
        &self.chan
    }

    /// Non-blocking check during [`Action::AwaitPeer`]: true once the peer has arrived.
    pub fn poll_peer(&mut self) -> Result<bool> {
        let step = self.steps.get(self.pos).copied();
        let name = step.map(|s| s.name()).unwrap_or("end");
        self.ready = match self.awaiting {
            Some(Awaiting::Message(n)) => self.chan.poll_ready(name, n)?,
            Some(Awaiting::Close) => self.chan.poll_closed(name)?,
            None => true,
        };
        Ok(self.ready)
    }

    /// Performs exchanges up to the next local action and returns it.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Action> {
        while let Some(&step) = self.steps.get(self.pos) {
            let name = step.name();
            match step {
                Step::Version => {
                    let mut b = [0u8; msg::VERSION_LEN];
                    let mine = match self.run {
                        Some(run) => msg::encode_version_with(run),
                        None => msg::encode_version(),
                    };
                    match self.chan.exchange(name, &mine, &mut b) {
                        Err(e @ PerftestError::RoceperfPeer) => {
                            // A roceperf-dialect client waits for the server's hello: our version
                            // block tells it, in its own words, that this side speaks perftest's.
                            if !self.chan.is_client() {
                                let _ = self.chan.send(name, &mine);
                            }
                            return Err(e);
                        }
                        other => other?,
                    }
                    let version = PeerVersion::parse(&b)?;
                    if let (Some(ours), Some(theirs)) = (self.run, version.run)
                        && ours != theirs
                    {
                        return Err(PerftestError::RunLength {
                            ours: ours.to_string(),
                            theirs: theirs.to_string(),
                            hint: RunLength::hint(ours, theirs),
                        });
                    }
                    if self.opts.rdma_cm {
                        self.bin_key_len = Some(binkey::bin_key_len(&version));
                    }
                    self.version = Some(version);
                }
                Step::PageSize => {
                    let mut b = [0u8; msg::SYSDATA_LEN];
                    let mine = msg::encode_sysdata(self.local_sys.page_size);
                    self.chan.exchange(name, &mine, &mut b)?;
                    let page_size = msg::parse_sysdata(name, "page size", &b)?;
                    self.sys = Some(SysData {
                        page_size: page_size.max(self.local_sys.page_size),
                        cache_line: self.local_sys.cache_line,
                    });
                }
                Step::CacheLine => {
                    let mut b = [0u8; msg::SYSDATA_LEN];
                    let mine = msg::encode_sysdata(self.local_sys.cache_line);
                    self.chan.exchange(name, &mine, &mut b)?;
                    let line = msg::parse_sysdata(name, "cache line size", &b)?;
                    let sys = self.sys.get_or_insert(self.local_sys);
                    sys.cache_line = sys.cache_line.max(line);
                }
                Step::Mtu => {
                    let mut b = [0u8; msg::MTU_LEN];
                    self.chan
                        .exchange(name, &msg::encode_mtu(self.local_mtu), &mut b)?;
                    let theirs = msg::parse_mtu(name, &b)?;
                    let ours = msg::mtu_bytes(msg::mtu_enum(self.local_mtu));
                    self.mtu = Some(ours.min(theirs));
                }
                Step::Keys | Step::KeysAgain | Step::Barrier { .. }
                    if self.local_keys.is_none() =>
                {
                    let page = self.sys.unwrap_or(self.local_sys).page_size;
                    return Ok(Action::NeedLocalKeys {
                        buffer_len: self.opts.max_size().max(u64::from(page)),
                    });
                }
                Step::Keys | Step::KeysAgain => {
                    let mine = self.local_keys.clone().unwrap_or_default();
                    let mut theirs = Vec::with_capacity(mine.len());
                    for k in &mine {
                        let mut b = vec![0u8; self.key_len()];
                        self.chan.exchange(name, &self.encode_key(k), &mut b)?;
                        theirs.push(self.parse_key(name, &b)?);
                    }
                    if step == Step::Keys {
                        if !self.opts.rdma_cm {
                            // With -R the CM has connected the queue pairs (perftest checks nothing).
                            check_gid_families(&mine[0].gid, &theirs[0].gid)?;
                        }
                        self.peer = Some(PeerSetup {
                            version: self.version.clone().ok_or_else(|| {
                                PerftestError::Misuse("keys before version".into())
                            })?,
                            sys: self.sys.unwrap_or(self.local_sys),
                            mtu: self.mtu.unwrap_or(self.local_mtu),
                            keys: theirs,
                        });
                    }
                }
                Step::Barrier { waits_for_run, .. } => {
                    let mine = self.barrier_key()?;
                    let mut b = vec![0u8; self.key_len()];
                    if waits_for_run {
                        if let Some(action) = self.await_first(name, &mine, b.len())? {
                            return Ok(action);
                        }
                        self.finish_await(name, &mine, &mut b)?;
                    } else {
                        self.chan.exchange(name, &mine, &mut b)?;
                    }
                    self.parse_key(name, &b)?;
                }
                Step::Report { waits_for_run } => {
                    let fields = self.report.take().unwrap_or_default().encode();
                    let mut got = [[0u8; REPORT_FIELD_LEN]; REPORT_FIELDS];
                    for (i, f) in fields.iter().enumerate() {
                        if i == 0 && waits_for_run {
                            if let Some(action) = self.await_first(name, f, REPORT_FIELD_LEN)? {
                                // Keep our report for when the driver comes back.
                                self.report = Some(BwReport::decode(&fields));
                                return Ok(action);
                            }
                            self.finish_await(name, f, &mut got[0])?;
                        } else {
                            self.chan.exchange(name, f, &mut got[i])?;
                        }
                        if i == 0 && msg::looks_like_key(&got[0]) {
                            return Err(PerftestError::Malformed {
                                step: name.into(),
                                field: "size",
                                detail: "the peer sent a key record here: it expects one more barrier, so it runs another test or other options".into(),
                                shown: super::show_bytes(&got[0]),
                            });
                        }
                    }
                    self.check_report(BwReport::decode(&got))?;
                }
                Step::Done => {
                    // perftest up to 6.16 writes "done" and closes without reading; 6.17+ (commit
                    // dbf395e) just closes. We write ours (a peer that closed already is fine), then
                    // only half-close and read until the peer's EOF: fully closing first would make
                    // our kernel reset the connection, and a 6.06 peer whose own "done" write then
                    // fails exits with an error. The half-close lets a roceperf peer's drain end at once.
                    let _ = self.chan.send(name, msg::DONE);
                    let _ = self.chan.shutdown_write(name);
                    self.chan.drain(Duration::from_secs(1));
                }
                Step::AwaitClose => {
                    if self.awaiting.is_none() {
                        // perftest simply exits after its run; we half-close so that a peer waiting
                        // here too (another roceperf) sees EOF as well instead of both waiting forever.
                        self.chan.shutdown_write(name)?;
                        self.awaiting = Some(Awaiting::Close);
                        self.ready = false;
                        return Ok(Action::AwaitPeer);
                    }
                    if !self.ready {
                        self.block_until_closed(name)?;
                    }
                    self.awaiting = None;
                }
                Step::CmConnect => {
                    self.pos += 1;
                    return Ok(Action::CmConnect);
                }
                Step::CmDisconnect => {
                    self.pos += 1;
                    return Ok(Action::CmDisconnect);
                }
                Step::Connect => {
                    if self.peer.is_none() {
                        return Err(PerftestError::Misuse("connect before the key round".into()));
                    }
                    // The setup is over: its overall deadline, if any, no longer applies.
                    self.chan.end_setup();
                    self.pos += 1;
                    return Ok(Action::Connect);
                }
                Step::PostReceives { size } => {
                    self.pos += 1;
                    return Ok(Action::PostReceives { size });
                }
                Step::Run { size } => {
                    self.pos += 1;
                    self.last_run_size = Some(size);
                    return Ok(Action::Run { size });
                }
            }
            self.pos += 1;
        }
        Ok(Action::Finished)
    }

    /// QP 0's record, which perftest reuses for every barrier.
    fn barrier_key(&self) -> Result<Vec<u8>> {
        let keys = self
            .local_keys
            .as_ref()
            .ok_or_else(|| PerftestError::Misuse("barrier before our keys were set".into()))?;
        Ok(self.encode_key(&keys[0]))
    }

    /// Bytes of a key record: perftest's ASCII one, or with `-R` the binary one of the peer's version.
    fn key_len(&self) -> usize {
        self.bin_key_len.unwrap_or(KEY_LEN_GID)
    }

    fn encode_key(&self, k: &KeyRecord) -> Vec<u8> {
        match self.bin_key_len {
            Some(len) => binkey::encode(k, 0, len),
            None => k.encode().to_vec(),
        }
    }

    fn parse_key(&self, step: &str, b: &[u8]) -> Result<KeyRecord> {
        match self.bin_key_len {
            Some(_) => binkey::parse(step, b),
            None => KeyRecord::parse(step, b),
        }
    }

    /// First visit of a waiting exchange: the client sends its half, then the driver is told to wait.
    /// Returns `None` on the second visit (the wait is over or the driver chose to block).
    fn await_first(&mut self, name: &str, mine: &[u8], want: usize) -> Result<Option<Action>> {
        if self.awaiting.is_some() {
            return Ok(None);
        }
        if self.chan.is_client() {
            self.chan.send(name, mine)?;
        }
        self.awaiting = Some(Awaiting::Message(want));
        self.ready = false;
        Ok(Some(Action::AwaitPeer))
    }

    /// Second visit: read the peer's half (at once if polled complete, else blocking up to the run
    /// timeout), then the server sends its half.
    fn finish_await(&mut self, name: &str, mine: &[u8], theirs: &mut [u8]) -> Result<()> {
        let limit = self
            .chan
            .timeouts()
            .run
            .unwrap_or(Duration::from_secs(365 * 24 * 3600));
        self.chan.recv(name, theirs, limit)?;
        if !self.chan.is_client() {
            self.chan.send(name, mine)?;
        }
        self.awaiting = None;
        self.ready = false;
        Ok(())
    }

    fn block_until_closed(&mut self, name: &str) -> Result<()> {
        let limit = self.chan.timeouts().run;
        let start = std::time::Instant::now();
        while !self.chan.poll_closed(name)? {
            if limit.is_some_and(|l| start.elapsed() >= l) {
                return Err(PerftestError::Timeout {
                    step: name.into(),
                    secs: limit.map(|l| l.as_secs()).unwrap_or(0),
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Compares a meaningful peer report with our parameters.
    fn check_report(&mut self, theirs: BwReport) -> Result<()> {
        let meaningful = self.opts.bidirectional || !self.chan.is_client();
        if !meaningful {
            return Ok(());
        }
        let size = self
            .last_run_size
            .unwrap_or_else(|| *self.opts.sizes().last().unwrap_or(&self.opts.size));
        if theirs.size != size {
            return Err(PerftestError::ParameterMismatch {
                field: if self.opts.all_sizes { "-a/-s" } else { "-s" },
                ours: size,
                theirs: theirs.size,
            });
        }
        let iters = self.iters * self.opts.num_qps as u64;
        if !self.opts.duration && theirs.iters != iters {
            return Err(PerftestError::ParameterMismatch {
                field: "-n x -q",
                ours: iters,
                theirs: theirs.iters,
            });
        }
        self.peer_report = Some(theirs);
        Ok(())
    }
}
