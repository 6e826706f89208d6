//! A `--persist` server's port, open from one run to the next: the server takes one client at a time;
//! a client that connects while another is served is told so at once (whom the server serves, and
//! its place in the queue) and waits, its connection held until the runs before it end.
//!
//! A thread of its own accepts, so that a queued client hears at once, however long the run before
//! it takes; the server's loop takes clients from the queue in the order they came.

use super::frame::{self, Queued};
use super::{Error, Result, Step};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How often the waiting server, and the accepting thread, ask whether to stop.
const POLL: Duration = Duration::from_millis(50);

/// What the accepting thread and the server share.
#[derive(Default)]
struct Door {
    /// The client being served, while a run goes on.
    serving: Option<SocketAddr>,
    /// Clients accepted and not yet served, in the order they came.
    queue: VecDeque<(TcpStream, SocketAddr)>,
    /// Clients accepted so far (taken or queued).
    accepted: u64,
    /// The port failed; the server stops with this.
    failed: Option<io::Error>,
}

/// A server's port kept open across runs (`--persist`).
pub(crate) struct Listener {
    port: u16,
    door: Arc<(Mutex<Door>, Condvar)>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Listener(port {})", self.port)
    }
}

impl Listener {
    /// Listens on `port`, every IPv4 address, as `Channel::accept` does, and starts accepting.
    /// `on_queued`: what the server says when a client is queued (its address, whom it waits for, its
    /// place).
    pub(crate) fn bind(
        port: u16,
        on_queued: impl Fn(SocketAddr, SocketAddr, u64) + Send + 'static,
    ) -> Result<Listener> {
        let inner = TcpListener::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))
            .and_then(|l| l.set_nonblocking(true).map(|_| l))
            .map_err(|source| Error::Listen { port, source })?;
        let door = Arc::new((Mutex::new(Door::default()), Condvar::new()));
        let shared = door.clone();
        std::thread::Builder::new()
            .name("oob-listener".into())
            .spawn(move || accept_loop(&inner, &shared, &on_queued))
            .map_err(|source| Error::Listen { port, source })?;
        Ok(Listener { port, door })
    }

    /// Clients accepted so far, served or queued.
    pub(crate) fn accepted(&self) -> u64 {
        self.door.0.lock().map_or(0, |d| d.accepted)
    }

    /// The next client, in the order they came, once the last one's run is over; [`Error::Stopped`]
    /// once `stop` says so (asked every 50 ms) with none waiting.
    pub(crate) fn next(&self, stop: &dyn Fn() -> bool) -> Result<(TcpStream, SocketAddr)> {
        let (lock, ready) = &*self.door;
        let mut door = lock
            .lock()
            .expect("the accepting thread never panics holding the door");
        door.serving = None;
        loop {
            if let Some(source) = door.failed.take() {
                return Err(Error::Listen {
                    port: self.port,
                    source,
                });
            }
            if let Some((stream, peer)) = door.queue.pop_front() {
                door.serving = Some(peer);
                stream
                    .set_nonblocking(false)
                    .map_err(|source| Error::Listen {
                        port: self.port,
                        source,
                    })?;
                return Ok((stream, peer));
            }
            if stop() {
                return Err(Error::Stopped);
            }
            door = ready
                .wait_timeout(door, POLL)
                .expect("the accepting thread never panics holding the door")
                .0;
        }
    }
}

/// The accepting thread: every client goes to the queue; one that must wait (a run goes on, or
/// others wait before it) is told so first.
fn accept_loop(
    inner: &TcpListener,
    door: &(Mutex<Door>, Condvar),
    on_queued: &dyn Fn(SocketAddr, SocketAddr, u64),
) {
    loop {
        match inner.accept() {
            Ok((mut stream, peer)) => {
                let mut d = door
                    .0
                    .lock()
                    .expect("the server never panics holding the door");
                d.accepted += 1;
                let ahead = d.serving.or_else(|| d.queue.back().map(|(_, p)| *p));
                if let Some(serving) = ahead {
                    let place = d.queue.len() as u64 + 1;
                    // Best effort: a client that cannot be told fails its own run when taken.
                    let _ = tell_queued(&mut stream, d.serving.unwrap_or(serving), place);
                    on_queued(peer, d.serving.unwrap_or(serving), place);
                }
                d.queue.push_back((stream, peer));
                door.1.notify_all();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                std::thread::sleep(POLL);
            }
            Err(e) => {
                let mut d = door
                    .0
                    .lock()
                    .expect("the server never panics holding the door");
                d.failed = Some(e);
                door.1.notify_all();
                return;
            }
        }
    }
}

/// The hello of a queued client (its flag byte set), then whom the server serves and its place.
fn tell_queued(stream: &mut TcpStream, serving: SocketAddr, place: u64) -> io::Result<()> {
    stream.set_write_timeout(Some(Duration::from_secs(1)))?;
    let notice = Queued {
        serving: serving.to_string(),
        place,
    };
    stream.write_all(&frame::queued_hello())?;
    stream.write_all(&frame::encode(Step::Queued, &notice))
}
