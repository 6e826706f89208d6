//! Reaching a server that may not be up yet: one connect-retry loop for every client.
//!
//! The host and port as given, resolved once (or every round, for a name that may not exist yet); used
//! by roceperf's dialect, perftest's, and the control connections of `roce_compare` and `roce_fabric`.

use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A server's host as given on the command line, and its port. Shown as `host:port`, or `[host]:port`
/// for an IPv6 address; resolved as the pair, so an IPv6 host needs no brackets (they are accepted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostPort {
    host: String,
    port: u16,
}

impl HostPort {
    /// `host` may be a name, an IPv4 or IPv6 address, or an IPv6 address in brackets.
    pub(crate) fn new(host: &str, port: u16) -> HostPort {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        HostPort {
            host: bare.to_string(),
            port,
        }
    }

    /// Every address the host resolves to, with the port.
    pub(crate) fn resolve(&self) -> io::Result<Vec<SocketAddr>> {
        Ok((self.host.as_str(), self.port).to_socket_addrs()?.collect())
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl ToSocketAddrs for HostPort {
    type Iter = std::vec::IntoIter<SocketAddr>;
    fn to_socket_addrs(&self) -> io::Result<Self::Iter> {
        Ok(self.resolve()?.into_iter())
    }
}

/// How a client keeps trying a server that is not up yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retry {
    /// Give up this long after the first attempt.
    pub wait: Duration,
    /// Pause between two rounds of attempts.
    pub(crate) pause: Duration,
    /// Longest single attempt; `None`: whatever is left of `wait` (at least 10 ms).
    pub attempt: Option<Duration>,
}

/// Why [`connect`] made no connection.
#[derive(Debug)]
pub(crate) enum DialError {
    /// The last address of a round failed in a way the caller said not to retry.
    Fatal(io::Error),
    /// `wait` is over; the last error seen (`None`: there was no address to try).
    GaveUp(Option<io::Error>),
}

/// Connects to the first of `addrs` that answers, in rounds until `retry.wait` is over. A round fails
/// for good when its last error is not `retryable` (a refused connection usually is: the server is not
/// listening yet). `on_retry` runs once, before the first pause.
pub(crate) fn connect(
    addrs: &[SocketAddr],
    retry: Retry,
    retryable: impl Fn(&io::Error) -> bool,
    on_retry: impl FnOnce(),
) -> Result<(TcpStream, SocketAddr), DialError> {
    in_rounds(|| Ok(addrs.to_vec()), retry, retryable, on_retry)
}

/// [`connect`] to `server`, resolving its name again every round: a name that does not resolve yet
/// (the DNS record of a pod that is starting) is retried like a server that does not listen yet.
pub(crate) fn connect_host(
    server: &HostPort,
    retry: Retry,
) -> Result<(TcpStream, SocketAddr), DialError> {
    in_rounds(|| server.resolve(), retry, |_| true, || {})
}

/// The one connect-retry loop: each round resolves with `addrs`, then tries every address.
fn in_rounds(
    addrs: impl Fn() -> io::Result<Vec<SocketAddr>>,
    retry: Retry,
    retryable: impl Fn(&io::Error) -> bool,
    on_retry: impl FnOnce(),
) -> Result<(TcpStream, SocketAddr), DialError> {
    let deadline = Instant::now() + retry.wait;
    let mut on_retry = Some(on_retry);
    let mut last = None;
    loop {
        match addrs() {
            Ok(addrs) => {
                for a in addrs {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let timeout = retry.attempt.unwrap_or(left).max(Duration::from_millis(10));
                    match TcpStream::connect_timeout(&a, timeout) {
                        Ok(stream) => return Ok((stream, a)),
                        Err(e) => last = Some(e),
                    }
                }
            }
            Err(e) => last = Some(e),
        }
        match last {
            Some(e) if !retryable(&e) => return Err(DialError::Fatal(e)),
            _ => {}
        }
        if Instant::now() + retry.pause > deadline {
            return Err(DialError::GaveUp(last));
        }
        if let Some(f) = on_retry.take() {
            f();
        }
        std::thread::sleep(retry.pause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn ipv6_hosts_are_shown_in_brackets_and_resolve_without_them() {
        assert_eq!(HostPort::new("::1", 18515).to_string(), "[::1]:18515");
        assert_eq!(HostPort::new("[::1]", 18515).to_string(), "[::1]:18515");
        assert_eq!(HostPort::new("[::1]", 1).host, "::1");
        assert_eq!(
            HostPort::new("10.0.0.1", 18515).to_string(),
            "10.0.0.1:18515"
        );
        assert_eq!(
            HostPort::new("[::1]", 7).resolve().unwrap(),
            vec!["[::1]:7".parse::<SocketAddr>().unwrap()]
        );
    }

    #[test]
    fn retries_until_a_listener_appears_then_gives_up_naming_the_last_error() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addrs = HostPort::new("127.0.0.1", port).resolve().unwrap();
        let retry = Retry {
            wait: Duration::from_secs(5),
            pause: Duration::from_millis(50),
            attempt: None,
        };
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
            l.accept().unwrap();
        });
        let mut retried = false;
        let (_, peer) = connect(&addrs, retry, |_| true, || retried = true).unwrap();
        assert_eq!((peer.port(), retried), (port, true));
        t.join().unwrap();
        let short = Retry {
            wait: Duration::from_millis(100),
            ..retry
        };
        assert!(matches!(
            connect(&addrs, short, |_| true, || {}),
            Err(DialError::GaveUp(Some(_)))
        ));
        assert!(matches!(
            connect(&addrs, short, |_| false, || {}),
            Err(DialError::Fatal(_))
        ));
        assert!(matches!(
            connect(&[], short, |_| true, || {}),
            Err(DialError::GaveUp(None))
        ));
    }

    #[test]
    fn a_name_that_does_not_resolve_yet_is_retried_until_the_end() {
        let retry = Retry {
            wait: Duration::from_millis(150),
            pause: Duration::from_millis(50),
            attempt: None,
        };
        let started = Instant::now();
        let nowhere = HostPort::new("no-such-host.invalid", 1);
        match connect_host(&nowhere, retry) {
            Err(DialError::GaveUp(Some(e))) => assert!(!e.to_string().is_empty()),
            other => panic!("expected to give up naming the lookup error, got {other:?}"),
        }
        assert!(
            started.elapsed() >= Duration::from_millis(100),
            "it retried"
        );
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let here = HostPort::new("127.0.0.1", l.local_addr().unwrap().port());
        assert!(connect_host(&here, retry).is_ok());
    }
}
