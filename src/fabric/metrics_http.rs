//! `--metrics-listen ADDR:PORT`: rank 0 serves the latest round of a watching fabric to Prometheus.
//! A small HTTP/1.1 responder on std's `TcpListener`, in its own thread, one connection at a time (a
//! scrape every few seconds): `GET /metrics` (and `HEAD`) answer the exposition, any other path 404,
//! any other method 405; every answer closes its connection.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The content type of Prometheus' text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The longest request head read (a scrape's is a few hundred bytes).
const MAX_HEAD: usize = 8192;

/// What the server answers `/metrics` with; rank 0 replaces it as each round ends.
#[derive(Clone, Default)]
pub(crate) struct Exposition(Arc<Mutex<Arc<str>>>);

impl Exposition {
    /// Replaces the exposition served.
    pub(crate) fn set(&self, text: String) {
        let text: Arc<str> = text.into();
        match self.0.lock() {
            Ok(mut g) => *g = text,
            Err(poisoned) => *poisoned.into_inner() = text,
        }
    }

    fn get(&self) -> Arc<str> {
        match self.0.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

/// Why `--metrics-listen` cannot serve.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot listen on --metrics-listen {addr}: {source}; pick a free port (or an address of this host)"
)]
pub(crate) struct ListenError {
    addr: SocketAddr,
    source: std::io::Error,
}

/// Binds `addr` and serves `exposition` from a thread of its own for the rest of the process.
pub(crate) fn serve(addr: SocketAddr, exposition: Exposition) -> Result<SocketAddr, ListenError> {
    let listener = TcpListener::bind(addr).map_err(|source| ListenError { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ListenError { addr, source })?;
    std::thread::Builder::new()
        .name("fabric-metrics".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                // A client that stalls or goes away costs its timeout, never the run.
                let _ = answer(stream, &exposition);
            }
        })
        .map_err(|source| ListenError { addr, source })?;
    Ok(bound)
}

/// Reads one request's head and answers it.
fn answer(mut stream: TcpStream, exposition: &Exposition) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, body, extra): (&str, Arc<str>, &str) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => ("200 OK", exposition.get(), ""),
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            "roce_fabric serves its metrics at /metrics\n".into(),
            "",
        ),
        _ => (
            "405 Method Not Allowed",
            "roce_fabric answers GET and HEAD\n".into(),
            "Allow: GET, HEAD\r\n",
        ),
    };
    let content_type = if status.starts_with("200") {
        CONTENT_TYPE
    } else {
        "text/plain; charset=utf-8"
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    )?;
    if method != "HEAD" {
        stream.write_all(body.as_bytes())?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(addr: SocketAddr, req: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn metrics_are_served_and_everything_else_refused() {
        let e = Exposition::default();
        let addr = serve("127.0.0.1:0".parse().unwrap(), e.clone()).unwrap();
        e.set("a_total 1\n".into());
        let ok = request(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("Content-Type: text/plain; version=0.0.4"),
            "{ok}"
        );
        assert!(ok.ends_with("\r\n\r\na_total 1\n"), "{ok}");
        e.set("a_total 2\n".into());
        let again = request(addr, "GET /metrics?x=1 HTTP/1.1\r\n\r\n");
        assert!(again.ends_with("a_total 2\n"), "{again}");
        let head = request(addr, "HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(head.contains("Content-Length: 10\r\n") && head.ends_with("\r\n\r\n"));
        let missing = request(addr, "GET / HTTP/1.1\r\n\r\n");
        assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
        let post = request(addr, "POST /metrics HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 ") && post.contains("Allow: GET, HEAD"));
    }

    #[test]
    fn a_port_in_use_is_named_by_its_flag() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let e = serve(addr, Exposition::default()).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("cannot listen on --metrics-listen {addr}")),
            "{e}"
        );
    }
}
