//! roce_ref: minimal busy-polling UDP, TCP and AF_PACKET references, the floors roceperf is held to.
//!
//! Each side pins itself to one core and spins on non-blocking sockets, as roceperf's datapaths do,
//! and does nothing else: its figures are what the kernel path itself costs on this machine.
//! `scripts/bench.sh` runs it in the same script as roceperf's binaries and prints the ratios.

mod cli;
mod dgram;
mod error;
mod figures;
mod mmsg;
mod mode;
mod packet;
mod proto;
mod sys;
mod tcp;
mod timing;
mod udp;

use std::process::ExitCode;

use cli::{BROADCAST, Config, Pattern, Peer, Proto, Role};
use error::{Error, Result};
use figures::{Figures, Report, StreamFigures};
use packet::PacketLink;
use udp::UdpLink;

fn main() -> ExitCode {
    let cfg = cli::parse();
    let outcome = match cfg.role {
        Role::Local => run_local(&cfg),
        _ => run_side(&cfg),
    };
    match outcome {
        Ok(report) => {
            if cfg.json {
                println!("{}", report.json());
            } else {
                println!("{}", report.summary());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("roce_ref {}: {e}", cfg.mode.name());
            ExitCode::from(e.exit_code())
        }
    }
}

/// Both sides in this process: the server in a thread on `--server-cpu`, the client here on `--cpu`.
fn run_local(cfg: &Config) -> Result<Report> {
    let server_cfg = Config {
        role: Role::Server,
        cpu: Some(cfg.server_cpu),
        ..cfg.clone()
    };
    let client_cfg = Config {
        role: Role::Client(cfg.local_peer()),
        ..cfg.clone()
    };
    let server = std::thread::Builder::new()
        .name("roce_ref-server".into())
        .spawn(move || run_side(&server_cfg))
        .map_err(|e| Error::setup("starting the server thread", e))?;
    // A client that fails returns at once: the process exit ends the waiting server thread.
    let mut report = run_side(&client_cfg)?;
    match server.join() {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(Error::Peer("the server thread panicked".into())),
    }
    report.role = "local";
    report.server_cpu = Some(cfg.server_cpu);
    Ok(report)
}

/// One side: pins, opens the link, runs, and reports.
fn run_side(cfg: &Config) -> Result<Report> {
    let server = cfg.role == Role::Server;
    let cpu = sys::pin(cfg.cpu, server)?;
    let (peer, figures) = match cfg.mode.proto {
        Proto::Tcp => run_tcp(cfg)?,
        Proto::Udp => {
            let mut link = match cfg.role {
                Role::Client(Peer::Addr(a)) => UdpLink::client(a)?,
                _ => UdpLink::server(cfg.bind, cfg.port)?,
            };
            if cfg.mode.pattern == Pattern::Stream {
                sys::grow_buffers(dgram::Datagram::fd(&link), sys::STREAM_SOCKET_BUFFER)
                    .map_err(|e| Error::setup("SO_RCVBUF/SO_SNDBUF of the UDP socket", e))?;
                if server {
                    sys::set_int(dgram::Datagram::fd(&link), libc::SOL_UDP, mmsg::UDP_GRO, 1)
                        .map_err(|e| Error::setup("UDP_GRO on the server's socket", e))?;
                }
            }
            run_datagram(&mut link, cfg, server, true)?
        }
        Proto::Packet => {
            let dev = cfg.dev.as_deref().unwrap_or("lo");
            let to = match cfg.role {
                Role::Client(Peer::Mac(m)) => m,
                _ => BROADCAST,
            };
            let mut link = PacketLink::open(dev, cfg.ethertype, cfg.size.max(cfg.reply_size), to)?;
            if cfg.mode.pattern == Pattern::Stream {
                sys::grow_buffers(dgram::Datagram::fd(&link), sys::STREAM_SOCKET_BUFFER).map_err(
                    |e| {
                        Error::setup(
                            format!("SO_RCVBUF/SO_SNDBUF of the AF_PACKET socket on {dev}"),
                            e,
                        )
                    },
                )?;
                if cfg.qdisc_bypass {
                    link.bypass_qdisc()?;
                }
            }
            run_datagram(&mut link, cfg, server, false)?
        }
    };
    Ok(Report {
        tool: "roce_ref",
        mode: cfg.mode.name(),
        role: if server { "server" } else { "client" },
        peer,
        cpu,
        server_cpu: None,
        size_bytes: cfg.size,
        figures,
    })
}

fn run_tcp(cfg: &Config) -> Result<(String, Figures)> {
    let mut c = match cfg.role {
        Role::Client(Peer::Addr(a)) => tcp::Conn::connect(a, cfg)?,
        _ => tcp::Conn::accept(cfg)?,
    };
    let client = cfg.role != Role::Server;
    let figures = match (cfg.mode.pattern, client) {
        (Pattern::PingPong, true) => {
            Figures::Latency(tcp::pingpong_client(&mut c, cfg)?.figures(cfg.reply_size, cfg.warmup))
        }
        (Pattern::PingPong, false) => Figures::Served {
            answered: tcp::pingpong_server(&mut c, cfg)?,
        },
        (Pattern::Stream, true) => {
            let (m, sent) = tcp::stream_client(&mut c, cfg)?;
            Figures::Stream(StreamFigures::new(m, cfg.warmup_ms, Some(sent)))
        }
        (Pattern::Stream, false) => Figures::Stream(StreamFigures::new(
            tcp::stream_server(&mut c, cfg)?,
            cfg.warmup_ms,
            None,
        )),
    };
    Ok((c.peer(), figures))
}

fn run_datagram(
    link: &mut impl dgram::Datagram,
    cfg: &Config,
    server: bool,
    udp: bool,
) -> Result<(String, Figures)> {
    let figures = match (cfg.mode.pattern, server) {
        (Pattern::PingPong, false) => {
            Figures::Latency(dgram::pingpong_client(link, cfg)?.figures(cfg.reply_size, cfg.warmup))
        }
        (Pattern::PingPong, true) => Figures::Served {
            answered: dgram::pingpong_server(link, cfg)?,
        },
        (Pattern::Stream, false) => {
            let (m, sent) = dgram::stream_client(link, cfg)?;
            Figures::Stream(StreamFigures::new(m, cfg.warmup_ms, Some(sent)))
        }
        (Pattern::Stream, true) => Figures::Stream(StreamFigures::new(
            dgram::stream_server(link, cfg, udp)?,
            cfg.warmup_ms,
            None,
        )),
    };
    Ok((link.peer(), figures))
}
