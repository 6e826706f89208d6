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

mod exchange;
mod run;

use run::session;

use clap::{Parser, Subcommand};
use roceperf::params::RoceVersion;
use roceperf::transport::verbs::{VerbsConfig, VerbsEndpoint, VerbsError, discover, gid};

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
