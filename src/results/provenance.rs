//! Where a result came from, in every result file: the host, its kernel and CPU, the NIC with its
//! driver and firmware, the roceperf that ran and its git commit, and the exact command line; so
//! that two files can be told apart a month later.
//!
//! The host's part is read here once per document ([`Provenance::of_this_process`]); the NIC is the
//! caller's to name, as only the run knows which one it used (a comparison or a fabric matrix has
//! none of its own: each of its runs' files names theirs).

use serde::{Deserialize, Serialize};

/// The git commit roceperf was built from, or `unknown` outside a git checkout (build.rs).
pub(crate) const COMMIT: &str = env!("ROCEPERF_GIT_COMMIT");

/// Where a result came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The host's name (`uname -n`).
    pub host: String,
    /// The kernel's release (`uname -r`).
    pub kernel: String,
    /// The CPU's model as `/proc/cpuinfo` names it; `None` where it names none.
    pub cpu_model: Option<String>,
    /// CPUs online.
    pub cpus: u32,
    /// The NIC the run used; `None` in a document of many runs (each run's file names its own).
    pub nic: Option<NicIdentity>,
    /// roceperf's version (Cargo.toml).
    pub version: String,
    /// The git commit it was built from, `unknown` when built outside a git checkout.
    pub commit: String,
    /// The command line, each argument shell-quoted where it needs it.
    pub command: String,
}

/// The NIC a run used: its device and what drives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicIdentity {
    /// The RDMA device (verbs) or interface (soft, tcp: the one its local address is on).
    pub device: String,
    /// Its driver (`mlx5_core`, `veth`); `None` where there is none to name (`lo`).
    pub driver: Option<String>,
    /// Its firmware version; `None` where it has none (virtual interfaces).
    pub firmware: Option<String>,
}

impl Provenance {
    /// This host and process, with the run's `nic`.
    pub(crate) fn of_this_process(nic: Option<NicIdentity>) -> Provenance {
        let (host, kernel) = uname();
        Provenance {
            host,
            kernel,
            cpu_model: cpu_model(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
            cpus: cpus_online(),
            nic,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            commit: COMMIT.to_owned(),
            command: quoted(std::env::args_os()),
        }
    }

    /// `-v`'s lines: what the files record, in ` Key : value` form.
    pub(crate) fn lines(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![
            ("Host", self.host.clone()),
            ("Kernel", self.kernel.clone()),
            (
                "CPU",
                format!(
                    "{} ({} online)",
                    self.cpu_model.as_deref().unwrap_or("model not named"),
                    self.cpus
                ),
            ),
        ];
        if let Some(n) = &self.nic {
            v.push((
                "NIC",
                format!(
                    "{}, driver {}, firmware {}",
                    n.device,
                    n.driver.as_deref().unwrap_or("none"),
                    n.firmware.as_deref().unwrap_or("none")
                ),
            ));
        }
        v.push((
            "Build",
            format!("roceperf {}, commit {}", self.version, self.commit),
        ));
        v.push(("Command", self.command.clone()));
        v
    }
}

/// `uname -n` and `uname -r`.
fn uname() -> (String, String) {
    // SAFETY: utsname is plain old data; all-zero is valid, and uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid utsname to write.
    if unsafe { libc::uname(&mut u) } != 0 {
        return ("unknown".into(), "unknown".into());
    }
    let text = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (text(&u.nodename), text(&u.release))
}

/// The first `model name` of `/proc/cpuinfo` (x86), else its `Processor` or `cpu model` (other
/// architectures).
fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Processor", "cpu model"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_owned())
            })
        })
}

fn cpus_online() -> u32 {
    // SAFETY: sysconf reads a constant of the system.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).unwrap_or(0)
}

/// The arguments as a shell would take them back: each one that holds anything but letters,
/// digits and `-_./=:,@+%` in single quotes.
fn quoted(args: impl Iterator<Item = std::ffi::OsString>) -> String {
    args.map(|a| {
        let a = a.to_string_lossy().into_owned();
        let plain = !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
        if plain {
            a
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    })
    .collect::<Vec<_>>()
    .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_quoted_as_a_shell_takes_it_back() {
        let args = [
            "roce_write_bw",
            "-d",
            "lo",
            "--json",
            "my run.json",
            "it's",
            "",
        ];
        assert_eq!(
            quoted(args.iter().map(std::ffi::OsString::from)),
            r"roce_write_bw -d lo --json 'my run.json' 'it'\''s' ''"
        );
    }

    #[test]
    fn the_cpu_model_is_read_per_architecture() {
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763\n";
        assert_eq!(cpu_model(x86).as_deref(), Some("AMD EPYC 7763"));
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\n";
        assert_eq!(cpu_model(arm), None);
        let here = Provenance::of_this_process(None);
        assert!(
            !here.host.is_empty() && !here.kernel.is_empty() && here.cpus > 0,
            "{here:?}"
        );
        assert!(!here.commit.is_empty());
    }
}
