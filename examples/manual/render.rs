//! Man pages (clap_mangen) and completions (clap_complete) from clap commands.

use clap::{Arg, Command};
use clap_complete::Shell;
use clap_mangen::Man;
use std::io::{self, Write};
use std::path::Path;

/// One binary: its command line, and the ones it takes instead for some inputs (roce_gate's
/// fabric matrices and congestion studies), each with the input it applies to.
pub(crate) struct Tool {
    pub(crate) cmd: Command,
    pub(crate) by_input: Vec<(&'static str, Command)>,
}

impl Tool {
    pub(crate) fn new(cmd: Command) -> Tool {
        Tool {
            cmd,
            by_input: Vec::new(),
        }
    }

    fn name(&self) -> String {
        self.cmd.get_name().to_owned()
    }
}

/// Writes every tool's pages and completions under `dir`; the number of files written.
pub(crate) fn write_all(tools: &[Tool], dir: &Path) -> io::Result<usize> {
    let names: Vec<String> = tools.iter().map(Tool::name).collect();
    for sub in ["man1", "bash", "zsh", "fish"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    let mut written = 0;
    for tool in tools {
        let name = tool.name();
        let see_also: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| *n != name)
            .collect();
        let mut cmd = tool.cmd.clone();
        cmd.build();
        std::fs::write(
            dir.join(format!("man1/{name}.1")),
            page(&cmd, &tool.by_input, &see_also)?,
        )?;
        written += 1;
        // A mode of its own (roce_ref's) gets its page, as the parent's SUBCOMMANDS section names it.
        for sub in cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        {
            let sub_name = sub.get_display_name().unwrap_or(sub.get_name());
            std::fs::write(
                dir.join(format!("man1/{sub_name}.1")),
                page(sub, &[], &[&name])?,
            )?;
            written += 1;
        }
        let mut complete = completion_command(tool);
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let file = match shell {
                Shell::Zsh => format!("zsh/_{name}"),
                Shell::Fish => format!("fish/{name}.fish"),
                _ => format!("bash/{name}"),
            };
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut complete, &name, &mut out);
            std::fs::write(dir.join(file), out)?;
            written += 1;
        }
    }
    Ok(written)
}

/// One man page: clap_mangen's sections in `--help`'s order, then the flags of each other input's
/// command line, then `SEE ALSO`.
fn page(cmd: &Command, by_input: &[(&str, Command)], see_also: &[&str]) -> io::Result<Vec<u8>> {
    let version = cmd.get_version().unwrap_or_default();
    let man = Man::new(cmd.clone())
        .source(format!("roceperf {version}"))
        .manual("roceperf");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    append(&mut out, |w| man.render_name_section(w))?;
    append(&mut out, |w| man.render_synopsis_section(w))?;
    append(&mut out, |w| man.render_description_section(w))?;
    append(&mut out, |w| man.render_options_section(w))?;
    if cmd.has_subcommands() {
        append(&mut out, |w| man.render_subcommands_section(w))?;
    }
    for (input, other) in by_input {
        writeln!(out, ".SH \"WHEN A FILE IS A {}\"", input.to_uppercase())?;
        writeln!(
            out,
            "{} reads each FILE first: when one is a {input}, it takes these flags instead of those above.",
            cmd.get_name()
        )?;
        let other = Man::new(headed(other, input));
        append(&mut out, |w| other.render_options_section(w))?;
    }
    if cmd.get_after_help().is_some() || cmd.get_after_long_help().is_some() {
        let mut extra = Vec::new();
        append(&mut extra, |w| man.render_extra_section(w))?;
        // clap_mangen titles `after_help` EXTRA; ours holds the examples and the exit status.
        match extra.strip_prefix(b".SH EXTRA\n".as_slice()) {
            Some(body) => {
                out.extend_from_slice(b".SH NOTES\n");
                out.extend_from_slice(body);
            }
            None => out.extend_from_slice(&extra),
        }
    }
    if cmd.get_version().is_some() {
        append(&mut out, |w| man.render_version_section(w))?;
    }
    if !see_also.is_empty() {
        writeln!(out, ".SH \"SEE ALSO\"")?;
        let refs: Vec<String> = see_also
            .iter()
            .map(|n| format!("\\fB{}\\fR(1)", n.replace('-', "\\-")))
            .collect();
        writeln!(out, "{}", refs.join(", "))?;
    }
    Ok(out)
}

/// The two lines every roff document starts with (the apostrophe string `Aq`), which clap_mangen
/// writes before each section it renders alone.
const PREAMBLE: &[u8] = b".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";

/// Renders one section into `out`, without its preamble: the title's is the page's.
fn append(
    out: &mut Vec<u8>,
    render: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut section = Vec::new();
    render(&mut section)?;
    out.extend_from_slice(section.strip_prefix(PREAMBLE).unwrap_or(&section));
    Ok(())
}

/// `cmd`'s flags under headings that name `input` (positionals, --help and --version are the main
/// command line's, shown there once).
fn headed(cmd: &Command, input: &str) -> Command {
    cmd.clone()
        .disable_help_flag(true)
        .disable_version_flag(true)
        .mut_args(|a: Arg| {
            if a.is_positional() {
                return a.hide(true);
            }
            let heading = match a.get_help_heading() {
                Some(h) => format!("{input}: {h}"),
                None => format!("{input}: options"),
            };
            a.help_heading(heading)
        })
}

/// What a shell completes for `tool`: its command line, plus the flags only another input's takes
/// (a completion cannot know which input a file is).
fn completion_command(tool: &Tool) -> Command {
    let mut cmd = tool.cmd.clone();
    for (_, other) in &tool.by_input {
        for arg in other.get_arguments().filter(|a| !a.is_positional()) {
            let known = cmd.get_arguments().any(|have| {
                have.get_id() == arg.get_id()
                    || (arg.get_long().is_some() && have.get_long() == arg.get_long())
                    || (arg.get_short().is_some() && have.get_short() == arg.get_short())
            });
            if !known {
                cmd = cmd.arg(arg.clone());
            }
        }
    }
    cmd
}
