//! roce_switch: the congested link's switch, a learning L2 switch between the interfaces of its
//! network namespace whose egress port is a rate-limited bottleneck with a finite buffer and a
//! discipline (lossy, ECN marking, PFC). A test fixture for docs/congestion.md: this kernel has no
//! netem, red or fq_codel. It sleeps between departures and never busy-polls a core.

mod cli;
mod error;
mod frame;
mod port;
mod ring;
mod sock;
mod switch;
mod sys;

use std::process::ExitCode;

use clap::Parser;

use error::{Error, Result};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roce_switch: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn run() -> Result<()> {
    let cfg = cli::Cli::parse().config()?;
    sys::catch_stop_signals();
    sys::precise_timers()?;
    if let Some(prio) = cfg.fifo {
        sys::sched_fifo(prio)?;
    }
    let stats_path = cfg.stats.clone();
    let mut sw = switch::Switch::open(cfg.clone())?;
    println!(
        "roce_switch: {}; {} at {} Gb/s, buffer {} B{}; pause quanta at {}; switching",
        sw.describe(),
        cfg.discipline.name(),
        cfg.red.rate_gbps,
        cfg.red.buffer_bytes,
        match cfg.discipline {
            port::Discipline::Lossy => String::new(),
            port::Discipline::Ecn => format!(
                ", Kmin {} B, Kmax {} B, Pmax {}",
                cfg.red.kmin_bytes, cfg.red.kmax_bytes, cfg.red.pmax
            ),
            port::Discipline::Pfc => format!(
                ", priority {} lossless, Xoff {} B, Xon {} B, refreshed every {} us",
                cfg.pfc_prio,
                cfg.xoff,
                cfg.xon,
                sw.refresh_ns / 1_000
            ),
            port::Discipline::PfcEcn => format!(
                ", priority {} lossless, Xoff {} B, Xon {} B, refreshed every {} us; Kmin {} B, \
                 Kmax {} B, Pmax {}",
                cfg.pfc_prio,
                cfg.xoff,
                cfg.xon,
                sw.refresh_ns / 1_000,
                cfg.red.kmin_bytes,
                cfg.red.kmax_bytes,
                cfg.red.pmax
            ),
        },
        sw.speed_note,
    );
    let ran = sw.run();
    let stats = sw.stats();
    println!(
        "roce_switch: stopped; egress offered {} frames, forwarded {}, dropped {}, marked {}, max queue {} B",
        stats.egress.offered_packets,
        stats.egress.forwarded_packets,
        stats.egress.dropped_packets,
        stats.egress.marked_packets,
        stats.egress.max_queue_bytes
    );
    if let Some(path) = stats_path {
        stats
            .write(&path)
            .map_err(|e| Error::io(format!("--stats {}", path.display()), e.into_io()))?;
    }
    ran
}
