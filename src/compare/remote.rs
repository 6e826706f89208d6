//! Two-host comparisons: `roce_compare --server` on one host, `roce_compare HOST` on the other.
//!
//! A two-host comparison is a two-rank run of the control protocol (`orchestrate::control`): the
//! client drives, the server works, as rank 0 drives a `roce_fabric` rank. Over one TCP connection
//! (default port 18514) the server says hello, the client checks its version and welcomes it; then for
//! each run the client sends the server side's job (test, sizes, transport, RoCE version, device name;
//! the server picks the port and says it), runs its own client against it, and waits for the server
//! side's outcome. The server builds the command line itself from the structured job, so a peer can
//! never make it run anything else. A dropped control connection kills whatever it started.

use super::error::{Error, Result};
use super::floor::FloorJob;
use super::leg::{CompareRun, LegSpec, Sides, TestSpec, TransportChoice};
use super::run::{GRACE, Leg, Plan, ServerSide};
use crate::orchestrate::control::{self, Hello, Job, Outcome, Side, ToDriver, ToWorker};
use crate::orchestrate::worker::{self, Serve};
use crate::params::RoceVersion;
use crate::results::Skipped;
use std::collections::BTreeMap;
use std::io::BufReader;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Default TCP port of the control connection.
pub(crate) const DEFAULT_CONTROL_PORT: u16 = 18514;

/// How long a server has to say hello, start a run's server side or say how a killed one ended.
const ANSWER: Duration = Duration::from_secs(10);
/// How long a server has to start a run's server side.
const START: Duration = Duration::from_secs(30);

/// How `roce_compare --server` serves.
#[derive(Debug, Clone)]
pub(crate) struct ServeConfig {
    /// Where the `roce_<test>` binaries are.
    pub(crate) bin_dir: PathBuf,
    /// `-d` on this host; overrides the client's device name for RoCE runs.
    pub device: Option<String>,
    /// Core of the servers' datapath; None: the binaries' default.
    pub cpu: Option<usize>,
    /// Serve one client, then return.
    pub once: bool,
}

/// Serves control connections one after another (one comparison at a time: it is a benchmark).
pub(crate) fn serve(listener: &TcpListener, cfg: &ServeConfig) -> std::io::Result<()> {
    loop {
        let (stream, peer) = listener.accept()?;
        eprintln!("roce_compare: comparison requested by {peer}");
        if let Err(e) = session(stream, cfg) {
            eprintln!("roce_compare: control connection with {peer}: {e}");
        }
        if cfg.once {
            return Ok(());
        }
    }
}

/// One client's comparison: this host works for it as a rank works for rank 0.
fn session(stream: TcpStream, cfg: &ServeConfig) -> std::result::Result<(), String> {
    let work =
        tempfile::tempdir().map_err(|e| format!("cannot create a scratch directory: {e}"))?;
    let hello = Hello::new(1, 2, BTreeMap::new(), None, cfg.device.clone());
    let sides = Sides {
        bin_dir: cfg.bin_dir.clone(),
        cpu: cfg.cpu,
        netns: None,
        from_peer: true,
        device: cfg.device.clone(),
    };
    let how = Serve {
        driver: "the roce_compare client",
        // A client may run its side of a long sweep without a word; its connection says it lives.
        silence: None,
        dir: work.path().to_owned(),
    };
    worker::serve(stream, hello, sides, &how)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The server side of a run on another host, reached over the control connection.
pub(crate) struct RemoteServer {
    writer: TcpStream,
    /// What the server says, read by a thread of its own so that every wait can have a deadline.
    events: Receiver<std::io::Result<ToDriver>>,
    peer: String,
    /// Per-run timeout of the client (`--timeout`); None: each test's own.
    timeout: Option<Duration>,
    jobs: u64,
    /// The job of the server side that runs.
    running: Option<u64>,
}

impl RemoteServer {
    /// Connects to `roce_compare --server` at `host:port`, retrying for up to `wait`, and checks that
    /// it runs this roceperf version.
    pub(crate) fn connect(
        host: &str,
        port: u16,
        wait: Duration,
        timeout: Option<Duration>,
    ) -> Result<RemoteServer> {
        let server = crate::oob::HostPort::new(host, port);
        let peer = server.to_string();
        let control = |detail: String| Error::Control {
            peer: peer.clone(),
            detail,
        };
        let addrs = server
            .resolve()
            .map_err(|e| control(format!("cannot resolve {host}: {e}")))?;
        let retry = crate::oob::dial::Retry {
            wait,
            pause: Duration::from_millis(200),
            attempt: Some(Duration::from_secs(2)),
        };
        let (stream, _) = crate::oob::dial::connect(&addrs, retry, |_| true, || {}).map_err(|_| {
            control(
                "no roce_compare --server answers there; start it on that host (roce_compare --server) or check --control-port".into(),
            )
        })?;
        let _ = stream.set_nodelay(true);
        let reader = stream.try_clone().map_err(|e| control(e.to_string()))?;
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(reader);
            loop {
                let msg = control::recv::<ToDriver, _>(&mut reader).and_then(|m| {
                    m.ok_or_else(|| std::io::Error::other("closed the control connection"))
                });
                let end = msg.is_err();
                if tx.send(msg).is_err() || end {
                    return;
                }
            }
        });
        let mut me = RemoteServer {
            writer: stream,
            events,
            peer,
            timeout,
            jobs: 0,
            running: None,
        };
        me.welcome()?;
        Ok(me)
    }

    fn control(&self, detail: String) -> Error {
        Error::Control {
            peer: self.peer.clone(),
            detail,
        }
    }

    /// Checks the server's hello and welcomes it (or tells it why not).
    fn welcome(&mut self) -> Result<()> {
        let ours = env!("CARGO_PKG_VERSION");
        let refusal = match self.next(Instant::now() + ANSWER)? {
            Some(ToDriver::Hello(h)) if h.protocol != control::PROTOCOL => format!(
                "it speaks {}, this client {}; use the same roceperf on both hosts",
                h.protocol,
                control::PROTOCOL
            ),
            Some(ToDriver::Hello(h)) if h.version != ours => format!(
                "this server runs roceperf {}, the client {ours}; use the same version on both hosts",
                h.version
            ),
            Some(ToDriver::Hello(_)) => return self.tell(&ToWorker::Welcome { size: 2 }),
            Some(_) => "its first message is not a hello".into(),
            None => format!(
                "said no hello within {} s; is it roce_compare --server of the same roceperf version?",
                ANSWER.as_secs()
            ),
        };
        let abort = ToWorker::Abort {
            code: 2,
            reason: refusal.clone(),
        };
        let _ = self.tell(&abort);
        Err(self.control(refusal))
    }

    fn tell(&mut self, msg: &ToWorker<CompareRun>) -> Result<()> {
        control::send(&mut self.writer, msg)
            .map_err(|e| self.control(format!("control connection: {e}")))
    }

    /// The server's next message, or None when `deadline` passes first.
    fn next(&self, deadline: Instant) -> Result<Option<ToDriver>> {
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.events.recv_timeout(wait) {
            Ok(Ok(msg)) => Ok(Some(msg)),
            Ok(Err(e)) => Err(self.control(e.to_string())),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                Err(self.control("closed the control connection".into()))
            }
        }
    }

    /// The outcome of job `id`, or None when `deadline` passes first.
    fn outcome(&self, id: u64, deadline: Instant) -> Result<Option<Outcome>> {
        loop {
            match self.next(deadline)? {
                Some(ToDriver::Done { job, outcome }) if job == id => return Ok(Some(outcome)),
                Some(_) => {}
                None => return Ok(None),
            }
        }
    }

    /// Stops job `id` and waits for its outcome.
    fn cancel(&mut self, id: u64) -> Result<Option<Outcome>> {
        self.tell(&ToWorker::Cancel { job: id })?;
        self.outcome(id, Instant::now() + ANSWER)
    }
}

impl ServerSide for RemoteServer {
    fn start(&mut self, test: &TestSpec, leg: &Leg, floor: Option<&FloorJob>) -> Result<u16> {
        self.jobs += 1;
        let id = self.jobs;
        // A safety net: the client ends its server side long before.
        let timeout = self.timeout.unwrap_or_else(|| test.timeout()) + 2 * GRACE;
        let job = Job {
            id,
            run: CompareRun {
                test: test.clone(),
                leg: leg.spec.clone(),
                floor: floor.copied(),
            },
            side: Side::Server,
            port: None,
            peer: 0,
            server_addr: None,
            impair: None,
            timeout_ms: timeout.as_millis() as u64,
        };
        self.tell(&ToWorker::Job(job))?;
        let deadline = Instant::now() + START;
        loop {
            match self.next(deadline)? {
                Some(ToDriver::Started { job, port }) if job == id => {
                    self.running = Some(id);
                    return Ok(port);
                }
                Some(ToDriver::Done { job, outcome }) if job == id => {
                    let why = outcome.error.unwrap_or_else(|| "it ended at once".into());
                    return Err(self.control(why));
                }
                Some(_) => {}
                None => {
                    let _ = self.cancel(id);
                    return Err(self.control(format!(
                        "did not start the server within {} s",
                        START.as_secs()
                    )));
                }
            }
        }
    }

    fn finish(&mut self, kill: bool, deadline: Instant) -> Result<()> {
        let Some(id) = self.running.take() else {
            return Ok(());
        };
        if kill {
            self.cancel(id)?;
            return Ok(());
        }
        let outcome = match self.outcome(id, deadline)? {
            Some(o) => o,
            None => self
                .cancel(id)?
                .ok_or_else(|| self.control("did not say how the server it killed ended".into()))?,
        };
        match outcome.error {
            None => Ok(()),
            Some(e) => Err(self.control(e)),
        }
    }
}

impl Drop for RemoteServer {
    /// Ends the session, so that the server serves the next comparison (or exits with `--once`).
    fn drop(&mut self) {
        let _ = self.tell(&ToWorker::Finish { code: 0 });
    }
}

/// The two-host plan: RoCE v2 and v1 over `device` (verbs when it is an RDMA device, soft otherwise),
/// then TCP; without a device the RoCE legs are skipped with a note.
pub(crate) fn plan(tests: Vec<TestSpec>, host: &str, device: Option<&str>) -> Plan {
    let mut legs = Vec::new();
    let mut skipped = Vec::new();
    for v in [RoceVersion::V2, RoceVersion::V1] {
        match device {
            Some(d) => {
                let spec = LegSpec::roce(TransportChoice::Auto, v, d);
                legs.push(Leg {
                    label: spec.label(),
                    spec,
                    server_netns: None,
                    client_netns: None,
                    host: host.into(),
                    link: None,
                    path: None,
                });
            }
            None => skipped.push(Skipped {
                label: format!("RoCE {v}"),
                reason: "no -d given; name the RDMA device (mlx5_0) or the interface facing the server (eth0)".into(),
                failed: false,
            }),
        }
    }
    legs.push(Leg::tcp(host));
    Plan {
        tests,
        legs,
        skipped,
        repeat: 1,
        floors: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::leg::sample_test as spec;

    /// The server side of a TCP write_lat run, as the client asks for it.
    fn tcp_job() -> ToWorker<CompareRun> {
        ToWorker::Job(Job {
            id: 1,
            run: CompareRun {
                test: spec(),
                leg: LegSpec::tcp(),
                floor: None,
            },
            side: Side::Server,
            port: None,
            peer: 0,
            server_addr: None,
            impair: None,
            timeout_ms: 1000,
        })
    }

    #[test]
    fn a_run_is_one_job_line_with_its_test_and_leg() {
        let job = tcp_job();
        let text = serde_json::to_string(&job).unwrap();
        assert!(
            text.starts_with(r#"{"type":"job","id":1,"test":{"test":{"verb":"write""#),
            "{text}"
        );
        assert!(!text.contains('\n'));
        assert_eq!(
            serde_json::from_str::<ToWorker<CompareRun>>(&text).unwrap(),
            job
        );
    }

    /// A `roce_compare --server` without binaries on a loopback port, serving `sessions` clients.
    fn server(sessions: usize) -> (u16, std::thread::JoinHandle<()>, tempfile::TempDir) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let cfg = ServeConfig {
            bin_dir: dir.path().to_owned(),
            device: None,
            cpu: None,
            once: true,
        };
        let t = std::thread::spawn(move || {
            for _ in 0..sessions {
                serve(&listener, &cfg).unwrap();
            }
        });
        (port, t, dir)
    }

    #[test]
    fn the_server_side_refuses_strangers_and_jobs_before_its_welcome() {
        let (port, t, _dir) = server(2);
        let job = format!("{}\n", serde_json::to_string(&tcp_job()).unwrap());
        for line in ["GET / HTTP/1.0\n", job.as_str()] {
            let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let hello = control::recv::<ToDriver, _>(&mut reader).unwrap();
            assert!(matches!(hello, Some(ToDriver::Hello(_))), "{hello:?}");
            std::io::Write::write_all(&mut &stream, line.as_bytes()).unwrap();
            // The session ends without running anything.
            assert_eq!(control::recv::<ToDriver, _>(&mut reader).unwrap(), None);
        }
        t.join().unwrap();
    }

    #[test]
    fn the_client_drives_the_server_side_which_refuses_bad_devices_and_names_missing_binaries() {
        let (port, t, _dir) = server(1);
        let mut s =
            RemoteServer::connect("127.0.0.1", port, Duration::from_secs(10), None).unwrap();
        let bad = Leg {
            spec: LegSpec::roce(TransportChoice::Auto, RoceVersion::V2, "eth0; reboot"),
            ..Leg::tcp("127.0.0.1")
        };
        let err = s.start(&spec(), &bad, None).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("127.0.0.1:{port}: ")) && err.contains("is not a device"),
            "{err}"
        );
        // No binaries in bin_dir: the start fails with how to build them.
        let err = s.start(&spec(), &Leg::tcp("127.0.0.1"), None).unwrap_err();
        assert!(err.to_string().contains("cargo build"), "{err}");
        assert!(s.finish(false, Instant::now()).is_ok(), "nothing runs");
        drop(s);
        t.join().unwrap();
    }

    #[test]
    fn without_a_device_roce_is_skipped_with_a_note() {
        let p = plan(vec![spec()], "192.0.2.1", None);
        assert_eq!(p.legs.len(), 1);
        assert_eq!(p.legs[0].label, "TCP");
        assert_eq!(p.skipped.len(), 2);
        assert!(p.skipped[0].reason.contains("-d"));
        let p = plan(vec![spec()], "192.0.2.1", Some("eth0"));
        let labels: Vec<&str> = p.legs.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["RoCE v2", "RoCE v1", "TCP"]);
        assert_eq!(p.legs[0].host, "192.0.2.1");
    }
}
