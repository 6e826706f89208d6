//! Function check of the verbs transport on a real device (ConnectX, E810, or kernel Soft-RoCE).
//!
//! ```text
//! verbs_smoke devices [-d DEV] [-x N] [--roce v1|v2] [--ipv6]     list devices, GID tables, the choice
//! verbs_smoke server  [-d DEV] [--port 18600] [-q 2] [-s 4096] [-I 64]
//! verbs_smoke client  [-d DEV] [--port 18600] [-q 2] [-s 4096] [-I 64] SERVER_IP
//! ```
//! Server and client exchange `ConnInfo` as JSON lines over TCP, connect their QPs and run, on every
//! QP: SEND (inline when `-I` allows) and SEND with immediate, RDMA WRITE and WRITE with immediate,
//! RDMA READ, each checked byte for byte, then a READ with a wrong rkey that must fail with the
//! remote access error. Exit codes: 0 all checks passed, 1 a check failed, 2 setup error.

use anyhow::{Context, anyhow, bail};
use clap::{Parser, Subcommand};
use roceperf::params::RoceVersion;
use roceperf::transport::verbs::{VerbsConfig, VerbsEndpoint, VerbsError, discover, gid};
use roceperf::transport::{
    Completion, CompletionOp, CompletionStatus, ConnInfo, Endpoint, RecvRequest, RemoteAddr,
    SendOp, SendRequest,
};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(about = "Function check of roceperf's verbs transport")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Debug, Clone)]
struct Common {
    /// RDMA device (first one when absent).
    #[arg(short = 'd')]
    device: Option<String>,
    /// Port number.
    #[arg(short = 'i', default_value_t = 1)]
    port: u8,
    /// GID index, used as given.
    #[arg(short = 'x')]
    gid_index: Option<u32>,
    /// RoCE version (v1 or v2): restricts the GID choice.
    #[arg(long, value_parser = parse_roce)]
    roce: Option<RoceVersion>,
    /// Prefer IPv6 GIDs.
    #[arg(long)]
    ipv6: bool,
    /// Path MTU in bytes.
    #[arg(short = 'm')]
    mtu: Option<u32>,
    /// Local ACK timeout exponent (4.096 µs × 2^u); raise it under emulation, where 14 (67 ms) is
    /// shorter than a window of large messages takes and spurious retransmissions follow.
    #[arg(short = 'u', default_value_t = 14)]
    timeout: u8,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// List devices, ports and GID tables; with -d, also open it and show the GID choice.
    Devices {
        #[command(flatten)]
        common: Common,
    },
    /// Wait for a client and answer its checks.
    Server {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        run: Run,
    },
    /// Connect to a server and run the checks.
    Client {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        run: Run,
        /// The server's address for the TCP exchange.
        server: String,
    },
}

#[derive(clap::Args, Debug, Clone)]
struct Run {
    /// TCP port of the exchange.
    #[arg(long, default_value_t = 18600)]
    tcp_port: u16,
    /// Queue pairs.
    #[arg(short = 'q', default_value_t = 2)]
    qps: usize,
    /// Message size in bytes.
    #[arg(short = 's', default_value_t = 4096)]
    size: u32,
    /// Inline size (0: no inline).
    #[arg(short = 'I', default_value_t = 64)]
    inline: u32,
    /// Send-queue depth per QP.
    #[arg(short = 't', default_value_t = 16)]
    tx_depth: u32,
    /// CQ moderation of the streaming phase: one signaled WRITE in Q.
    #[arg(short = 'Q', default_value_t = 4)]
    cq_mod: u32,
    /// WRITEs per QP in the streaming phase.
    #[arg(short = 'n', default_value_t = 200)]
    iters: u32,
    /// Bidirectional streaming: the server streams WRITEs to the client too.
    #[arg(short = 'b')]
    bidir: bool,
    /// `checks` (default) or `retry`: the server leaves right after connecting and the client's SEND
    /// must end in the retry-exceeded error, named.
    #[arg(long, default_value = "checks")]
    scenario: String,
}

fn parse_roce(s: &str) -> Result<RoceVersion, String> {
    match s {
        "v1" | "1" => Ok(RoceVersion::V1),
        "v2" | "2" => Ok(RoceVersion::V2),
        _ => Err(format!("--roce {s}: expected v1 or v2")),
    }
}

fn config(c: &Common, run: Option<&Run>) -> VerbsConfig {
    let mut cfg = VerbsConfig {
        device: c.device.clone(),
        ib_port: c.port,
        gid_index: c.gid_index,
        roce: c.roce,
        ipv6: c.ipv6,
        mtu: c.mtu,
        timeout: c.timeout,
        ..VerbsConfig::default()
    };
    if let Some(r) = run {
        cfg.qps = r.qps;
        cfg.buf_size = 4 * r.size as usize;
        cfg.inline_size = r.inline;
        cfg.tx_depth = r.tx_depth;
        if r.scenario == "retry" {
            // rxe retries forever with retry_cnt 7 (perftest's value); 2 retries of ~16 ms end it.
            cfg.retry_cnt = 2;
            cfg.timeout = 12;
        }
        cfg.rx_depth = 16;
    }
    cfg
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Devices { common } => devices(&common),
        Cmd::Server { common, run } => session(&common, &run, None),
        Cmd::Client {
            common,
            run,
            server,
        } => session(&common, &run, Some(server)),
    };
    if let Err(e) = result {
        if let Some(v) = e.downcast_ref::<VerbsError>() {
            eprintln!("verbs_smoke: {v}");
            std::process::exit(v.exit_code());
        }
        eprintln!("verbs_smoke: FAILED: {e:#}");
        std::process::exit(1);
    }
}

fn devices(c: &Common) -> anyhow::Result<()> {
    for d in discover()? {
        println!(
            "{}: vendor 0x{:x} part {} fw {} max_qp_wr {} max_qp_rd_atom {}",
            d.name, d.vendor_id, d.vendor_part_id, d.firmware, d.max_qp_wr, d.max_qp_rd_atom
        );
        for p in &d.ports {
            println!(
                "  port {} {} link {} active_mtu {} max_mtu {}",
                p.port, p.state, p.link_layer, p.active_mtu, p.max_mtu
            );
            println!(
                "{}",
                gid::format_table(&p.gids)
                    .replace("\n  ", "\n    ")
                    .replacen("  ", "    ", 1)
            );
        }
    }
    if c.device.is_some() {
        let ep = VerbsEndpoint::open(&config(c, None))?;
        let s = ep.setup();
        println!("open {} port {}: {}", s.device, s.port, s.gid_line());
        println!(
            "  mtu {} (active {}), out_reads {}",
            s.mtu, s.active_mtu, s.out_reads
        );
        for n in &s.notes {
            println!("  note: {n}");
        }
    }
    Ok(())
}

/// Line-based JSON/text exchange over TCP.
struct Oob {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Oob {
    fn send(&mut self, line: &str) -> anyhow::Result<()> {
        writeln!(self.w, "{line}")?;
        Ok(self.w.flush()?)
    }
    fn recv(&mut self) -> anyhow::Result<String> {
        let mut s = String::new();
        if self.r.read_line(&mut s)? == 0 {
            bail!("the peer closed the exchange");
        }
        Ok(s.trim_end().to_string())
    }
    fn expect(&mut self, what: &str) -> anyhow::Result<()> {
        let got = self.recv()?;
        if got != what {
            bail!("expected '{what}' from the peer, got '{got}'");
        }
        Ok(())
    }
}

fn pattern(tag: u8, qp: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ tag ^ (qp as u8).wrapping_mul(101))
        .collect()
}

/// Polls until `want` completions arrived (30 s at most); a failed one ends the run with its detail.
fn wait(
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

fn check(
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

fn session(c: &Common, run: &Run, server: Option<String>) -> anyhow::Result<()> {
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
        ep.post_recv(
            qp,
            &RecvRequest {
                wr_id: 100 + qp as u64,
                offset: 0,
                len: 0,
            },
        )?;
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
            wr_id: 1,
            op: SendOp::Send,
            offset: 0,
            len: run.size,
            remote: None,
            signaled: true,
            inline,
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
        ep.post_send(
            qp,
            &SendRequest {
                wr_id: 5,
                op: SendOp::Read,
                offset: 0,
                len: run.size,
                remote: Some(RemoteAddr {
                    addr: r.vaddr,
                    rkey: r.rkey,
                }),
                signaled: true,
                inline: false,
            },
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
    ep.post_send(
        0,
        &SendRequest {
            wr_id: 6,
            op: SendOp::Read,
            offset: 0,
            len: run.size,
            remote: Some(RemoteAddr {
                addr: r.vaddr,
                rkey: r.rkey ^ 0x00ff_0000,
            }),
            signaled: true,
            inline: false,
        },
    )?;
    let bad = wait(ep, 1, true)?;
    if bad[0].status != CompletionStatus::RemoteAccessError {
        bail!(
            "READ with a wrong rkey: expected a remote access error, got {:?}",
            bad[0]
        );
    }
    println!(
        "  ok: READ with a wrong rkey failed as expected: {}",
        ep.failure_detail().unwrap_or("?")
    );
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
            ep.post_recv(
                qp,
                &RecvRequest {
                    wr_id: 200 + qp as u64,
                    offset: 0,
                    len: 0,
                },
            )?;
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
    ep.post_send(
        0,
        &SendRequest {
            wr_id: 9,
            op: SendOp::Send,
            offset: 0,
            len: run.size,
            remote: None,
            signaled: true,
            inline: false,
        },
    )?;
    let c = wait(ep, 1, true)?;
    if c[0].status != CompletionStatus::RetryExceeded {
        bail!(
            "SEND to a vanished peer: expected retry exceeded, got {:?}",
            c[0]
        );
    }
    println!(
        "  ok: SEND to a vanished peer failed as expected: {}",
        ep.failure_detail().unwrap_or("?")
    );
    println!("client: all checks passed");
    Ok(())
}
