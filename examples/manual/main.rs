//! Writes every roceperf binary's man page and shell completions, generated from the clap definitions
//! the binaries parse with, so that they say what `--help` says:
//!
//! ```text
//! cargo run --release --example manual -- DIR
//! ```
//!
//! gives `DIR/man1/<binary>.1` (and `roce_ref-<mode>.1` for each of roce_ref's modes),
//! `DIR/bash/<binary>`, `DIR/zsh/_<binary>` and `DIR/fish/<binary>.fish`; `scripts/package.sh` runs
//! it and puts them where each distribution looks. A generator beside the binaries, rather than a
//! hidden flag in them, keeps clap_mangen and clap_complete out of the binaries (they are
//! dev-dependencies) and leaves their command lines, which `roce_fabric` reads, untouched.

// The fixtures' command lines live in their binaries' own modules: compiled here as they are, at
// the crate root that their `crate::` paths name. Only their clap definitions are used.
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/bin/roce_switch/error.rs"]
mod error;
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/bin/roce_switch/frame.rs"]
mod frame;
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/bin/roce_ref/mode.rs"]
mod mode;
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/bin/roce_switch/port.rs"]
mod port;
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/bin/roce_ref/cli.rs"]
mod ref_cli;
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/bin/roce_switch/cli.rs"]
mod switch_cli;

mod render;

use clap::CommandFactory;
use roceperf::params::TestKind;
use std::path::PathBuf;
use std::process::ExitCode;

/// Every installed binary's command line, in the order `SEE ALSO` lists them.
fn tools() -> Vec<render::Tool> {
    let mut tools: Vec<render::Tool> = TestKind::EVERY
        .iter()
        .map(|&t| render::Tool::new(roceperf::cli::command(t)))
        .collect();
    tools.push(render::Tool::new(roceperf::compare::cli::command()));
    tools.push(render::Tool {
        by_input: roceperf::gate::cli::by_input().into(),
        ..render::Tool::new(roceperf::gate::cli::command())
    });
    tools.push(render::Tool::new(roceperf::fabric::command()));
    tools.push(render::Tool::new(ref_cli::Cli::command()));
    tools.push(render::Tool::new(switch_cli::Cli::command()));
    tools
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir] = args.as_slice() else {
        eprintln!(
            "usage: cargo run --example manual -- DIR\n\
             writes DIR/man1/*.1 and DIR/{{bash,zsh,fish}}/ completions for every roceperf binary"
        );
        return ExitCode::from(2);
    };
    let dir = PathBuf::from(dir);
    match render::write_all(&tools(), &dir) {
        Ok(n) => {
            println!("manual: {n} files under {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("manual: cannot write under {}: {e}", dir.display());
            ExitCode::from(2)
        }
    }
}
