//! A TCX ingress program that keeps the kernel's IP/UDP receive off the RoCE v2 frames an AF_PACKET
//! endpoint already took: it returns `TCX_DROP` for a UDP frame to our address and port and
//! `TCX_NEXT` for anything else.
//!
//! Why it works: a packet socket bound with ETH_P_ALL is a tap, and the kernel hands a received
//! frame to its taps before tc ingress runs (`__netif_receive_skb_core`), so our socket has its copy
//! when the program drops the frame, and the IP stack never sees it. Without it, each frame also
//! climbs IP and UDP receive into a socket that discards it (`super::kernel_rx`'s fallback): about
//! 1.8 us more per RoCE v2 round trip than RoCE v1's across a veth pair, which the program brings
//! down to 0.1 us.
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
const JA: u8 = 0x05; // BPF_JMP | BPF_JA
const JGT_X: u8 = 0x2d; // BPF_JMP | BPF_JGT | BPF_X (64-bit pointers)
const JNE_K: u8 = 0x55; // BPF_JMP | BPF_JNE | BPF_K (a helper's 64-bit result)
// The 32-bit jumps compare the low word only: a loaded address word is zero-extended, while a 64-bit
// jump would sign-extend the immediate (any address whose last byte is 128 or more).
const JNE32_K: u8 = 0x56; // BPF_JMP32 | BPF_JNE | BPF_K
const JSET32_K: u8 = 0x46; // BPF_JMP32 | BPF_JSET | BPF_K
const CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT

/// `bpf_skb_load_bytes(skb, offset, to, len)`: copies bytes of the frame, linear or not.
const SKB_LOAD_BYTES: i32 = 26;

// Registers: r1 holds the context on entry and is a helper's first argument, r0 the verdict on exit
// and a helper's result, r10 the frame pointer; r6 and r7 survive a helper call.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
/// What was loaded from the frame.
const V: u8 = 5;
/// Where the frame's header is read: the frame itself, or its copy on the stack.
const HDR: u8 = 6;
/// The copy's result.
const R7: u8 = 7;
const FP: u8 = 10;
/// Where the header's copy starts, below the frame pointer. The 2 bytes that `64` would leave
/// align the copy's IPv4 and IPv6 addresses (frame offsets 30 and 38) to 4 bytes: the verifier
/// refuses a misaligned load from the stack.
const COPY_AT: i16 = -62;

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

    /// A jump to the final `exit` (pointed there by [`finish`](Self::finish)).
    fn jump_to_exit(&mut self, code: u8, dst: u8, src: u8, imm: i32) -> &mut Asm {
        self.to_exit.push(self.insns.len());
        self.op(code, dst, src, 0, imm)
    }

    /// Points the forward jump at `from` to the next instruction to be written.
    fn land(&mut self, from: usize) {
        self.insns[from].off = (self.insns.len() - from - 1) as i16;
    }

    /// Points `HDR` at the frame's first `len` bytes, r0 at `TCX_NEXT`; leaves with it when the
    /// frame is shorter. Where the bytes are linear (`skb->data` to `skb->data_end`: a frame under
    /// a page, or whose sender said where its headers end) `HDR` is the frame itself; an AF_PACKET
    /// sender's frame longer than a page has only its Ethernet header there, so the first `len`
    /// bytes are copied to the stack with `bpf_skb_load_bytes` and `HDR` points at the copy.
    fn header(&mut self, len: usize) -> &mut Asm {
        self.op(LDX_W, R2, R1, SKB_DATA, 0)
            .op(LDX_W, R3, R1, SKB_DATA_END, 0)
            .op(MOV64_K, R0, 0, 0, TCX_NEXT)
            .op(MOV64_X, R4, R2, 0, 0)
            .op(ADD64_K, R4, 0, 0, len as i32);
        let to_copy = self.insns.len();
        self.op(JGT_X, R4, R3, 0, 0).op(MOV64_X, HDR, R2, 0, 0);
        let to_checks = self.insns.len();
        self.op(JA, 0, 0, 0, 0);
        self.land(to_copy);
        // bpf_skb_load_bytes(r1 = skb, r2 = 0, r3 = fp + COPY_AT, r4 = len): 0, or an error when
        // the frame is shorter than len.
        self.op(MOV64_K, R2, 0, 0, 0)
            .op(MOV64_X, R3, FP, 0, 0)
            .op(ADD64_K, R3, 0, 0, COPY_AT as i32)
            .op(MOV64_K, R4, 0, 0, len as i32)
            .op(CALL, 0, 0, 0, SKB_LOAD_BYTES)
            .op(MOV64_X, R7, R0, 0, 0)
            .op(MOV64_K, R0, 0, 0, TCX_NEXT)
            .jump_to_exit(JNE_K, R7, 0, 0)
            .op(MOV64_X, HDR, FP, 0, 0)
            .op(ADD64_K, HDR, 0, 0, COPY_AT as i32);
        self.land(to_checks);
        self
    }

    /// `V = *(size *)(HDR + at)`: a little-endian load of the frame's bytes at `at`.
    fn load(&mut self, code: u8, at: usize) -> &mut Asm {
        self.op(code, V, HDR, at as i16, 0)
    }

    /// Leaves with `TCX_NEXT` unless `V == value` in its low 32 bits.
    fn unless_eq(&mut self, value: u32) -> &mut Asm {
        self.jump_to_exit(JNE32_K, V, 0, value as i32)
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
///  r2 = skb->data; r3 = skb->data_end; r0 = TCX_NEXT
///  if r2 + N > r3 goto copy                  N = 38 (IPv4: up to the UDP port), 58 (IPv6)
///  r6 = r2; goto checks                      the header is linear: read it in place
///  copy: r7 = bpf_skb_load_bytes(skb, 0, fp - 62, N); r0 = TCX_NEXT
///  if r7 != 0 goto exit                      shorter than N
///  r6 = fp - 62                              read the copy
///  checks, IPv4:                             checks, IPv6:
///  ethertype == 0x0800                       ethertype == 0x86dd
///  version/IHL == 0x45 (the port at 36)      next header == 17 (UDP)
///  protocol == 17 (UDP)                      destination == ours (4 words)
///  fragment offset == 0                      destination port == ours
///  destination == ours
///  destination port == ours
///  r0 = TCX_DROP; exit:                      (every failed check jumps to exit)
/// ```
///
/// Every comparison is of bytes as they sit in the frame, loaded little-endian: port 4791
/// (bytes 12 b7) is 0xb712. A frame the program cannot vouch for (IPv4 options, a non-first
/// fragment, an IPv6 extension header) goes on to the stack, as it did without the program.
pub(crate) fn drop_program(to: SocketAddr) -> Vec<Insn> {
    let mut a = Asm {
        insns: Vec::with_capacity(40),
        to_exit: Vec::new(),
    };
    let port = to.port().to_be_bytes();
    match to.ip() {
        IpAddr::V4(ip) => {
            a.header(at::V4_DPORT + 2)
                .bytes_eq(at::ETHERTYPE, &0x0800u16.to_be_bytes())
                .load(LDX_B, at::V4_VERSION_IHL)
                .unless_eq(0x45)
                .load(LDX_B, at::V4_PROTOCOL)
                .unless_eq(17)
                // Flags and fragment offset: an offset bit set (0x1fff big-endian) is a later
                // fragment.
                .load(LDX_H, at::V4_FRAGMENT)
                .jump_to_exit(
                    JSET32_K,
                    V,
                    0,
                    u16::from_le_bytes(0x1fffu16.to_be_bytes()) as i32,
                )
                .bytes_eq(at::V4_DST, &ip.octets())
                .bytes_eq(at::V4_DPORT, &port);
        }
        IpAddr::V6(ip) => {
            a.header(at::V6_DPORT + 2)
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
    // The kernel asks every program for a license; it decides only whether GPL-only helpers may be
    // called, and bpf_skb_load_bytes is not one. "GPL" is what tc programs conventionally declare.
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
