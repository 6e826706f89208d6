//! The process's arguments where one is not UTF-8: clap says only "invalid UTF-8 was detected in one
//! or more arguments", and `std::env::args` panics; here the argument is found and named by its flag.

use clap::error::ErrorKind;
use clap::{ArgMatches, Command};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// Parses the process's arguments with `cmd`, as `Command::get_matches` does (clap's errors, `--help`
/// and `--version` exit as clap's do), but an argument that is not UTF-8 where text is needed is named.
pub(crate) fn matches(cmd: Command) -> ArgMatches {
    let args: Vec<OsString> = std::env::args_os().collect();
    matches_from(cmd, &args).unwrap_or_else(|e| e.exit())
}

/// `cmd` with `-h` showing only the flags `common` names (clap ids; help and version are always
/// shown): a short page of what most runs set, `--help` keeping every flag.
pub(crate) fn short_help_shows(cmd: Command, common: &[&str]) -> Command {
    cmd.mut_args(|a| {
        let id = a.get_id().as_str();
        let shown = common.contains(&id) || id == "help" || id == "version";
        a.hide_short_help(!shown)
    })
}

/// Parses `args` (the program name first) with `cmd`; an argument that is not UTF-8 where text is
/// needed is a usage error that names it.
pub(crate) fn matches_from(mut cmd: Command, args: &[OsString]) -> Result<ArgMatches, clap::Error> {
    match cmd.try_get_matches_from_mut(args) {
        Err(e) if e.kind() == ErrorKind::InvalidUtf8 => {
            let culprit = culprit(&cmd, args).or_else(|| first_bad(args));
            Err(match culprit {
                Some(i) => cmd.error(ErrorKind::InvalidUtf8, said(&[&cmd], args, i)),
                None => e,
            })
        }
        other => other,
    }
}

/// `args` (without the program name) as text for a tool that passes its arguments on as text
/// (`roce_fabric`); the first that is not UTF-8 is named by its flag, looked up in `cmds`.
pub(crate) fn utf8(cmds: &[&Command], args: &[OsString]) -> Result<Vec<String>, String> {
    let with_name: Vec<OsString> = std::iter::once(OsString::new())
        .chain(args.iter().cloned())
        .collect();
    match first_bad(&with_name) {
        Some(i) => Err(said(cmds, &with_name, i)),
        None => Ok(args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()),
    }
}

/// The first argument after the program name that is not UTF-8.
fn first_bad(args: &[OsString]) -> Option<usize> {
    (1..args.len()).find(|&i| args[i].to_str().is_none())
}

/// The argument clap refused: one that still fails to parse when every other one that is not UTF-8 is
/// made text (a path may be any bytes; a device name or a number may not).
fn culprit(cmd: &Command, args: &[OsString]) -> Option<usize> {
    let bad: Vec<usize> = (1..args.len())
        .filter(|&i| args[i].to_str().is_none())
        .collect();
    bad.iter().copied().find(|&i| {
        let only_i: Vec<OsString> = args
            .iter()
            .enumerate()
            .map(|(j, a)| match j != i && bad.contains(&j) {
                true => a.to_string_lossy().into_owned().into(),
                false => a.clone(),
            })
            .collect();
        matches!(cmd.clone().try_get_matches_from(only_i), Err(e) if e.kind() == ErrorKind::InvalidUtf8)
    })
}

/// What to tell the user about `args[i]`: its flag (`--ib-dev=…`, `-d …`, `-d…`) or, standing alone,
/// the positional argument's name, and the bytes as Rust escapes them (`"eth\xFF"`).
fn said(cmds: &[&Command], args: &[OsString], i: usize) -> String {
    let arg = args[i].as_bytes();
    let shown = format!("{:?}", args[i]);
    let what = if let Some(long) = arg.strip_prefix(b"--") {
        match long.iter().position(|&b| b == b'=') {
            Some(eq) => format!("the value of --{}", String::from_utf8_lossy(&long[..eq])),
            None => "the option".to_string(),
        }
    } else if arg.len() > 2 && arg[0] == b'-' && arg[1].is_ascii_alphanumeric() {
        format!("the value of -{}", arg[1] as char)
    } else {
        let prev = args[i - 1].to_str().unwrap_or_default();
        match takes_value(cmds, prev) {
            true => format!("the value of {prev}"),
            false => format!("the argument {}", positional(cmds)),
        }
    };
    format!("{what} {shown} is not valid UTF-8: give it as UTF-8 text")
}

/// Whether `flag` (`--long` or `-s`) is an option of one of `cmds` that takes a value.
fn takes_value(cmds: &[&Command], flag: &str) -> bool {
    let long = flag.strip_prefix("--");
    let short = match flag.as_bytes() {
        [b'-', c] => Some(*c as char),
        _ => None,
    };
    cmds.iter().flat_map(|c| c.get_arguments()).any(|a| {
        let named = match (long, short) {
            (Some(l), _) => {
                a.get_long() == Some(l) || a.get_all_aliases().is_some_and(|v| v.contains(&l))
            }
            (None, Some(s)) => {
                a.get_short() == Some(s)
                    || a.get_all_short_aliases().is_some_and(|v| v.contains(&s))
            }
            (None, None) => false,
        };
        named && a.get_action().takes_values()
    })
}

/// The first positional argument's name as `--help` shows it (`HOST`), or `positional`.
fn positional(cmds: &[&Command]) -> String {
    cmds.first()
        .and_then(|c| c.get_positionals().next())
        .map(|a| match a.get_value_names() {
            Some([name, ..]) => name.to_string(),
            _ => a.get_id().as_str().to_uppercase(),
        })
        .unwrap_or_else(|| "positional".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Arg;
    use std::os::unix::ffi::OsStringExt;

    fn cmd() -> Command {
        Command::new("t")
            .arg(Arg::new("dev").short('d').long("ib-dev"))
            .arg(Arg::new("all").short('a').action(clap::ArgAction::SetTrue))
            .arg(Arg::new("host").value_name("HOST"))
            .arg(
                Arg::new("out")
                    .long("out")
                    .value_parser(clap::value_parser!(std::path::PathBuf)),
            )
    }

    fn os(parts: &[&[u8]]) -> Vec<OsString> {
        std::iter::once(OsString::from("t"))
            .chain(parts.iter().map(|p| OsString::from_vec(p.to_vec())))
            .collect()
    }

    fn refused(parts: &[&[u8]]) -> String {
        let e = matches_from(cmd(), &os(parts)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidUtf8);
        e.to_string()
    }

    #[test]
    fn each_way_of_giving_a_value_names_its_flag() {
        assert!(
            refused(&[b"-d", b"eth\xff"])
                .contains(r#"the value of -d "eth\xFF" is not valid UTF-8"#)
        );
        assert!(refused(&[b"-deth\xff"]).contains("the value of -d"));
        assert!(refused(&[b"--ib-dev=\xff"]).contains("the value of --ib-dev"));
        assert!(refused(&[b"--ib-dev", b"\xff"]).contains("the value of --ib-dev"));
        // After a flag that takes no value, the argument stands alone: the host.
        assert!(refused(&[b"-a", b"h\xff"]).contains(r#"the argument HOST "h\xFF""#));
    }

    #[test]
    fn a_path_may_be_any_bytes_and_is_not_blamed() {
        let m = matches_from(cmd(), &os(&[b"--out", b"r\xff.json"])).unwrap();
        assert!(m.get_one::<std::path::PathBuf>("out").is_some());
        let e = refused(&[b"--out", b"r\xff.json", b"-d", b"\xfe"]);
        assert!(e.contains(r#"the value of -d "\xFE""#), "{e}");
    }

    #[test]
    fn text_arguments_pass_whole() {
        let args = os(&[b"write_bw", b"-d", b"eth0"]);
        assert_eq!(
            utf8(&[&cmd()], &args[1..]).unwrap(),
            ["write_bw", "-d", "eth0"]
        );
        let args = os(&[b"write_bw", b"-d", b"eth\xff"]);
        let e = utf8(&[&cmd()], &args[1..]).unwrap_err();
        assert!(e.starts_with("the value of -d"), "{e}");
    }
}
