//! The one raw integer `setsockopt` both socket transports use for options rustix has no typed
//! setter for (`IP_TOS`, `IPV6_TCLASS`, `SO_PRIORITY`, UDP's GSO and checksum options), and the
//! AF_PACKET options of `roce_switch`.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// Sets the integer socket option `level`/`name` to `value` on `fd`.
pub fn set_int(
    fd: impl AsFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `fd` is an open descriptor (borrowed for the call); `value` is a live c_int and its
    // size is passed, which is what every integer option reads.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            level,
            name,
            std::ptr::from_ref(&value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
