//! Two-host comparisons: `roce_compare --server` on one host, `roce_compare HOST` on the other.
//!
//! The client drives. Over one TCP control connection (default port 18514) it asks the server side to
//! start the `roce_<test>` server of each run, runs its own client against it, then asks the server
//! side how its half ended. Messages are JSON lines; the server side builds the command line itself
//! from a structured request (test, sizes, transport, RoCE version, device name), so a peer can never
//! make it run anything else. A dropped control connection kills whatever it started.

use super::error::{Error, Result};
use super::leg::{LegSpec, TestSpec, TransportChoice};
use super::run::{Leg, LocalServer, Plan, ServerSide};
use crate::params::RoceVersion;
use crate::results::Skipped;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Default TCP port of the control connection.
pub(crate) const DEFAULT_CONTROL_PORT: u16 = 18514;

/// What the client side asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// First message: the client's roceperf version (both sides must match).
    Hello {
        /// `CARGO_PKG_VERSION` of the client.
        version: String,
    },
    /// Start the server of one run.
    Start {
        /// The test.
        test: TestSpec,
        /// The transport.
        leg: LegSpec,
    },
    /// Wait for that server to end (at most `wait_ms`), or kill it.
    Finish {
        /// Kill it now.
        kill: bool,
        /// How long to wait before killing it.
        wait_ms: u64,
    },
}

/// The server side's answer to every request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Reply {
    /// Whether the request worked.
    pub ok: bool,
    /// The out-of-band port of a started server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// What went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Reply {
    fn ok(port: Option<u16>) -> Reply {
        Reply {
            ok: true,
            port,
            error: None,
        }
    }

    fn err(e: String) -> Reply {
        Reply {
            ok: false,
            port: None,
            error: Some(e),
        }
    }
}

/// How `roce_compare --server` serves.
#[derive(Debug, Clone)]
pub struct ServeConfig {
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
pub fn serve(listener: &TcpListener, cfg: &ServeConfig) -> std::io::Result<()> {
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

fn session(stream: TcpStream, cfg: &ServeConfig) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let work = tempfile::tempdir()?;
    let mut server = LocalServer::new(cfg.bin_dir.clone(), work.path().to_owned(), cfg.cpu);
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let mut greeted = false;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            // The client is gone: whatever it started must not keep a core busy.
            let _ = server.finish(true, Instant::now());
            return Ok(());
        }
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply::err(format!("not a roce_compare request ({e})")),
            Ok(Request::Hello { version }) if version == env!("CARGO_PKG_VERSION") => {
                greeted = true;
                Reply::ok(None)
            }
            Ok(Request::Hello { version }) => Reply::err(format!(
                "this server runs roceperf {}, the client {version}; use the same version on both hosts",
                env!("CARGO_PKG_VERSION")
            )),
            Ok(_) if !greeted => Reply::err("say hello first".into()),
            Ok(Request::Start { test, mut leg }) => match leg.validate() {
                Err(e) => Reply::err(e.to_string()),
                Ok(()) => {
                    if leg.device.is_some() && cfg.device.is_some() {
                        leg.device.clone_from(&cfg.device);
                    }
                    let label = leg.label();
                    let local = Leg {
                        spec: leg,
                        label,
                        server_netns: None,
                        client_netns: None,
                        host: String::new(),
                        link: None,
                    };
                    match server.start(&test, &local) {
                        Ok(port) => Reply::ok(Some(port)),
                        Err(e) => Reply::err(e.to_string()),
                    }
                }
            },
            Ok(Request::Finish { kill, wait_ms }) => {
                match server.finish(kill, Instant::now() + Duration::from_millis(wait_ms)) {
                    Ok(()) => Reply::ok(None),
                    Err(e) => Reply::err(e.to_string()),
                }
            }
        };
        let mut text = serde_json::to_string(&reply).map_err(std::io::Error::other)?;
        text.push('\n');
        writer.write_all(text.as_bytes())?;
    }
}

/// The server side of a run on another host, reached over the control connection.
pub(crate) struct RemoteServer {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    peer: String,
}

impl RemoteServer {
    /// Connects to `roce_compare --server` at `host:port`, retrying for up to `wait`.
    pub fn connect(host: &str, port: u16, wait: Duration) -> Result<RemoteServer> {
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
        let reader = BufReader::new(stream.try_clone().map_err(|e| control(e.to_string()))?);
        let mut me = RemoteServer {
            reader,
            writer: stream,
            peer: peer.clone(),
        };
        me.ask(
            &Request::Hello {
                version: env!("CARGO_PKG_VERSION").into(),
            },
            Duration::from_secs(10),
        )?;
        Ok(me)
    }

    fn control(&self, detail: String) -> Error {
        Error::Control {
            peer: self.peer.clone(),
            detail,
        }
    }

    fn ask(&mut self, req: &Request, wait: Duration) -> Result<Reply> {
        let mut text = serde_json::to_string(req).map_err(|e| self.control(e.to_string()))?;
        text.push('\n');
        let mut line = String::new();
        let io = self
            .writer
            .write_all(text.as_bytes())
            .and_then(|()| self.reader.get_ref().set_read_timeout(Some(wait)))
            .and_then(|()| self.reader.read_line(&mut line));
        match io {
            Err(e) => return Err(self.control(format!("control connection: {e}"))),
            Ok(0) => return Err(self.control("closed the control connection".into())),
            Ok(_) => {}
        }
        let reply: Reply = serde_json::from_str(&line)
            .map_err(|e| self.control(format!("sent a reply that is not roce_compare's: {e}")))?;
        if reply.ok {
            Ok(reply)
        } else {
            Err(self.control(reply.error.unwrap_or_else(|| "failed".into())))
        }
    }
}

impl ServerSide for RemoteServer {
    fn start(&mut self, test: &TestSpec, leg: &Leg) -> Result<u16> {
        let req = Request::Start {
            test: *test,
            leg: leg.spec.clone(),
        };
        let reply = self.ask(&req, Duration::from_secs(30))?;
        reply
            .port
            .ok_or_else(|| self.control("started a server but sent no port".into()))
    }

    fn finish(&mut self, kill: bool, deadline: Instant) -> Result<()> {
        let wait = deadline.saturating_duration_since(Instant::now());
        let req = Request::Finish {
            kill,
            wait_ms: wait.as_millis() as u64,
        };
        self.ask(&req, wait + Duration::from_secs(10)).map(|_| ())
    }
}

/// The two-host plan: RoCE v2 and v1 over `device` (verbs when it is an RDMA device, soft otherwise),
/// then TCP; without a device the RoCE legs are skipped with a note.
pub fn plan(tests: Vec<TestSpec>, host: &str, device: Option<&str>) -> Plan {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::leg::Sizes;
    use crate::params::{Metric, TestKind, Verb};

    fn spec() -> TestSpec {
        TestSpec {
            test: TestKind::new(Verb::Write, Metric::Latency),
            sizes: Sizes::One(2),
            iters: Some(100),
            duration: None,
        }
    }

    #[test]
    fn requests_are_json_lines_with_an_op() {
        let r = Request::Start {
            test: spec(),
            leg: LegSpec::tcp(),
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            text.starts_with(r#"{"op":"start","test":{"test":{"verb":"write""#),
            "{text}"
        );
        assert!(!text.contains('\n'));
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), r);
    }

    #[test]
    fn the_server_side_refuses_strangers_and_bad_devices() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let cfg = ServeConfig {
            bin_dir: dir.path().to_owned(),
            device: None,
            cpu: None,
            once: true,
        };
        let t = std::thread::spawn(move || serve(&listener, &cfg));
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        let mut ask = |text: &str| {
            writer.write_all(text.as_bytes()).unwrap();
            writer.write_all(b"\n").unwrap();
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            serde_json::from_str::<Reply>(&line).unwrap()
        };
        let r = ask("GET / HTTP/1.0");
        assert!(r.error.unwrap().starts_with("not a roce_compare request"));
        let start = serde_json::to_string(&Request::Start {
            test: spec(),
            leg: LegSpec::roce(TransportChoice::Auto, RoceVersion::V2, "eth0; reboot"),
        })
        .unwrap();
        assert_eq!(ask(&start).error.as_deref(), Some("say hello first"));
        let r = ask(r#"{"op":"hello","version":"0.0.0-other"}"#);
        assert!(r.error.unwrap().contains("same version"));
        let hello = serde_json::to_string(&Request::Hello {
            version: env!("CARGO_PKG_VERSION").into(),
        })
        .unwrap();
        assert!(ask(&hello).ok);
        let r = ask(&start);
        assert!(
            r.error.unwrap().contains("is not a device"),
            "bad device refused"
        );
        // No binaries in bin_dir: the start fails with how to build them.
        let tcp = serde_json::to_string(&Request::Start {
            test: spec(),
            leg: LegSpec::tcp(),
        })
        .unwrap();
        let r = ask(&tcp);
        assert!(r.error.unwrap().contains("cargo build"));
        drop(writer);
        drop(reader);
        t.join().unwrap().unwrap();
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
