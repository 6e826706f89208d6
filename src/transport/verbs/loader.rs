//! Is libibverbs there, and does the kernel speak RDMA? Turns "it does not work" into one named case.
//!
//! rdma-mummy-sys links a small static shim whose ELF constructor `dlopen()`s `libibverbs.so.1` at
//! process start and, when that fails, silently leaves every entry point returning `EOPNOTSUPP`. The
//! process therefore starts without rdma-core, and this module finds out *why* verbs is unusable:
//! the library (our own `dlopen` probe), the kernel (`ENOSYS` from libibverbs, or no
//! `class/infiniband_verbs` in sysfs), or simply no device.

use super::error::VerbsError;
use super::sysfs::Sysfs;
use std::ffi::CStr;

/// The soname rdma-core installs and the shim loads.
pub(crate) const LIBIBVERBS: &CStr = c"libibverbs.so.1";

/// Checks that `libibverbs.so.1` can be loaded; the error is the dynamic loader's message.
pub(crate) fn probe_library() -> Result<(), String> {
    // SAFETY: dlopen/dlerror/dlclose with a valid NUL-terminated name; the handle is closed at once
    // (the shim keeps its own reference, so this never unloads the library it uses).
    unsafe {
        let h = libc::dlopen(LIBIBVERBS.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if h.is_null() {
            let e = libc::dlerror();
            let msg = if e.is_null() {
                "dlopen failed".to_string()
            } else {
                CStr::from_ptr(e).to_string_lossy().into_owned()
            };
            return Err(msg);
        }
        libc::dlclose(h);
    }
    Ok(())
}

/// Names the reason `ibv_get_device_list` failed with `err`, given what the library probe and
/// sysfs say. Pure apart from its inputs, so every branch is tested.
pub(crate) fn classify_list_error(
    library: Result<(), String>,
    err: &std::io::Error,
    sys: &Sysfs,
) -> VerbsError {
    let interfaces = sys.net_interfaces();
    if let Err(detail) = library {
        return VerbsError::LibraryMissing { detail, interfaces };
    }
    match err.raw_os_error() {
        Some(libc::ENOSYS) => VerbsError::KernelNoRdma {
            detail: err.to_string(),
            interfaces,
        },
        // The shim answers EOPNOTSUPP when its dlopen failed even though ours succeeded (e.g. the
        // library appeared after start); it is still a library problem.
        Some(libc::EOPNOTSUPP) => VerbsError::LibraryMissing {
            detail: "libibverbs.so.1 was not loaded at process start".to_string(),
            interfaces,
        },
        _ if !sys.has_uverbs() => VerbsError::KernelNoRdma {
            detail: err.to_string(),
            interfaces,
        },
        _ => VerbsError::Call {
            call: "ibv_get_device_list",
            device: "(all)".to_string(),
            source: std::io::Error::from(err.kind()),
        },
    }
}

/// The error for `-d name` when `name` is not among `available`; recognises a network interface
/// that belongs to one of the devices (`owner_of` maps a device to its interfaces).
pub(crate) fn unknown_device(
    name: &str,
    available: &[String],
    owner_of: impl Fn(&str) -> Vec<String>,
) -> VerbsError {
    let owner = available
        .iter()
        .find(|d| owner_of(d).iter().any(|n| n == name))
        .cloned();
    VerbsError::UnknownDevice {
        name: name.to_string(),
        available: available.to_vec(),
        owner,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    fn sys_with(ifaces: &[&str], uverbs: bool) -> (tempfile::TempDir, Sysfs) {
        let d = tempfile::tempdir().unwrap();
        for n in ifaces {
            std::fs::create_dir_all(d.path().join("class/net").join(n)).unwrap();
        }
        if uverbs {
            std::fs::create_dir_all(d.path().join("class/infiniband_verbs")).unwrap();
        }
        let s = Sysfs::at(d.path());
        (d, s)
    }

    #[test]
    fn missing_library_wins_over_everything() {
        let (_d, s) = sys_with(&["eth0", "lo"], false);
        let e = classify_list_error(
            Err(
                "libibverbs.so.1: cannot open shared object file: No such file or directory".into(),
            ),
            &io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            &s,
        );
        assert!(
            matches!(e, VerbsError::LibraryMissing { ref interfaces, .. } if interfaces == &["eth0", "lo"])
        );
    }

    #[test]
    fn enosys_is_a_kernel_without_rdma() {
        let (_d, s) = sys_with(&["eth0"], false);
        let e = classify_list_error(Ok(()), &io::Error::from_raw_os_error(libc::ENOSYS), &s);
        assert!(matches!(e, VerbsError::KernelNoRdma { .. }), "{e}");
    }

    #[test]
    fn other_errno_without_uverbs_is_still_the_kernel_and_with_it_a_call_error() {
        let (_d, s) = sys_with(&[], false);
        let e = classify_list_error(Ok(()), &io::Error::from_raw_os_error(libc::ENODEV), &s);
        assert!(matches!(e, VerbsError::KernelNoRdma { .. }));
        let (_d2, s2) = sys_with(&[], true);
        let e = classify_list_error(Ok(()), &io::Error::from_raw_os_error(libc::EACCES), &s2);
        assert!(matches!(
            e,
            VerbsError::Call {
                call: "ibv_get_device_list",
                ..
            }
        ));
    }

    #[test]
    fn unknown_device_finds_the_owner_of_an_interface() {
        let devs = vec!["rxe0".to_string(), "rxe1".to_string()];
        let owner = |d: &str| vec![if d == "rxe0" { "veth0" } else { "veth1" }.to_string()];
        match unknown_device("veth1", &devs, owner) {
            VerbsError::UnknownDevice {
                owner, available, ..
            } => {
                assert_eq!(owner.as_deref(), Some("rxe1"));
                assert_eq!(available, devs);
            }
            e => panic!("{e}"),
        }
        assert!(matches!(
            unknown_device("mlx5_9", &devs, owner),
            VerbsError::UnknownDevice { owner: None, .. }
        ));
    }
}
