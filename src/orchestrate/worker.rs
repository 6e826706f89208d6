//! The worker's side of the control protocol, the same for a `roce_fabric` rank and a
//! `roce_compare --server`: say hello, wait for the driver's welcome, then run the jobs it sends as
//! they come, each in its own thread (through the one child runner, [`super::child`]; a fabric
//! incast's receiver runs one server per sender at once), answering each; cancel a job when told;
//! leave when the driver says the session is over, aborts it, or is gone.
//!
//! What a job runs is the tool's to say ([`Jobs`]): it turns the structured request into a command
//! line (or refuses it) and words what went wrong. [`start`] and [`finish`] are the two halves of one
//! job, also used in-process by a driver that runs a side on its own host.

use super::child::{Child, Ended, Launch, SpawnError, free_port};
use super::control::{self, Hello, Job, Outcome, Side, ToDriver, ToWorker};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::{BufReader, BufWriter};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// The jobs the driver cancelled, or all of them (the session is over).
#[derive(Default)]
struct Cancels {
    all: AtomicBool,
    jobs: Mutex<Vec<u64>>,
}

impl Cancels {
    fn cancel(&self, job: u64) {
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(job);
    }

    fn cancel_all(&self) {
        self.all.store(true, Ordering::Release);
    }

    fn all(&self) -> bool {
        self.all.load(Ordering::Acquire)
    }

    fn is_cancelled(&self, job: u64) -> bool {
        self.all()
            || self
                .jobs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&job)
    }
}

/// What a tool's jobs run, and how it words their failures.
pub(crate) trait Jobs: Send + Sync + 'static {
    /// The tool's part of a job: the test and its flags.
    type Run: Serialize + DeserializeOwned + Send + 'static;

    /// The command line of `job`, on out-of-band port `port`, writing its result to `json`; Err: why
    /// it may not or cannot run.
    fn command(&self, job: &Job<Self::Run>, port: u16, json: &Path) -> Result<Launch, String>;

    /// What went wrong with `job`, whose `child` ended as `ended` without success.
    fn describe(&self, job: &Job<Self::Run>, child: &Child, ended: &Ended) -> String;

    /// What to say when `job`'s binary could not be started.
    fn not_started(&self, _job: &Job<Self::Run>, err: SpawnError) -> String {
        err.to_string()
    }
}

/// A job whose binary runs.
#[derive(Debug)]
pub(crate) struct Running {
    child: Child,
    json: PathBuf,
    /// Its out-of-band port (the one the job gave, or the one picked).
    pub(crate) port: u16,
    started: Instant,
}

impl Running {
    /// Kills the binary at once.
    pub(crate) fn kill(&mut self) {
        self.child.kill();
    }

    /// Removes its logs and result file.
    fn remove_files(&self) {
        self.child.remove_logs();
        let _ = std::fs::remove_file(&self.json);
    }
}

/// Starts `job`'s binary with its logs and result file in `dir`, named `name.*` (a free port picked
/// when the job gave none); Err is the job's outcome when it cannot start.
pub(crate) fn start<J: Jobs>(
    jobs: &J,
    job: &Job<J::Run>,
    dir: &Path,
    name: &str,
) -> Result<Running, Outcome> {
    let started = Instant::now();
    let port = match job.port {
        Some(p) => p,
        None => {
            free_port().map_err(|e| Outcome::failed(format!("cannot find a free TCP port: {e}")))?
        }
    };
    let json = dir.join(format!("{name}.json"));
    let launch = jobs.command(job, port, &json).map_err(Outcome::failed)?;
    let child =
        Child::spawn(&launch, dir, name).map_err(|e| Outcome::failed(jobs.not_started(job, e)))?;
    Ok(Running {
        child,
        json,
        port,
        started,
    })
}

/// Waits for `job`'s binary until `deadline` (or `cancelled`), and reads back its outcome: the
/// client's result JSON, or what went wrong.
pub(crate) fn finish<J: Jobs>(
    jobs: &J,
    job: &Job<J::Run>,
    running: &mut Running,
    deadline: Instant,
    cancelled: impl FnMut() -> bool,
) -> Outcome {
    let ended = running.child.wait(deadline, cancelled);
    let result = (job.side == Side::Client)
        .then(|| std::fs::read(&running.json).ok())
        .flatten()
        .and_then(|b| serde_json::from_slice(&b).ok());
    Outcome {
        exit_code: ended.code(),
        error: (!ended.success()).then(|| jobs.describe(job, &running.child, &ended)),
        result,
        elapsed_ms: running.started.elapsed().as_millis() as u64,
    }
}

/// How a worker serves its driver.
#[derive(Debug, Clone)]
pub(crate) struct Serve {
    /// The driver as errors name it: `the coordinator (rank 0)`.
    pub(crate) driver: &'static str,
    /// Longest silence from the driver before it counts as gone; None: as long as the connection
    /// stays open.
    pub(crate) silence: Option<Duration>,
    /// Where the jobs' logs and result files go (each job's removed once its outcome is sent).
    pub(crate) dir: PathBuf,
}

/// Why a worker stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkerError {
    /// The connection to the driver broke, or the driver broke the protocol.
    #[error("lost {driver}: {why}")]
    Lost {
        /// The driver, as [`Serve::driver`] names it.
        driver: &'static str,
        /// What happened.
        why: String,
    },
    /// The driver stopped the run.
    #[error("{reason}")]
    Aborted {
        /// Exit code.
        code: u8,
        /// Why, as the driver put it.
        reason: String,
    },
}

impl WorkerError {
    /// The exit code: what the driver said when it aborted, else 1.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            WorkerError::Aborted { code, .. } => *code,
            WorkerError::Lost { .. } => 1,
        }
    }
}

type Writer = Arc<Mutex<BufWriter<TcpStream>>>;

fn say(writer: &Writer, msg: &ToDriver) -> std::io::Result<()> {
    // A poisoned lock only means another thread panicked mid-write; the stream is still ours.
    let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
    control::send(&mut *w, msg)
}

/// Serves the driver over `stream`: hello, welcome, jobs, until `Finish` (its exit code). Whatever
/// runs when the session ends is killed.
pub(crate) fn serve<J: Jobs>(
    stream: TcpStream,
    hello: Hello,
    jobs: J,
    how: &Serve,
) -> Result<u8, WorkerError> {
    let lost = |why: String| WorkerError::Lost {
        driver: how.driver,
        why,
    };
    let io = |e: std::io::Error| lost(e.to_string());
    stream.set_nodelay(true).map_err(io)?;
    stream.set_read_timeout(how.silence).map_err(io)?;
    let writer: Writer = Arc::new(Mutex::new(BufWriter::new(stream.try_clone().map_err(io)?)));
    say(&writer, &ToDriver::Hello(hello)).map_err(io)?;
    let cancels = Arc::new(Cancels::default());
    let (jobs_tx, jobs_rx) = mpsc::channel::<Job<J::Run>>();
    let job_thread = {
        let (writer, cancels, dir) = (writer.clone(), cancels.clone(), how.dir.clone());
        std::thread::Builder::new()
            .name("worker-jobs".into())
            .spawn(move || {
                // One thread a job, so that jobs sent together run together; the scope waits for
                // them all once the session ends (every job cancelled then).
                let deaf = AtomicBool::new(false);
                std::thread::scope(|scope| {
                    for job in jobs_rx {
                        if cancels.all() || deaf.load(Ordering::Acquire) {
                            break;
                        }
                        let (jobs, cancels, writer, dir, deaf) =
                            (&jobs, &cancels, &writer, &dir, &deaf);
                        scope.spawn(move || {
                            if run_job(jobs, &job, cancels, writer, dir).is_err() {
                                deaf.store(true, Ordering::Release);
                            }
                        });
                    }
                });
            })
            .map_err(io)?
    };
    let mut reader = BufReader::new(stream);
    let mut welcomed = false;
    let result = loop {
        match control::recv::<ToWorker<J::Run>, _>(&mut reader) {
            Ok(Some(ToWorker::Welcome { .. })) => welcomed = true,
            Ok(Some(ToWorker::Job(_))) if !welcomed => {
                break Err(lost("it sent a job before welcoming this worker".into()));
            }
            Ok(Some(ToWorker::Job(job))) => {
                if jobs_tx.send(job).is_err() {
                    break Err(lost("the job runner stopped".into()));
                }
            }
            Ok(Some(ToWorker::Cancel { job })) => cancels.cancel(job),
            Ok(Some(ToWorker::Ping)) => {}
            Ok(Some(ToWorker::Finish { code })) => break Ok(code),
            Ok(Some(ToWorker::Abort { code, reason })) => {
                break Err(WorkerError::Aborted { code, reason });
            }
            Ok(None) => break Err(lost("it closed the connection".into())),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                let secs = how.silence.unwrap_or_default().as_secs();
                break Err(lost(format!("no word from it for {secs} s")));
            }
            Err(e) => break Err(io(e)),
        }
    };
    // The driver sends Finish once every job it wants has answered: what still runs is not wanted.
    cancels.cancel_all();
    drop(jobs_tx);
    let _ = job_thread.join();
    result
}

/// Runs one job and answers it; Err when the driver can no longer be told.
fn run_job<J: Jobs>(
    jobs: &J,
    job: &Job<J::Run>,
    cancels: &Cancels,
    writer: &Writer,
    dir: &Path,
) -> std::io::Result<()> {
    let outcome = match start(jobs, job, dir, &format!("job{}", job.id)) {
        Err(outcome) => outcome,
        Ok(mut running) => {
            if job.port.is_none() {
                let started = ToDriver::Started {
                    job: job.id,
                    port: running.port,
                };
                say(writer, &started)?;
            }
            let deadline = Instant::now() + Duration::from_millis(job.timeout_ms);
            let outcome = finish(jobs, job, &mut running, deadline, || {
                cancels.is_cancelled(job.id)
            });
            running.remove_files();
            outcome
        }
    };
    say(
        writer,
        &ToDriver::Done {
            job: job.id,
            outcome,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrate::child::exit_text;
    use std::net::TcpListener;

    /// A job's run here: a shell script, `PORT` and `JSON` standing for its port and result file.
    #[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
    struct Script {
        script: String,
    }

    /// Jobs that run `sh -c <script>`.
    struct Shell;

    impl Jobs for Shell {
        type Run = Script;

        fn command(&self, job: &Job<Script>, port: u16, json: &Path) -> Result<Launch, String> {
            if job.run.script.is_empty() {
                return Err("no script".into());
            }
            let script = job
                .run
                .script
                .replace("PORT", &port.to_string())
                .replace("JSON", &json.display().to_string());
            Ok(Launch::new("/bin/sh".into(), vec!["-c".into(), script]))
        }

        fn describe(&self, _: &Job<Script>, child: &Child, ended: &Ended) -> String {
            let how = match ended {
                Ended::Exited(s) => exit_text(*s),
                Ended::Killed(why) => format!("killed ({why:?})"),
                Ended::Lost(e) => e.clone(),
            };
            format!(
                "{} {how}: {}",
                child.name(),
                child.tail().unwrap_or_default()
            )
        }
    }

    fn job(id: u64, script: &str, side: Side, port: Option<u16>) -> ToWorker<Script> {
        ToWorker::Job(Job {
            id,
            run: Script {
                script: script.into(),
            },
            side,
            port,
            peer: 0,
            server_addr: None,
            impair: None,
            timeout_ms: 10_000,
        })
    }

    /// A driver on the other end of a worker serving [`Shell`] jobs.
    struct Driver {
        reader: BufReader<TcpStream>,
        writer: TcpStream,
        worker: std::thread::JoinHandle<Result<u8, WorkerError>>,
        _dir: tempfile::TempDir,
    }

    impl Driver {
        fn start() -> Driver {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let how = Serve {
                driver: "the test",
                silence: Some(Duration::from_secs(30)),
                dir: dir.path().to_owned(),
            };
            let worker = std::thread::spawn(move || {
                let stream = TcpStream::connect(addr).unwrap();
                let hello = Hello::new(1, 2, Default::default(), None, None);
                serve(stream, hello, Shell, &how)
            });
            let (stream, _) = listener.accept().unwrap();
            Driver {
                reader: BufReader::new(stream.try_clone().unwrap()),
                writer: stream,
                worker,
                _dir: dir,
            }
        }

        fn send(&mut self, msg: &ToWorker<Script>) {
            control::send(&mut self.writer, msg).unwrap();
        }

        fn recv(&mut self) -> ToDriver {
            control::recv(&mut self.reader).unwrap().unwrap()
        }

        fn done(&mut self) -> (u64, Outcome) {
            match self.recv() {
                ToDriver::Done { job, outcome } => (job, outcome),
                other => panic!("expected an outcome, got {other:?}"),
            }
        }

        fn end(self) -> Result<u8, WorkerError> {
            self.worker.join().unwrap()
        }
    }

    #[test]
    fn a_worker_says_hello_waits_for_its_welcome_and_answers_each_job() {
        let mut d = Driver::start();
        match d.recv() {
            ToDriver::Hello(h) => {
                assert_eq!(
                    (h.protocol.as_str(), h.rank, h.size),
                    (control::PROTOCOL, 1, 2)
                );
                assert_eq!(h.version, env!("CARGO_PKG_VERSION"));
            }
            other => panic!("expected a hello, got {other:?}"),
        }
        d.send(&ToWorker::Welcome { size: 2 });
        // A client's result file is read back; a server's is not.
        d.send(&job(
            1,
            "echo '{\"x\": PORT}' > JSON",
            Side::Client,
            Some(7),
        ));
        let (id, out) = d.done();
        assert_eq!((id, out.exit_code, out.error), (1, Some(0), None));
        assert_eq!(out.result, Some(serde_json::json!({"x": 7})));
        // A job that asks for a port is told which one it got before it ends.
        d.send(&job(2, "echo oops >&2; exit 3", Side::Server, None));
        let port = match d.recv() {
            ToDriver::Started { job: 2, port } => port,
            other => panic!("expected the port, got {other:?}"),
        };
        assert_ne!(port, 0);
        let (_, out) = d.done();
        assert_eq!(out.exit_code, Some(3));
        assert_eq!(out.error.as_deref(), Some("sh exited with status 3: oops"));
        assert_eq!(out.result, None);
        // A refused job says why; a cancelled one is killed.
        d.send(&job(3, "", Side::Server, Some(1)));
        assert_eq!(d.done().1.error.as_deref(), Some("no script"));
        d.send(&job(4, "sleep 30", Side::Server, Some(1)));
        d.send(&ToWorker::Cancel { job: 4 });
        let (id, out) = d.done();
        assert_eq!((id, out.exit_code), (4, None));
        assert_eq!(out.error.as_deref(), Some("sh killed (Cancelled): "));
        d.send(&ToWorker::Finish { code: 0 });
        assert_eq!(d.end().unwrap(), 0);
    }

    #[test]
    fn jobs_sent_together_run_together_and_each_cancel_reaches_its_own() {
        let mut d = Driver::start();
        let _hello = d.recv();
        d.send(&ToWorker::Welcome { size: 2 });
        // Job 1 waits for what job 2 does: run one after the other, job 1 would time out.
        let flag = d._dir.path().join("flag");
        let wait = format!("while [ ! -e {0} ]; do sleep 0.01; done", flag.display());
        d.send(&job(1, &wait, Side::Server, Some(1)));
        d.send(&job(
            2,
            &format!("touch {}", flag.display()),
            Side::Server,
            Some(2),
        ));
        let mut ended = [d.done(), d.done()];
        ended.sort_by_key(|(id, _)| *id);
        for (id, out) in &ended {
            assert_eq!(
                (out.exit_code, out.error.as_deref()),
                (Some(0), None),
                "job {id}"
            );
        }
        // Two jobs running, both cancelled: neither cancel hides the other.
        d.send(&job(3, "sleep 30", Side::Server, Some(1)));
        d.send(&job(4, "sleep 30", Side::Server, Some(2)));
        d.send(&ToWorker::Cancel { job: 3 });
        d.send(&ToWorker::Cancel { job: 4 });
        let mut ended = [d.done(), d.done()];
        ended.sort_by_key(|(id, _)| *id);
        assert_eq!(
            ended.map(|(id, out)| (id, out.exit_code)),
            [(3, None), (4, None)]
        );
        d.send(&ToWorker::Finish { code: 0 });
        assert_eq!(d.end().unwrap(), 0);
    }

    #[test]
    fn a_job_before_the_welcome_ends_the_session_and_an_abort_is_the_drivers_word() {
        let mut d = Driver::start();
        let _hello = d.recv();
        d.send(&job(1, "echo never", Side::Server, Some(1)));
        let err = d.end().unwrap_err();
        assert_eq!(
            err.to_string(),
            "lost the test: it sent a job before welcoming this worker"
        );
        assert_eq!(err.exit_code(), 1);
        let mut d = Driver::start();
        let _hello = d.recv();
        d.send(&ToWorker::Abort {
            code: 2,
            reason: "rank 1 runs roceperf 9.9.9".into(),
        });
        let err = d.end().unwrap_err();
        assert_eq!(
            (err.to_string().as_str(), err.exit_code()),
            ("rank 1 runs roceperf 9.9.9", 2)
        );
    }

    #[test]
    fn a_driver_that_goes_away_takes_the_running_job_with_it() {
        let mut d = Driver::start();
        let _hello = d.recv();
        d.send(&ToWorker::Welcome { size: 2 });
        d.send(&job(1, "sleep 30", Side::Server, Some(1)));
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let Driver {
            reader,
            writer,
            worker,
            _dir,
        } = d;
        drop((reader, writer));
        let err = worker.join().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "lost the test: it closed the connection");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the job was killed"
        );
    }
}
