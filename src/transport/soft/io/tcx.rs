//! A TCX ingress program that keeps the kernel's IP/UDP receive off the RoCE v2 frames an AF_PACKET
//! endpoint already took: it returns `TCX_DROP` for a UDP frame to our address and port and
//! `TCX_NEXT` for anything else.
//!
//! Why it works: a packet socket bound with ETH_P_ALL is a tap, and the kernel hands a received
//! frame to its taps before tc ingress runs (`__netif_receive_skb_core`), so our socket has its copy
//! when the program drops the frame, and the IP stack never sees it. Without it, each frame also
//! climbs IP and UDP receive into a socket that discards it (`super::kernel_rx`'s fallback), which
//! doubled the receive side's kernel work per frame across a veth pair.
//!
//! The program is a table of eBPF instructions written out here (no C, no libbpf), loaded with the
//! raw `bpf(2)` syscall as `BPF_PROG_TYPE_SCHED_CLS` and attached with `BPF_LINK_CREATE` to
//! `BPF_TCX_INGRESS` of the interface (Linux 6.6 or later). The link detaches itself when its
//! descriptor closes, so a run that is killed leaves nothing behind.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `TCX_NEXT`: hand the frame on (to the next program, then the stack).
pub(crate) const TCX_NEXT: i32 = -1;
/// `TCX_DROP`: free the frame here.
pub(crate) const TCX_DROP: i32 = 2;

/// Offset of `data` in `struct __sk_buff` (include/uapi/linux/bpf.h): the frame's first byte.
const SKB_DATA: i16 = 76;
/// Offset of `data_end` in `struct __sk_buff`: one past the frame's last linear byte.
const SKB_DATA_END: i16 = 80;

/// One eBPF instruction, as `struct bpf_insn` lays it out (destination register in the low nibble).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

// Opcodes used (class | size or operation | source), include/uapi/linux/bpf_common.h and bpf.h.
const LDX_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
const LDX_H: u8 = 0x69; // BPF_LDX | BPF_MEM | BPF_H
const LDX_B: u8 = 0x71; // BPF_LDX | BPF_MEM | BPF_B
const MOV64_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
const MOV64_X: u8 = 0xbf; // BPF_ALU64 | BPF_MOV | BPF_X
const ADD64_K: u8 = 0x07; // BPF_ALU64 | BPF_ADD | BPF_K
const JGT_X: u8 = 0x2d; // BPF_JMP | BPF_JGT | BPF_X (64-bit pointers)
// The 32-bit jumps compare the low word only: a loaded address word is zero-extended, while a 64-bit
// jump would sign-extend the immediate (any address whose last byte is 128 or more).
const JNE32_K: u8 = 0x56; // BPF_JMP32 | BPF_JNE | BPF_K
const JSET32_K: u8 = 0x46; // BPF_JMP32 | BPF_JSET | BPF_K
const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT

// Registers: r1 holds the context on entry, r0 the verdict on exit.
const R0: u8 = 0;
const R1: u8 = 1;
/// The frame's first byte.
const DATA: u8 = 2;
/// One past its last.
const END: u8 = 3;
/// `DATA` plus the bytes the program reads, checked against `END`.
const NEED: u8 = 4;
/// What was loaded from the frame.
const V: u8 = 5;

/// A program being written: instructions, and the jumps still to be pointed at the final `exit`.
struct Asm {
    insns: Vec<Insn>,
    to_exit: Vec<usize>,
}

impl Asm {
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) -> &mut Asm {
        self.insns.push(Insn {
            code,
            regs: (src << 4) | dst,
            off,
            imm,
        });
        self
    }

    /// `V = *(size *)(DATA + at)`: a little-endian load of the frame's bytes at `at`.
    fn load(&mut self, code: u8, at: usize) -> &mut Asm {
        self.op(code, V, DATA, at as i16, 0)
    }

    /// Leaves with `TCX_NEXT` (r0 was set first) unless `V == value` in its low 32 bits.
    fn unless_eq(&mut self, value: u32) -> &mut Asm {
        self.to_exit.push(self.insns.len());
        self.op(JNE32_K, V, 0, 0, value as i32)
    }

    /// Leaves unless the frame holds at least `len` bytes (what the verifier needs to see before a
    /// load from it).
    fn need(&mut self, len: usize) -> &mut Asm {
        self.op(MOV64_X, NEED, DATA, 0, 0)
            .op(ADD64_K, NEED, 0, 0, len as i32);
        self.to_exit.push(self.insns.len());
        self.op(JGT_X, NEED, END, 0, 0)
    }

    /// The bytes `at..at + b.len()` (2 or 4) must be `b`.
    fn bytes_eq(&mut self, at: usize, b: &[u8]) -> &mut Asm {
        match *b {
            [x, y] => self
                .load(LDX_H, at)
                .unless_eq(u16::from_le_bytes([x, y]) as u32),
            [w, x, y, z] => self
                .load(LDX_W, at)
                .unless_eq(u32::from_le_bytes([w, x, y, z])),
            _ => unreachable!("2 or 4 bytes"),
        }
    }

    /// Drops what got this far, and points every jump at the final `exit`.
    fn finish(mut self) -> Vec<Insn> {
        self.op(MOV64_K, R0, 0, 0, TCX_DROP).op(EXIT, 0, 0, 0, 0);
        let exit = self.insns.len() - 1;
        for at in self.to_exit {
            self.insns[at].off = (exit - at - 1) as i16;
        }
        self.insns
    }
}

/// Byte offsets in an Ethernet frame (no VLAN tag: tc ingress sees it moved into metadata).
mod at {
    pub(super) const ETHERTYPE: usize = 12;
    pub(super) const V4_VERSION_IHL: usize = 14;
    pub(super) const V4_FRAGMENT: usize = 14 + 6;
    pub(super) const V4_PROTOCOL: usize = 14 + 9;
    pub(super) const V4_DST: usize = 14 + 16;
    /// UDP destination port after an IPv4 header of 20 bytes.
    pub(super) const V4_DPORT: usize = 14 + 20 + 2;
    pub(super) const V6_NEXT_HEADER: usize = 14 + 6;
    pub(super) const V6_DST: usize = 14 + 24;
    /// UDP destination port after the IPv6 header (RoCE sends no extension headers).
    pub(super) const V6_DPORT: usize = 14 + 40 + 2;
}

/// The program that drops UDP frames to `to` (our address and port) and passes everything else,
/// RoCE v1 frames, the other IP family and every other address or port among them.
///
/// ```text
/// IPv4 (20 instructions)                    IPv6 (22 instructions)
///  r2 = skb->data; r3 = skb->data_end        the same three
///  r0 = TCX_NEXT
///  r4 = r2 + 38; if r4 > r3 goto exit        r4 = r2 + 58; if r4 > r3 goto exit
///  ethertype == 0x0800                       ethertype == 0x86dd
///  version/IHL == 0x45 (the port at 36)      next header == 17 (UDP)
///  protocol == 17 (UDP)                      destination == ours (4 words)
///  fragment offset == 0                      destination port == ours
///  destination == ours
///  destination port == ours
///  r0 = TCX_DROP; exit                       r0 = TCX_DROP; exit
/// ```
///
/// Every comparison is of bytes as they sit in the frame, loaded little-endian: port 4791
/// (bytes 12 b7) is 0xb712. A frame the program cannot vouch for (IPv4 options, a non-first
/// fragment, an IPv6 extension header) goes on to the stack, as it did without the program.
pub(crate) fn drop_program(to: SocketAddr) -> Vec<Insn> {
    let mut a = Asm {
        insns: Vec::with_capacity(24),
        to_exit: Vec::new(),
    };
    a.op(LDX_W, DATA, R1, SKB_DATA, 0)
        .op(LDX_W, END, R1, SKB_DATA_END, 0)
        .op(MOV64_K, R0, 0, 0, TCX_NEXT);
    let port = to.port().to_be_bytes();
    match to.ip() {
        IpAddr::V4(ip) => {
            a.need(at::V4_DPORT + 2)
                .bytes_eq(at::ETHERTYPE, &0x0800u16.to_be_bytes())
                .load(LDX_B, at::V4_VERSION_IHL)
                .unless_eq(0x45)
                .load(LDX_B, at::V4_PROTOCOL)
                .unless_eq(17);
            // Flags and fragment offset: any offset bit set (0x1fff big-endian) is a later fragment.
            a.load(LDX_H, at::V4_FRAGMENT);
            a.to_exit.push(a.insns.len());
            a.op(
                JSET32_K,
                V,
                0,
                0,
                u16::from_le_bytes(0x1fffu16.to_be_bytes()) as i32,
            )
            .bytes_eq(at::V4_DST, &ip.octets())
            .bytes_eq(at::V4_DPORT, &port);
        }
        IpAddr::V6(ip) => {
            a.need(at::V6_DPORT + 2)
                .bytes_eq(at::ETHERTYPE, &0x86ddu16.to_be_bytes())
                .load(LDX_B, at::V6_NEXT_HEADER)
                .unless_eq(17);
            for (i, word) in ip.octets().chunks(4).enumerate() {
                a.bytes_eq(at::V6_DST + 4 * i, word);
            }
            a.bytes_eq(at::V6_DPORT, &port);
        }
    }
    a.finish()
}

// bpf(2) commands, program and attach types (include/uapi/linux/bpf.h).
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
const BPF_TCX_INGRESS: u32 = 46;

/// `union bpf_attr` as `BPF_PROG_LOAD` reads it, up to the fields used.
#[repr(C)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` as `BPF_LINK_CREATE` reads it for TCX (no relative program, any revision).
#[repr(C)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    relative_fd: u32,
    _pad: u32,
    expected_revision: u64,
}

/// Why the program is not in place; the run header prints it after "no TCX ingress program: ".
#[derive(Debug, thiserror::Error)]
pub(crate) enum TcxError {
    /// Loading a tc program needs CAP_BPF and CAP_NET_ADMIN (or CAP_SYS_ADMIN).
    #[error("loading one needs CAP_BPF and CAP_NET_ADMIN (run as root)")]
    NotPermitted,
    /// The kernel has no bpf(2) at all.
    #[error("this kernel has no bpf(2) syscall (CONFIG_BPF_SYSCALL)")]
    NoBpf,
    /// The verifier refused the program (a bug of ours: its log says why).
    #[error("the verifier refused it ({source}): {log}")]
    Refused {
        /// The load's error.
        source: std::io::Error,
        /// The verifier's last lines.
        log: String,
    },
    /// The link could not be made: before Linux 6.6 there is no TCX.
    #[error(
        "attaching it to tc ingress of ifindex {ifindex} failed ({source}); TCX needs Linux 6.6 or later"
    )]
    Attach {
        /// The interface.
        ifindex: u32,
        /// The error.
        source: std::io::Error,
    },
}

/// `bpf(cmd, attr, size)`, whose result is a new descriptor.
///
/// # Safety
/// `attr` must be the attribute struct `cmd` reads, and every pointer in it valid for the call.
unsafe fn bpf_fd<T>(cmd: libc::c_long, attr: &T) -> std::io::Result<OwnedFd> {
    // SAFETY: the caller vouches for `attr`; the kernel reads `size_of::<T>()` bytes of it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *const T,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Loads `prog` as a tc program; with `log`, the verifier writes what it found there.
fn load(prog: &[Insn], log: Option<&mut [u8]>) -> std::io::Result<OwnedFd> {
    const LICENSE: &[u8] = b"GPL\0";
    let mut name = [0u8; 16];
    name[..13].copy_from_slice(b"roceperf_v2rx");
    let (log_level, log_size, log_buf) = match log {
        Some(buf) => (1, buf.len() as u32, buf.as_mut_ptr() as u64),
        None => (0, 0, 0),
    };
    let attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_SCHED_CLS,
        insn_cnt: prog.len() as u32,
        insns: prog.as_ptr() as u64,
        license: LICENSE.as_ptr() as u64,
        log_level,
        log_size,
        log_buf,
        kern_version: 0,
        prog_flags: 0,
        prog_name: name,
        prog_ifindex: 0,
        expected_attach_type: BPF_TCX_INGRESS,
    };
    // SAFETY: a BPF_PROG_LOAD attribute whose instructions, license and log outlive the call.
    unsafe { bpf_fd(BPF_PROG_LOAD, &attr) }
}

/// Loads [`drop_program`] for `to` and attaches it to tc ingress of interface `ifindex`; the link it
/// returns detaches the program when dropped (or when the process dies).
pub(crate) fn attach_drop(ifindex: u32, to: SocketAddr) -> Result<OwnedFd, TcxError> {
    let prog = drop_program(to);
    let prog_fd = load(&prog, None).or_else(|e| {
        match e.raw_os_error() {
            Some(libc::EPERM) => return Err(TcxError::NotPermitted),
            Some(libc::ENOSYS) => return Err(TcxError::NoBpf),
            _ => {}
        }
        // Once more with the verifier's log, to say why.
        let mut log = vec![0u8; 16 << 10];
        match load(&prog, Some(&mut log)) {
            Ok(fd) => Ok(fd),
            Err(source) => {
                let text = String::from_utf8_lossy(&log);
                let text = text.trim_end_matches('\0').trim();
                let tail: Vec<&str> = text.lines().rev().take(3).collect();
                Err(TcxError::Refused {
                    source,
                    log: tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
                })
            }
        }
    })?;
    let attr = LinkCreate {
        prog_fd: prog_fd.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_TCX_INGRESS,
        flags: 0,
        relative_fd: 0,
        _pad: 0,
        expected_revision: 0,
    };
    // SAFETY: a BPF_LINK_CREATE attribute with no pointers. The link holds the program, so its own
    // descriptor may close when this returns.
    unsafe { bpf_fd(BPF_LINK_CREATE, &attr) }.map_err(|source| match source.raw_os_error() {
        Some(libc::EPERM) => TcxError::NotPermitted,
        _ => TcxError::Attach { ifindex, source },
    })
}

#[cfg(test)]
mod tests;
