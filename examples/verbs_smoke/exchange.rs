//! The smoke test's exchange over TCP and its completion checks: line-based JSON, data patterns, waits.

use anyhow::bail;
use roceperf::transport::verbs::VerbsEndpoint;
use roceperf::transport::{Completion, CompletionStatus, Endpoint};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Line-based JSON/text exchange over TCP.
pub(crate) struct Oob {
    pub(crate) r: BufReader<TcpStream>,
    pub(crate) w: TcpStream,
}

impl Oob {
    pub(crate) fn send(&mut self, line: &str) -> anyhow::Result<()> {
        writeln!(self.w, "{line}")?;
        Ok(self.w.flush()?)
    }
    pub(crate) fn recv(&mut self) -> anyhow::Result<String> {
        let mut s = String::new();
        if self.r.read_line(&mut s)? == 0 {
            bail!("the peer closed the exchange");
        }
        Ok(s.trim_end().to_string())
    }
    pub(crate) fn expect(&mut self, what: &str) -> anyhow::Result<()> {
        let got = self.recv()?;
        if got != what {
            bail!("expected '{what}' from the peer, got '{got}'");
        }
        Ok(())
    }
}

pub(crate) fn pattern(tag: u8, qp: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ tag ^ (qp as u8).wrapping_mul(101))
        .collect()
}

/// Polls until `want` completions arrived (30 s at most); a failed one ends the run with its detail.
pub(crate) fn wait(
    ep: &mut VerbsEndpoint,
    want: usize,
    accept_error: bool,
) -> anyhow::Result<Vec<Completion>> {
    let mut got = Vec::new();
    let mut buf = [Completion::EMPTY; 16];
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < want {
        let n = ep.poll_cq(&mut buf)?;
        for c in &buf[..n] {
            if c.status != CompletionStatus::Success && !accept_error {
                bail!("{}", ep.failure_detail().unwrap_or("completion failed"));
            }
            got.push(*c);
        }
        if Instant::now() > deadline {
            bail!("timed out with {} of {want} completions", got.len());
        }
    }
    Ok(got)
}

pub(crate) fn check(
    ep: &VerbsEndpoint,
    qp: usize,
    off: usize,
    expect: &[u8],
    what: &str,
) -> anyhow::Result<()> {
    let got = &ep.buffer(qp)[off..off + expect.len()];
    if got != expect {
        let first = got
            .iter()
            .zip(expect)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        bail!(
            "{what} on QP {qp}: data differs at byte {first} of {}",
            expect.len()
        );
    }
    println!("  ok: {what} on QP {qp}: {} bytes checked", expect.len());
    Ok(())
}
