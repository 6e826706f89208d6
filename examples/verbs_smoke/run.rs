//! The smoke test's run: the session set-up, the server's and the client's checks, streaming, retries.

use anyhow::{Context, anyhow, bail};
use roceperf::transport::verbs::VerbsEndpoint;
use roceperf::transport::{
    Completion, CompletionOp, CompletionStatus, ConnInfo, Endpoint, RecvRequest, RemoteAddr,
    SendOp, SendRequest,
};
use std::io::BufReader;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::exchange::{Oob, check, pattern, wait};
use crate::{Common, Run, config};

pub(crate) fn session(c: &Common, run: &Run, server: Option<String>) -> anyhow::Result<()> {
    let mut ep = VerbsEndpoint::open(&config(c, Some(run)))?;
    let role = if server.is_some() { "client" } else { "server" };
    let s = ep.setup().clone();
    println!(
        "{role}: device {} port {} {}",
        s.device,
        s.port,
        s.gid_line()
    );
    let stream = match &server {
        None => {
            let l = TcpListener::bind(("0.0.0.0", run.tcp_port)).context("listen")?;
            l.accept().context("accept")?.0
        }
        Some(host) => {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match TcpStream::connect((host.as_str(), run.tcp_port)) {
                    Ok(s) => break s,
                    Err(e) if Instant::now() > deadline => {
                        return Err(anyhow!("connect {host}: {e}"));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        }
    };
    let mut oob = Oob {
        r: BufReader::new(stream.try_clone()?),
        w: stream,
    };
    oob.send(&serde_json::to_string(&ep.local_info())?)?;
    let peer: ConnInfo = serde_json::from_str(&oob.recv()?).context("peer ConnInfo")?;
    ep.connect(&peer)?;
    println!(
        "{role}: connected {} QPs, path MTU {}, peer GID {}",
        ep.qp_count(),
        ep.setup().path_mtu.unwrap_or(0),
        std::net::Ipv6Addr::from(peer.gid)
    );
    match (run.scenario.as_str(), server.is_some()) {
        ("retry", false) => {
            oob.send("bye")?;
            println!(
                "server: leaving without answering, so the client's SEND must exhaust its retries"
            );
            Ok(())
        }
        ("retry", true) => retry_client(&mut ep, &mut oob, run),
        ("checks", true) => client(&mut ep, &mut oob, &peer, run),
        ("checks", false) => serve(&mut ep, &mut oob, &peer, run),
        (other, _) => bail!("--scenario {other}: expected checks or retry"),
    }
}

/// Waits for the one completion of `what`, which must fail with `want` (`want_text` in words), and
/// prints the driver's detail of the failure.
fn expect_failure(
    ep: &mut VerbsEndpoint,
    what: &str,
    want: CompletionStatus,
    want_text: &str,
) -> anyhow::Result<()> {
    let c = wait(ep, 1, true)?;
    if c[0].status != want {
        bail!("{what}: expected {want_text}, got {:?}", c[0]);
    }
    println!(
        "  ok: {what} failed as expected: {}",
        ep.failure_detail().unwrap_or("?")
    );
    Ok(())
}

/// A receive of no bytes: what a WRITE with immediate consumes.
fn imm_recv(wr_id: u64) -> RecvRequest {
    RecvRequest {
        wr_id,
        offset: 0,
        len: 0,
    }
}

fn serve(ep: &mut VerbsEndpoint, oob: &mut Oob, peer: &ConnInfo, run: &Run) -> anyhow::Result<()> {
    let s = run.size as usize;
    let q = ep.qp_count();
    // SEND: two receives per QP.
    for qp in 0..q {
        for (k, off) in [0usize, s].into_iter().enumerate() {
            ep.post_recv(
                qp,
                &RecvRequest {
                    wr_id: (qp * 10 + k) as u64,
                    offset: off as u64,
                    len: run.size,
                },
            )?;
        }
    }
    oob.send("send-ready")?;
    let recvs = wait(ep, 2 * q, false)?;
    for qp in 0..q {
        check(ep, qp, 0, &pattern(1, qp, s), "SEND")?;
        check(ep, qp, s, &pattern(2, qp, s), "SEND with immediate")?;
        let imm = recvs.iter().find(|c| c.qp == qp as u32 && c.imm.is_some());
        match imm {
            Some(c)
                if c.imm == Some(0xab00_0000 + qp as u32)
                    && c.byte_len == run.size
                    && c.op == CompletionOp::Recv =>
            {
                println!("  ok: immediate 0x{:08x} on QP {qp}", c.imm.unwrap())
            }
            other => bail!("SEND with immediate on QP {qp}: completion {other:?}"),
        }
    }
    // WRITE then WRITE with immediate: one receive per QP for the immediate.
    for qp in 0..q {
        ep.post_recv(qp, &imm_recv(100 + qp as u64))?;
    }
    oob.send("write-ready")?;
    let wimm = wait(ep, q, false)?;
    for c in &wimm {
        if c.op != CompletionOp::RecvWithImm || c.imm != Some(0xcd00_0000 + c.qp) {
            bail!("WRITE with immediate: unexpected completion {c:?}");
        }
    }
    for qp in 0..q {
        check(ep, qp, 2 * s, &pattern(3, qp, s), "RDMA WRITE")?;
        check(
            ep,
            qp,
            3 * s,
            &pattern(4, qp, s),
            "RDMA WRITE with immediate",
        )?;
    }
    // READ: the client reads [0, s) after we fill it.
    for qp in 0..q {
        ep.buffer_mut(qp)[..s].copy_from_slice(&pattern(5, qp, s));
    }
    oob.send("read-ready")?;
    oob.expect("read-done")?;
    stream(ep, oob, peer, run, run.bidir, true)?;
    oob.expect("bad-rkey-done")?;
    println!("server: all checks passed");
    Ok(())
}

fn client(ep: &mut VerbsEndpoint, oob: &mut Oob, peer: &ConnInfo, run: &Run) -> anyhow::Result<()> {
    let s = run.size as usize;
    let q = ep.qp_count();
    let inline = run.inline >= run.size;
    oob.expect("send-ready")?;
    for qp in 0..q {
        ep.buffer_mut(qp)[..s].copy_from_slice(&pattern(1, qp, s));
        ep.buffer_mut(qp)[s..2 * s].copy_from_slice(&pattern(2, qp, s));
        let base = SendRequest {
            inline,
            ..SendRequest::new(1, SendOp::Send, 0, run.size, None)
        };
        ep.post_send(qp, &base)?;
        ep.post_send(
            qp,
            &SendRequest {
                wr_id: 2,
                op: SendOp::SendWithImm(0xab00_0000 + qp as u32),
                offset: s as u64,
                ..base
            },
        )?;
    }
    wait(ep, 2 * q, false)?;
    println!(
        "  ok: {} SENDs completed{}",
        2 * q,
        if inline { " (inline)" } else { "" }
    );
    oob.expect("write-ready")?;
    for qp in 0..q {
        let r = &peer.qps[qp];
        ep.buffer_mut(qp)[2 * s..3 * s].copy_from_slice(&pattern(3, qp, s));
        ep.buffer_mut(qp)[3 * s..4 * s].copy_from_slice(&pattern(4, qp, s));
        let w = SendRequest {
            wr_id: 3,
            op: SendOp::Write,
            offset: 2 * s as u64,
            len: run.size,
            remote: Some(RemoteAddr {
                addr: r.vaddr + 2 * s as u64,
                rkey: r.rkey,
            }),
            // Unsignaled, as perftest's CQ moderation does: the next signaled request covers it.
            signaled: false,
            inline: false,
        };
        ep.post_send(qp, &w)?;
        ep.post_send(
            qp,
            &SendRequest {
                wr_id: 4,
                op: SendOp::WriteWithImm(0xcd00_0000 + qp as u32),
                offset: 3 * s as u64,
                remote: Some(RemoteAddr {
                    addr: r.vaddr + 3 * s as u64,
                    rkey: r.rkey,
                }),
                signaled: true,
                ..w
            },
        )?;
    }
    let done = wait(ep, q, false)?;
    if done
        .iter()
        .any(|c| c.wr_id != 4 || c.op != CompletionOp::Write)
    {
        bail!("WRITE: unexpected completions {done:?}");
    }
    println!("  ok: {q} WRITE + WRITE with immediate completed (one signaled per pair)");
    oob.expect("read-ready")?;
    for qp in 0..q {
        let r = &peer.qps[qp];
        ep.buffer_mut(qp)[..s].fill(0);
        let remote = RemoteAddr {
            addr: r.vaddr,
            rkey: r.rkey,
        };
        ep.post_send(
            qp,
            &SendRequest::new(5, SendOp::Read, 0, run.size, Some(remote)),
        )?;
    }
    let reads = wait(ep, q, false)?;
    for c in &reads {
        if c.op != CompletionOp::Read || c.byte_len != run.size {
            bail!("READ: unexpected completion {c:?}");
        }
    }
    for qp in 0..q {
        check(ep, qp, 0, &pattern(5, qp, s), "RDMA READ")?;
    }
    oob.send("read-done")?;
    stream(ep, oob, peer, run, true, run.bidir)?;
    // A READ with a wrong rkey must come back as a remote access error, named.
    let r = &peer.qps[0];
    let wrong = RemoteAddr {
        addr: r.vaddr,
        rkey: r.rkey ^ 0x00ff_0000,
    };
    ep.post_send(
        0,
        &SendRequest::new(6, SendOp::Read, 0, run.size, Some(wrong)),
    )?;
    expect_failure(
        ep,
        "READ with a wrong rkey",
        CompletionStatus::RemoteAccessError,
        "a remote access error",
    )?;
    oob.send("bad-rkey-done")?;
    println!("client: all checks passed");
    Ok(())
}

/// Streams `-n` WRITEs per QP to the peer with at most `-t` in flight and one signaled in `-Q` (the
/// shape of a write_bw run), the last one a WRITE with immediate; when the peer streams too, waits
/// for its immediates and checks the last block it wrote.
fn stream(
    ep: &mut VerbsEndpoint,
    oob: &mut Oob,
    peer: &ConnInfo,
    run: &Run,
    active: bool,
    peer_active: bool,
) -> anyhow::Result<()> {
    let s = run.size as usize;
    let q = ep.qp_count();
    let total = u64::from(run.iters.max(1));
    let cq_mod = u64::from(run.cq_mod.max(1));
    let depth = u64::from(run.tx_depth);
    for qp in 0..q {
        ep.buffer_mut(qp)[2 * s..3 * s].copy_from_slice(&pattern(3, qp, s));
        ep.buffer_mut(qp)[3 * s..4 * s].copy_from_slice(&pattern(6, qp, s));
        if peer_active {
            ep.post_recv(qp, &imm_recv(200 + qp as u64))?;
        }
    }
    oob.send("stream-ready")?;
    oob.expect("stream-ready")?;
    let (mut posted, mut done) = (vec![0u64; q], vec![0u64; q]);
    let mut imms = 0;
    let want_imms = if peer_active { q } else { 0 };
    let mut buf = [Completion::EMPTY; 16];
    let deadline = Instant::now() + Duration::from_secs(120);
    while (active && done.iter().any(|&d| d < total)) || imms < want_imms {
        for qp in 0..q {
            while active && posted[qp] < total && posted[qp] - done[qp] < depth {
                let i = posted[qp];
                let last = i + 1 == total;
                let off = if last { 3 * s } else { 2 * s } as u64;
                let wr = SendRequest {
                    wr_id: i,
                    op: if last {
                        SendOp::WriteWithImm(0xee00_0000 + qp as u32)
                    } else {
                        SendOp::Write
                    },
                    offset: off,
                    len: run.size,
                    remote: Some(RemoteAddr {
                        addr: peer.qps[qp].vaddr + off,
                        rkey: peer.qps[qp].rkey,
                    }),
                    signaled: last || (i + 1) % cq_mod == 0,
                    inline: false,
                };
                match ep.post_send(qp, &wr) {
                    Ok(()) => posted[qp] += 1,
                    Err(roceperf::transport::Error::QueueFull) => break,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let n = ep.poll_cq(&mut buf)?;
        for c in &buf[..n] {
            if c.status != CompletionStatus::Success {
                bail!("{}", ep.failure_detail().unwrap_or("completion failed"));
            }
            match c.op {
                // RC completes in order: a signaled request covers every earlier one on its QP.
                CompletionOp::Write => done[c.qp as usize] = c.wr_id + 1,
                CompletionOp::RecvWithImm if c.imm == Some(0xee00_0000 + c.qp) => imms += 1,
                _ => bail!("stream: unexpected completion {c:?}"),
            }
        }
        if Instant::now() > deadline {
            bail!(
                "stream timed out: {done:?} of {total} per QP done, {imms} of {want_imms} immediates"
            );
        }
    }
    if active {
        println!(
            "  ok: streamed {total} WRITEs of {} bytes on each of {q} QPs (-t {depth}, one signaled in {cq_mod})",
            run.size
        );
    }
    for qp in 0..q {
        if peer_active {
            check(
                ep,
                qp,
                3 * s,
                &pattern(6, qp, s),
                "streamed WRITE with immediate (last block)",
            )?;
        }
    }
    Ok(())
}

/// The peer is gone: a SEND must come back as IBV_WC_RETRY_EXC_ERR, with the hint.
fn retry_client(ep: &mut VerbsEndpoint, oob: &mut Oob, run: &Run) -> anyhow::Result<()> {
    oob.expect("bye")?;
    // Wait until the server process has closed the exchange, i.e. its QPs are destroyed.
    let _ = oob.recv();
    ep.post_send(0, &SendRequest::new(9, SendOp::Send, 0, run.size, None))?;
    expect_failure(
        ep,
        "SEND to a vanished peer",
        CompletionStatus::RetryExceeded,
        "retry exceeded",
    )?;
    println!("client: all checks passed");
    Ok(())
}
