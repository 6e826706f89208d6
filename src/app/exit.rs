//! Exit codes, and the allocator that ends the process with one when the host refuses memory.
//!
//! 0 ok, `TEST_FAILED`, `USAGE`, and a `-n` / `-D` run stopped by SIGINT or SIGTERM on either side
//! ([`interrupted`]); which error maps to which is `app::Error::exit_code`.

/// The test ran and failed: an error completion, a `--validate` mismatch, a peer lost mid-test, a gate.
pub(crate) const TEST_FAILED: u8 = 1;
/// A usage or setup error: a bad flag, a parameter mismatch, no device, no server.
pub(crate) const USAGE: u8 = 2;

/// A run a signal stopped early, on both sides (the signalled one and its peer): 128 + the signal's
/// number, what a shell reports for a process the signal ended (130 for SIGINT, 143 for SIGTERM),
/// so a script sees the same as before the results were kept.
pub(crate) fn interrupted(signal: &str) -> u8 {
    match signal {
        "SIGTERM" => 128 + libc::SIGTERM as u8,
        _ => 128 + libc::SIGINT as u8,
    }
}

/// The six binaries' global allocator: the system's, except that an allocation the host refuses
/// ends the process with exit code 2 and a message (lower -q or -s), rather than an abort (134).
/// Allocations whose failure their caller handles ([`crate::transport::memory::handled`]) still
/// get a null pointer, so a queue pair's buffer is refused with an error naming it.
pub struct ExitOnOom;

// SAFETY: forwards every call unchanged to the system allocator; a failure it does not hand back
// ends the process instead of returning.
unsafe impl std::alloc::GlobalAlloc for ExitOnOom {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's layout, forwarded unchanged.
        let p = unsafe { std::alloc::System.alloc(layout) };
        refused(p, layout.size())
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's layout, forwarded unchanged.
        let p = unsafe { std::alloc::System.alloc_zeroed(layout) };
        refused(p, layout.size())
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: ptr came from System with this layout.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: ptr came from System with this layout; same contract as ours.
        let p = unsafe { std::alloc::System.realloc(ptr, layout, new_size) };
        refused(p, new_size)
    }
}

/// `p`, unless it is null and nobody handles that: then the message and exit code 2. Writes with
/// one `write(2)` from a stack buffer, since nothing may be allocated here.
fn refused(p: *mut u8, bytes: usize) -> *mut u8 {
    if !p.is_null() || crate::transport::memory::failure_is_handled() {
        return p;
    }
    let mut msg = [0u8; 256];
    let mut n = 0;
    let mut put = |b: &[u8]| {
        let k = b.len().min(msg.len() - n);
        msg[n..n + k].copy_from_slice(&b[..k]);
        n += k;
    };
    put(b"error: out of memory: the host refused ");
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = bytes;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    put(&digits[i..]);
    put(b" bytes; lower -q or the message size (-s/-a), or raise the memory this process may use (ulimit -v)\n");
    // SAFETY: writes `n` initialised bytes of a local buffer to stderr, then ends the process
    // without running anything that could allocate.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), n);
        libc::_exit(i32::from(USAGE))
    }
}
