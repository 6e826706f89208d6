//! Rank 0's I/O: accept the ranks, check that they agree, feed the driver their answers and the time,
//! send what it asks, ping idle ranks, and stop cleanly on SIGTERM/SIGINT (a launcher giving up;
//! `orchestrate::signals`) with what has been measured so far.

use super::driver::{Driver, Member, MemberState, Output, PairRecord, Plan};
use super::job::ToWorker;
use crate::orchestrate::control::{self, Hello, PROTOCOL, ToDriver};
use crate::orchestrate::signals::stop_requested as terminated;
use std::collections::BTreeMap;
use std::io::{BufReader, BufWriter};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// How often rank 0 pings every rank.
const PING_INTERVAL: Duration = Duration::from_secs(5);

/// What rank 0's reader threads report.
enum Event {
    Hello(usize, Box<Hello>, TcpStream, SocketAddr, SocketAddr),
    Msg(usize, ToDriver),
    Closed(usize, String),
    Garbage(SocketAddr, String),
}

struct Conn {
    rank: Option<usize>,
    writer: BufWriter<TcpStream>,
}

/// Why a run could not start (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Mismatch(pub String);

/// The end of a run.
pub(crate) struct Finished {
    /// Members and results (of a watching run: the round that ran last, complete or cancelled).
    pub driver: Driver,
    /// Whether SIGTERM/SIGINT cut the run short (a watching run: cut a round short).
    pub interrupted: bool,
    /// A watching run: the rounds completed (each told to [`Observer::round`] as it ended).
    pub rounds: u64,
}

/// What the coordinator reports as the run goes.
pub(crate) trait Observer {
    /// A rank never joined or was lost (`driver` is the run so far, once it started).
    fn lost(&mut self, text: &str, driver: Option<&Driver>);
    /// A pair test ended or was skipped.
    fn record(&mut self, rec: &PairRecord);
    /// Progress: pair tests done of the total, what runs now.
    fn progress(&mut self, done: u64, total: u64, label: &str);
    /// A watching run completed its `round`th round (from 1): `driver` holds its results; the next
    /// round's records follow.
    fn round(&mut self, _driver: &Driver, _round: u64) {}
}

/// Reports nothing (a rendezvous measurement).
impl Observer for () {
    fn lost(&mut self, _: &str, _: Option<&Driver>) {}
    fn record(&mut self, _: &PairRecord) {}
    fn progress(&mut self, _: u64, _: u64, _: &str) {}
}

/// Rank 0's side of the rendezvous and the run.
pub(crate) struct Coordinator {
    listener: TcpListener,
    n: usize,
    hello: Hello,
    join_timeout: Duration,
    expected_hosts: Vec<Option<String>>,
    /// `--watch`: the pause between rounds.
    watch: Option<Duration>,
}

fn accept_loop(listener: TcpListener, tx: Sender<Event>) {
    let mut next = 0usize;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let conn = next;
        next += 1;
        let tx = tx.clone();
        let _ = std::thread::Builder::new()
            .name(format!("fabric-conn{conn}"))
            .stack_size(64 * 1024)
            .spawn(move || read_conn(conn, stream, tx));
    }
}

fn read_conn(conn: usize, stream: TcpStream, tx: Sender<Event>) {
    let (Ok(peer), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    match control::recv::<ToDriver, _>(&mut reader) {
        Ok(Some(ToDriver::Hello(h))) => {
            let _ = tx.send(Event::Hello(conn, Box::new(h), write_half, peer, local));
        }
        Ok(_) | Err(_) => {
            let _ = tx.send(Event::Garbage(
                peer,
                "its first message is not a roce_fabric hello".into(),
            ));
            return;
        }
    }
    // Ranks answer only when a job ends, which may take as long as the longest test.
    let _ = reader.get_ref().set_read_timeout(None);
    loop {
        match control::recv::<ToDriver, _>(&mut reader) {
            Ok(Some(msg)) => {
                if tx.send(Event::Msg(conn, msg)).is_err() {
                    return;
                }
            }
            Ok(None) => {
                let _ = tx.send(Event::Closed(
                    conn,
                    "its connection closed (the process exited or was killed)".into(),
                ));
                return;
            }
            Err(e) => {
                let _ = tx.send(Event::Closed(conn, format!("its connection failed: {e}")));
                return;
            }
        }
    }
}

fn first_difference(
    mine: &BTreeMap<String, String>,
    theirs: &BTreeMap<String, String>,
) -> Option<(String, String, String)> {
    let none = || "(not given)".to_owned();
    let keys: std::collections::BTreeSet<&String> = mine.keys().chain(theirs.keys()).collect();
    keys.into_iter().find_map(|k| {
        let (a, b) = (
            mine.get(k).cloned().unwrap_or_else(none),
            theirs.get(k).cloned().unwrap_or_else(none),
        );
        (a != b).then(|| (k.clone(), b, a))
    })
}

impl Coordinator {
    /// Rank 0 listening on `listener` for a job of `n` ranks; `hello` is rank 0's own (the reference).
    pub(crate) fn new(
        listener: TcpListener,
        n: usize,
        hello: Hello,
        join_timeout: Duration,
    ) -> Coordinator {
        Coordinator {
            listener,
            n,
            hello,
            join_timeout,
            expected_hosts: Vec::new(),
            watch: None,
        }
    }

    /// Repeats the plan `every` after each round ends until SIGTERM/SIGINT (`--watch`).
    pub(crate) fn watching(mut self, every: Option<Duration>) -> Coordinator {
        self.watch = every;
        self
    }

    /// Where the launcher placed each rank, to name one that never joins.
    pub(crate) fn with_expected_hosts(mut self, hosts: Vec<Option<String>>) -> Coordinator {
        self.expected_hosts = hosts;
        self
    }

    /// Checks one hello against rank 0's: the first disagreement, in words.
    pub(crate) fn check(
        &self,
        h: &Hello,
        host_of: &dyn Fn(usize) -> Option<String>,
    ) -> Result<(), Mismatch> {
        let who = format!("rank {} (host {})", h.rank, h.host);
        if h.protocol != PROTOCOL {
            return Err(Mismatch(format!(
                "{who} speaks {}, rank 0 {PROTOCOL}: run the same roceperf on every host",
                h.protocol
            )));
        }
        if h.version != self.hello.version {
            return Err(Mismatch(format!(
                "{who} runs roceperf {}, rank 0 runs {}: install the same version on every host",
                h.version, self.hello.version
            )));
        }
        if h.size != self.n {
            return Err(Mismatch(format!(
                "{who} counts {} ranks in the job, rank 0 counts {}",
                h.size, self.n
            )));
        }
        if h.rank >= self.n {
            return Err(Mismatch(format!(
                "{who}: rank {} is outside the job's {} ranks",
                h.rank, self.n
            )));
        }
        if let Some(other) = host_of(h.rank) {
            return Err(Mismatch(format!(
                "two processes claim rank {} (hosts {other} and {})",
                h.rank, h.host
            )));
        }
        if let Some((param, theirs, ours)) = first_difference(&self.hello.params, &h.params) {
            return Err(Mismatch(format!(
                "{who} has a different {param}: {theirs} there, {ours} on rank 0; give every rank the same flags"
            )));
        }
        Ok(())
    }

    /// Waits for the ranks and runs `plan` over them; Err(Mismatch) when ranks disagree (exit 2).
    pub(crate) fn run(self, mut plan: Plan, obs: &mut impl Observer) -> Result<Finished, Mismatch> {
        let (tx, rx) = mpsc::channel();
        let listener = self
            .listener
            .try_clone()
            .map_err(|e| Mismatch(format!("the coordinator socket: {e}")))?;
        std::thread::Builder::new()
            .name("fabric-accept".into())
            .spawn(move || accept_loop(listener, tx))
            .map_err(|e| Mismatch(format!("cannot start the coordinator: {e}")))?;
        let start = Instant::now();
        let mut conns: BTreeMap<usize, Conn> = BTreeMap::new();
        let mut hellos: BTreeMap<usize, (Hello, SocketAddr, SocketAddr)> = BTreeMap::new();
        let deadline = start + self.join_timeout;
        let mut last_ping = Instant::now();
        // Join: every rank, or the deadline.
        while hellos.len() < self.n && Instant::now() < deadline && !terminated() {
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(200));
            match rx.recv_timeout(wait) {
                Ok(Event::Hello(conn, h, stream, peer, local)) => {
                    let host_of = |r: usize| hellos.get(&r).map(|(h, _, _)| h.host.clone());
                    let checked = self.check(&h, &host_of);
                    let mut writer = BufWriter::new(stream);
                    if let Err(m) = checked {
                        let abort = ToWorker::Abort {
                            code: 2,
                            reason: m.0.clone(),
                        };
                        let _ = control::send(&mut writer, &abort);
                        for c in conns.values_mut() {
                            let _ = control::send(&mut c.writer, &abort);
                        }
                        return Err(m);
                    }
                    conns.insert(
                        conn,
                        Conn {
                            rank: Some(h.rank),
                            writer,
                        },
                    );
                    hellos.insert(h.rank, (*h, peer, local));
                }
                Ok(Event::Closed(conn, why)) => {
                    if let Some(rank) = conns.remove(&conn).and_then(|c| c.rank) {
                        hellos.remove(&rank);
                        obs.lost(
                            &format!("rank {rank} left before the run started: {why}"),
                            None,
                        );
                    }
                }
                Ok(Event::Garbage(peer, why)) => {
                    obs.lost(&format!("ignored a connection from {peer}: {why}"), None)
                }
                Ok(Event::Msg(..)) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if last_ping.elapsed() >= PING_INTERVAL {
                last_ping = Instant::now();
                for c in conns.values_mut() {
                    let _ = control::send(&mut c.writer, &ToWorker::Ping);
                }
            }
        }
        let rank_of_conn: BTreeMap<usize, usize> = conns
            .iter()
            .filter_map(|(c, k)| k.rank.map(|r| (*c, r)))
            .collect();
        let mut writers: BTreeMap<usize, BufWriter<TcpStream>> = conns
            .into_values()
            .filter_map(|c| c.rank.map(|r| (r, c.writer)))
            .collect();
        // The address the other ranks reached rank 0 at is rank 0's address for them.
        let seen_as: Option<IpAddr> = hellos
            .values()
            .find(|(h, peer, _)| h.rank != 0 && !peer.ip().is_loopback())
            .map(|(_, _, local)| local.ip());
        let waited = start.elapsed().as_secs();
        let members: Vec<Member> = (0..self.n)
            .map(|rank| match hellos.get(&rank) {
                Some((h, peer, _)) => Member {
                    rank,
                    host: h.host.clone(),
                    addr: h.addr.clone().unwrap_or_else(|| {
                        // A rank that reached rank 0 over loopback shares its host (rank 0's own worker
                        // always does): the others reach it where they reach rank 0.
                        let ip = if peer.ip().is_loopback() {
                            seen_as.unwrap_or(peer.ip())
                        } else {
                            peer.ip()
                        };
                        ip.to_string()
                    }),
                    device: h.device.clone(),
                    cores: h.cores,
                    state: MemberState::Present,
                },
                None => Member {
                    rank,
                    host: self
                        .expected_hosts
                        .get(rank)
                        .cloned()
                        .flatten()
                        .unwrap_or_else(|| "?".into()),
                    addr: "?".into(),
                    device: None,
                    cores: None,
                    state: MemberState::Missing(if terminated() {
                        "the job was terminated before it joined".into()
                    } else {
                        format!("it did not join within {waited} s")
                    }),
                },
            })
            .collect();
        for m in &members {
            if let MemberState::Missing(why) = &m.state {
                obs.lost(&format!("{} never joined: {why}", m.name()), None);
            }
        }
        for w in writers.values_mut() {
            let _ = control::send(w, &ToWorker::Welcome { size: self.n });
        }
        plan.n = self.n;
        let mut driver = Driver::new(plan, members);
        driver.start(start.elapsed());
        let mut interrupted = false;
        let mut rounds = 0u64;
        // Watching: the status of the last complete round.
        let mut last_code = 1u8;
        // Watching: when the next round starts, while the last one's results stand.
        let mut next_round: Option<Instant> = None;
        loop {
            while let Some(out) = driver.poll_output() {
                match out {
                    Output::Send(rank, msg) => {
                        let failed = writers.get_mut(&rank).map(|w| control::send(w, &msg).err());
                        if let Some(Some(e)) = failed {
                            writers.remove(&rank);
                            driver.on_lost(
                                start.elapsed(),
                                rank,
                                &format!("sending to it failed: {e}"),
                            );
                        }
                    }
                    Output::Record(rec) => obs.record(&rec),
                    Output::Lost(text) => obs.lost(&text, Some(&driver)),
                }
            }
            let (done, total, label) = driver.progress();
            obs.progress(done, total, &label);
            if next_round.is_none() && driver.is_finished() {
                let Some(every) = self.watch else { break };
                rounds += 1;
                last_code = u8::from(!super::summary::all_ok(driver.members(), driver.phases()));
                obs.round(&driver, rounds);
                next_round = Some(Instant::now() + every);
            }
            if terminated() {
                // Between rounds a watching run stops clean; within one, the round is cancelled.
                interrupted = next_round.is_none();
                break;
            }
            if next_round.is_some_and(|t| Instant::now() >= t) {
                next_round = None;
                driver = driver.next_round();
                driver.start(start.elapsed());
                continue;
            }
            let now = start.elapsed();
            let wait = driver
                .next_deadline()
                .map_or(Duration::from_millis(200), |d| d.saturating_sub(now))
                .min(Duration::from_millis(200))
                .min(next_round.map_or(Duration::MAX, |t| {
                    t.saturating_duration_since(Instant::now())
                }));
            match rx.recv_timeout(wait) {
                Ok(Event::Msg(conn, ToDriver::Done { job, outcome })) => {
                    if let Some(&rank) = rank_of_conn.get(&conn) {
                        driver.on_done(start.elapsed(), rank, job, outcome);
                    }
                }
                Ok(Event::Closed(conn, why)) => {
                    if let Some(&rank) = rank_of_conn.get(&conn) {
                        writers.remove(&rank);
                        driver.on_lost(start.elapsed(), rank, &why);
                    }
                }
                Ok(Event::Hello(_, h, stream, _, _)) => {
                    let mut w = BufWriter::new(stream);
                    let reason = format!(
                        "rank {} arrived after the run started without it; restart the whole job",
                        h.rank
                    );
                    let _ = control::send(&mut w, &ToWorker::Abort { code: 1, reason });
                }
                Ok(
                    Event::Msg(_, ToDriver::Hello(_) | ToDriver::Started { .. })
                    | Event::Garbage(..),
                ) => {}
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            driver.on_tick(start.elapsed());
            if last_ping.elapsed() >= PING_INTERVAL {
                last_ping = Instant::now();
                for w in writers.values_mut() {
                    let _ = control::send(w, &ToWorker::Ping);
                }
            }
        }
        let code = if rounds > 0 {
            // A watching run: the last complete round's files stand, and its status.
            last_code
        } else {
            u8::from(interrupted || !super::summary::all_ok(driver.members(), driver.phases()))
        };
        for w in writers.values_mut() {
            let _ = control::send(w, &ToWorker::Finish { code });
        }
        Ok(Finished {
            driver,
            interrupted,
            rounds,
        })
    }
}
