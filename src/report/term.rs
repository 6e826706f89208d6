//! Whether an output stream is the user's terminal, and whether to colour it: the one rule every
//! binary asks before it writes an escape code (a colour, a progress bar, clap's styled help).
//!
//! Colour needs a terminal that is not `dumb` and `NO_COLOR` unset or empty (no-color.org);
//! `CLICOLOR_FORCE` (not empty, not `0`) forces it where no terminal is seen. A progress bar, which
//! redraws with cursor movements, needs the terminal alone. Under Open MPI's `mpirun` every rank's
//! stdout is a pseudo-terminal that mpirun copies to its own output, a file as often as a screen, so
//! there a terminal proves nothing and counts as none. Under `srun` (and MPICH's Hydra) a rank's
//! output is a pipe: no colour, no bar (`srun --pty` is the user's terminal, and is one).

use std::ffi::OsString;
use std::io::IsTerminal;

/// An output stream of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    fn is_terminal(self) -> bool {
        match self {
            Stream::Stdout => std::io::stdout().is_terminal(),
            Stream::Stderr => std::io::stderr().is_terminal(),
        }
    }
}

/// Set in every rank Open MPI starts (4 and 5), whose stdout is mpirun's pseudo-terminal.
const OPEN_MPI_RANK: &str = "OMPI_COMM_WORLD_RANK";

fn set(env: &dyn Fn(&str) -> Option<OsString>, key: &str) -> bool {
    env(key).is_some_and(|v| !v.is_empty())
}

/// Whether a stream that is (or is not) a terminal is one the user watches, given the environment.
fn watched(env: &dyn Fn(&str) -> Option<OsString>, terminal: bool) -> bool {
    terminal
        && env("TERM").is_some_and(|t| !t.is_empty() && t != "dumb")
        && env(OPEN_MPI_RANK).is_none()
}

/// The colour rule over a given environment and terminal test.
fn color_in(env: &dyn Fn(&str) -> Option<OsString>, terminal: bool) -> bool {
    if set(env, "NO_COLOR") {
        return false;
    }
    if set(env, "CLICOLOR_FORCE") && env("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
        return true;
    }
    watched(env, terminal)
}

fn process_env(key: &str) -> Option<OsString> {
    std::env::var_os(key)
}

/// Whether to colour what goes to `stream`.
pub(crate) fn color(stream: Stream) -> bool {
    color_in(&process_env, stream.is_terminal())
}

/// Whether `stream` is a terminal the user watches: where a progress bar may draw.
pub(crate) fn interactive(stream: Stream) -> bool {
    watched(&process_env, stream.is_terminal())
}

/// `cmd` with clap's colours under the same rule (clap's own would colour mpirun's pseudo-terminal).
pub(crate) fn clap_colors(cmd: clap::Command) -> clap::Command {
    // clap writes help to stdout and errors to stderr: colour only when both would be.
    let choice = if color(Stream::Stdout) && color(Stream::Stderr) {
        clap::ColorChoice::Always
    } else {
        clap::ColorChoice::Never
    };
    cmd.color(choice)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |k| {
            pairs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn a_terminal_is_coloured_unless_no_color_or_dumb() {
        assert!(color_in(&env_of(&[("TERM", "xterm")]), true));
        assert!(!color_in(&env_of(&[("TERM", "xterm")]), false));
        assert!(!color_in(
            &env_of(&[("TERM", "xterm"), ("NO_COLOR", "1")]),
            true
        ));
        // no-color.org: an empty NO_COLOR is as if unset.
        assert!(color_in(
            &env_of(&[("TERM", "xterm"), ("NO_COLOR", "")]),
            true
        ));
        assert!(!color_in(&env_of(&[("TERM", "dumb")]), true));
        assert!(!color_in(&env_of(&[]), true));
    }

    #[test]
    fn open_mpi_ranks_pseudo_terminal_counts_as_none() {
        let env = env_of(&[("TERM", "xterm"), ("OMPI_COMM_WORLD_RANK", "0")]);
        assert!(!color_in(&env, true));
        assert!(!watched(&env, true));
    }

    #[test]
    fn clicolor_force_colours_a_file_but_yields_to_no_color() {
        assert!(color_in(&env_of(&[("CLICOLOR_FORCE", "1")]), false));
        assert!(!color_in(&env_of(&[("CLICOLOR_FORCE", "0")]), false));
        assert!(!color_in(
            &env_of(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]),
            true
        ));
        // Forcing colour does not make a pipe a place to draw a bar.
        assert!(!watched(&env_of(&[("CLICOLOR_FORCE", "1")]), false));
    }
}
