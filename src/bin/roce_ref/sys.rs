//! Small system helpers: socket options, socket buffers, pinning to a core, and spinning with a timeout.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How long a peer may stay silent mid-run before the run fails.
pub const SILENCE: Duration = Duration::from_secs(10);

/// Bytes asked for SO_RCVBUF and SO_SNDBUF of a stream's sockets.
pub const STREAM_SOCKET_BUFFER: usize = 8 << 20;

/// setsockopt of one int.
pub fn set_int(
    fd: RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: value lives across the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &value as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Grows both socket buffers to `bytes`, past the sysctl limits where we may (SO_*BUFFORCE needs
/// CAP_NET_ADMIN), within them otherwise.
pub fn grow_buffers(fd: RawFd, bytes: usize) -> io::Result<()> {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if set_int(fd, libc::SOL_SOCKET, force, v).is_err() {
            set_int(fd, libc::SOL_SOCKET, plain, v)?;
        }
    }
    Ok(())
}

/// Pins the calling thread to `requested`, or by default (as roceperf does) a server to the last core
/// this process may use and a client to the one before it. Returns the core.
pub fn pin(requested: Option<usize>, server: bool) -> Result<usize> {
    let ids = core_affinity::get_core_ids().unwrap_or_default();
    let id = match requested {
        Some(r) => ids.iter().copied().find(|c| c.id == r).ok_or_else(|| {
            let avail: Vec<String> = ids.iter().map(|c| c.id.to_string()).collect();
            Error::Usage(format!(
                "core {r} (--cpu or --server-cpu) is not one this process may use: {}",
                avail.join(",")
            ))
        })?,
        None => {
            let pick = if !server && ids.len() >= 2 {
                ids.len() - 2
            } else {
                ids.len().saturating_sub(1)
            };
            *ids.get(pick).ok_or_else(|| {
                Error::setup(
                    "listing the cores to pin to",
                    io::Error::other("none reported"),
                )
            })?
        }
    };
    if !core_affinity::set_for_current(id) {
        return Err(Error::setup(
            format!("pinning to core {}", id.id),
            io::Error::last_os_error(),
        ));
    }
    Ok(id.id)
}

/// Counts empty polls and reads the clock only every few thousand of them, so a spinning loop notices
/// a silent peer without a clock read per poll.
pub struct Patience {
    polls: u32,
    idle_since: Option<Instant>,
    limit: Duration,
}

impl Patience {
    /// Gives up after `limit` of nothing.
    pub fn new(limit: Duration) -> Patience {
        Patience {
            polls: 0,
            idle_since: None,
            limit,
        }
    }

    /// Something arrived: start counting again.
    #[inline]
    pub fn reset(&mut self) {
        self.polls = 0;
        self.idle_since = None;
    }

    /// One more empty poll; false once `limit` has passed since the polls went empty.
    #[inline]
    pub fn wait(&mut self) -> bool {
        self.polls = self.polls.wrapping_add(1);
        if !self.polls.is_multiple_of(4096) {
            return true;
        }
        let now = Instant::now();
        let since = *self.idle_since.get_or_insert(now);
        now.duration_since(since) < self.limit
    }
}

/// errno values that mean "not now, try again" on a non-blocking send.
pub fn is_busy(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR)
    )
}
