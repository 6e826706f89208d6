//! A rank's side of the run: join rank 0, then run the jobs it sends, one at a time, answering each;
//! cancel a job when told; leave when rank 0 says the run is over or falls silent.

use super::job::Runner;
use super::proto::{self, Hello, ToCoordinator, ToWorker};
use std::io::{BufReader, BufWriter};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// How often rank 0 pings every rank.
pub(crate) const PING_INTERVAL: Duration = Duration::from_secs(5);
/// How long a rank waits for any word from rank 0 before it concludes rank 0 is gone (generous: rank 0
/// may be writing a big matrix's snapshot).
pub(crate) const SILENCE_LIMIT: Duration = Duration::from_secs(120);

/// Why a rank stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Rank 0 could not be reached in time.
    #[error("cannot reach the coordinator (rank 0) at {addr} within {secs} s: {reason}")]
    Unreachable {
        /// host:port.
        addr: String,
        /// How long it tried.
        secs: u64,
        /// The last error.
        reason: String,
    },
    /// The connection to rank 0 broke.
    #[error("lost the coordinator (rank 0): {0}")]
    Lost(String),
    /// Rank 0 stopped the run.
    #[error("{reason}")]
    Aborted {
        /// Exit code.
        code: u8,
        /// Why, as rank 0 put it.
        reason: String,
    },
}

impl WorkerError {
    /// The exit code: 2 for what rank 0 called a setup error, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            WorkerError::Aborted { code, .. } => *code,
            _ => 1,
        }
    }
}

/// Connects to rank 0, retrying until `timeout` (rank 0 may start last).
pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, WorkerError> {
    let addr = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let deadline = Instant::now() + timeout;
    let mut last = String::from("no address");
    let mut pause = Duration::from_millis(20);
    loop {
        match addr.to_socket_addrs() {
            Ok(addrs) => {
                for a in addrs {
                    match TcpStream::connect_timeout(&a, Duration::from_secs(2)) {
                        Ok(s) => return Ok(s),
                        Err(e) => last = e.to_string(),
                    }
                }
            }
            Err(e) => last = e.to_string(),
        }
        if Instant::now() + pause > deadline {
            return Err(WorkerError::Unreachable {
                addr,
                secs: timeout.as_secs(),
                reason: last,
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// Runs this rank over an open connection to rank 0: hello, jobs, until Finish (its exit code).
pub fn serve(stream: TcpStream, hello: Hello, runner: Runner) -> Result<u8, WorkerError> {
    let lost = |e: std::io::Error| WorkerError::Lost(e.to_string());
    stream.set_nodelay(true).map_err(lost)?;
    stream.set_read_timeout(Some(SILENCE_LIMIT)).map_err(lost)?;
    let writer = Arc::new(Mutex::new(BufWriter::new(
        stream.try_clone().map_err(lost)?,
    )));
    proto::send(
        &mut *writer.lock().expect("writer"),
        &ToCoordinator::Hello(hello),
    )
    .map_err(lost)?;
    let cancel = Arc::new(AtomicU64::new(0));
    let (jobs_tx, jobs_rx) = mpsc::channel::<proto::Job>();
    let job_thread = {
        let (writer, cancel) = (writer.clone(), cancel.clone());
        std::thread::Builder::new()
            .name("fabric-job".into())
            .spawn(move || {
                for job in jobs_rx {
                    let outcome = runner.run(&job, &cancel);
                    let msg = ToCoordinator::Done {
                        job: job.id,
                        outcome,
                    };
                    if proto::send(&mut *writer.lock().expect("writer"), &msg).is_err() {
                        break;
                    }
                }
            })
            .map_err(lost)?
    };
    let mut reader = BufReader::new(stream);
    let result = loop {
        match proto::recv::<ToWorker, _>(&mut reader) {
            Ok(Some(ToWorker::Job(job))) => {
                if jobs_tx.send(job).is_err() {
                    break Err(WorkerError::Lost("the job runner stopped".into()));
                }
            }
            Ok(Some(ToWorker::Cancel { job })) => cancel.store(job, Ordering::Release),
            Ok(Some(ToWorker::Welcome { .. } | ToWorker::Ping)) => {}
            Ok(Some(ToWorker::Finish { code })) => break Ok(code),
            Ok(Some(ToWorker::Abort { code, reason })) => {
                break Err(WorkerError::Aborted { code, reason });
            }
            Ok(None) => break Err(WorkerError::Lost("it closed the connection".into())),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break Err(WorkerError::Lost(format!(
                    "no word from it for {} s",
                    SILENCE_LIMIT.as_secs()
                )));
            }
            Err(e) => break Err(lost(e)),
        }
    };
    drop(jobs_tx);
    if result.is_ok() {
        let _ = job_thread.join();
    }
    result
}
