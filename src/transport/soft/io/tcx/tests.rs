use super::super::test_frames::{eth, ipv4_udp as v4, ipv6_udp as v6};
use super::*;

const OURS: &str = "10.77.0.1:4791";

/// Runs the subset of eBPF the program uses over `frame`, of which the first `linear` bytes lie
/// between `skb->data` and `skb->data_end`, as the kernel would after its verifier: a load from the
/// frame beyond what a bounds check proved, or from stack bytes nothing wrote, or misaligned on the
/// stack, panics (the verifier would have refused the program), so every test also checks that the
/// program checks before it reads.
fn run(prog: &[Insn], frame: &[u8], linear: usize) -> i32 {
    // Fake addresses, so pointer arithmetic is checked as the kernel's.
    const CTX: u64 = 0x3000_0000;
    const PKT: u64 = 0x1000_0000;
    const FP: u64 = 0x2000_0000;
    let linear = linear.min(frame.len());
    let mut stack: [Option<u8>; 512] = [None; 512];
    let slot = |addr: u64| (addr + 512 - FP) as usize;
    let mut r = [0u64; 11];
    r[1] = CTX;
    r[10] = FP;
    let mut proven = 0u64; // bytes of the frame a bounds check has proven linear
    let mut pc = 0usize;
    // Jumps only go forward, so a program runs at most once through.
    while pc < prog.len() {
        let i = prog[pc];
        let (dst, src) = ((i.regs & 0xf) as usize, (i.regs >> 4) as usize);
        let next = pc + 1;
        pc = next;
        let mut jump = |taken: bool| {
            if taken {
                assert!(i.off >= 0, "a backward jump");
                pc = next + i.off as usize;
            }
        };
        match i.code {
            LDX_W if r[src] == CTX => {
                r[dst] = match i.off {
                    SKB_DATA => PKT,
                    SKB_DATA_END => PKT + linear as u64,
                    o => panic!("context field at {o} is not data or data_end"),
                }
            }
            LDX_W | LDX_H | LDX_B => {
                let width = match i.code {
                    LDX_W => 4,
                    LDX_H => 2,
                    _ => 1,
                };
                let addr = r[src].wrapping_add(i.off as i64 as u64);
                let mut v = [0u8; 8];
                if (PKT..PKT + frame.len() as u64).contains(&addr) {
                    let at = addr - PKT;
                    assert!(
                        at + width <= proven,
                        "load of {width} bytes at {at} before a bounds check proved {}",
                        at + width
                    );
                    v[..width as usize].copy_from_slice(&frame[at as usize..(at + width) as usize]);
                } else {
                    assert!(
                        (FP - 512..FP).contains(&addr),
                        "load from {addr:#x}: neither frame nor stack"
                    );
                    assert_eq!(
                        addr % width,
                        0,
                        "misaligned stack load at fp{}",
                        addr as i64 - FP as i64
                    );
                    for (k, b) in v[..width as usize].iter_mut().enumerate() {
                        *b = stack[slot(addr) + k].expect("a load of stack bytes nothing wrote");
                    }
                }
                r[dst] = u64::from_le_bytes(v);
            }
            MOV64_K => r[dst] = i.imm as i64 as u64,
            MOV64_X => r[dst] = r[src],
            ADD64_K => r[dst] = r[dst].wrapping_add(i.imm as i64 as u64),
            JA => jump(true),
            JGT_X => {
                let taken = r[dst] > r[src];
                if !taken && r[src] == PKT + linear as u64 {
                    proven = proven.max(r[dst] - PKT);
                }
                jump(taken)
            }
            JNE_K => jump(r[dst] != i.imm as i64 as u64),
            JNE32_K => jump(r[dst] as u32 != i.imm as u32),
            JSET32_K => jump(r[dst] as u32 & i.imm as u32 != 0),
            CALL => {
                assert_eq!(i.imm, SKB_LOAD_BYTES, "the one helper called");
                assert_eq!(r[1], CTX, "the helper's first argument is the skb");
                let (offset, to, len) = (r[2] as usize, r[3], r[4] as usize);
                assert!(
                    (FP - 512..FP).contains(&to) && to + len as u64 <= FP,
                    "copy into the stack"
                );
                // As skb_header_pointer: the bytes, linear or not; an error (and zeros) past the end.
                let got = frame.get(offset..offset + len);
                for k in 0..len {
                    stack[slot(to) + k] = Some(got.map_or(0, |g| g[k]));
                }
                r[0] = if got.is_some() { 0 } else { -14i64 as u64 };
                // The call clobbers r1-r5.
                r[1..6].fill(0xbad);
            }
            EXIT => return r[0] as i32,
            c => panic!("opcode {c:#x} not in the interpreter"),
        }
    }
    panic!("ran off the end without an exit")
}

/// The verdict on `frame` whether its header is linear or, as an AF_PACKET sender's frame longer
/// than a page, only its Ethernet header is: the two must agree.
fn verdict_of(prog: &[Insn], frame: &[u8]) -> i32 {
    let whole = run(prog, frame, frame.len());
    assert_eq!(
        run(prog, frame, 14),
        whole,
        "the verdict depends on what is linear"
    );
    assert_eq!(
        run(prog, frame, 0),
        whole,
        "the verdict depends on what is linear"
    );
    whole
}

#[test]
fn instructions_encode_as_struct_bpf_insn() {
    assert_eq!(std::mem::size_of::<Insn>(), 8);
    let p = drop_program(OURS.parse().unwrap());
    // r2 = *(u32 *)(r1 + 76): LDX|MEM|W, dst 2 in the low nibble, src 1 in the high one.
    let bytes = |i: Insn| {
        let mut b = vec![i.code, i.regs];
        b.extend_from_slice(&i.off.to_le_bytes());
        b.extend_from_slice(&i.imm.to_le_bytes());
        b
    };
    assert_eq!(bytes(p[0]), [0x61, 0x12, 76, 0, 0, 0, 0, 0]);
    assert_eq!(bytes(p[1]), [0x61, 0x13, 80, 0, 0, 0, 0, 0]);
    // r0 = -1 (TCX_NEXT) before anything can leave; the last two: r0 = 2 (TCX_DROP), exit.
    assert_eq!(bytes(p[2]), [0xb7, 0x00, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(bytes(p[p.len() - 2]), [0xb7, 0x00, 0, 0, 2, 0, 0, 0]);
    assert_eq!(bytes(p[p.len() - 1]), [0x95, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!((TCX_NEXT, TCX_DROP), (-1, 2));
    // 38 bytes (Ethernet, IPv4, the UDP ports) are checked before the first load: r4 = r2 + 38.
    assert_eq!(bytes(p[3]), [0xbf, 0x24, 0, 0, 0, 0, 0, 0]);
    assert_eq!(bytes(p[4]), [0x07, 0x04, 0, 0, 38, 0, 0, 0]);
    // bpf_skb_load_bytes(skb, 0, fp - 62, 38) when they are not linear: helper 26.
    let call = p.iter().position(|i| i.code == CALL).unwrap();
    assert_eq!(bytes(p[call]), [0x85, 0, 0, 0, 26, 0, 0, 0]);
    assert_eq!(bytes(p[call - 1]), [0xb7, 0x04, 0, 0, 38, 0, 0, 0]);
    assert_eq!(
        bytes(p[call - 2]),
        [0x07, 0x03, 0, 0, 0xc2, 0xff, 0xff, 0xff]
    );
    assert_eq!(bytes(p[call - 3]), [0xbf, 0xa3, 0, 0, 0, 0, 0, 0]);
    assert_eq!(p.len(), 32);
    // The constants as the frame's bytes read little-endian: port 4791 (12 b7), ethertype 0x0800,
    // 10.77.0.1.
    let compared: Vec<u32> = p
        .iter()
        .filter(|i| i.code == JNE32_K)
        .map(|i| i.imm as u32)
        .collect();
    assert_eq!(compared, [0x0008, 0x45, 17, 0x0100_4d0a, 0xb712]);
    assert!(p.iter().any(|i| i.code == JSET32_K && i.imm == 0xff1f));
    // Every check's jump lands on the final exit; the two ways to the header, on the checks.
    for (k, i) in p.iter().enumerate() {
        let to = k + 1 + i.off as usize;
        match i.code {
            JNE32_K | JSET32_K | JNE_K => assert_eq!(to, p.len() - 1, "jump at {k}"),
            JGT_X => assert_eq!(p[to].code, MOV64_K, "the copy starts at {to}"),
            JA => assert_eq!(
                (p[to].code, p[to].off),
                (LDX_H, 12),
                "the checks start at {to}"
            ),
            _ => {}
        }
    }
    let p6 = drop_program("[fd77::1]:4791".parse().unwrap());
    assert_eq!(p6.len(), 34);
    // 58 bytes (Ethernet, IPv6, the UDP ports) are checked, or copied.
    assert_eq!(bytes(p6[4]), [0x07, 0x04, 0, 0, 58, 0, 0, 0]);
    assert!(
        p6.iter()
            .any(|i| i.code == MOV64_K && i.regs & 0xf == R4 && i.imm == 58)
    );
    assert!(p6.iter().any(|i| i.code == JNE32_K && i.imm == 0xdd86));
}

#[test]
fn ipv4_program_drops_udp_to_our_address_and_port_only() {
    let prog = drop_program(OURS.parse().unwrap());
    let verdict = |f: &[u8]| verdict_of(&prog, f);
    let ours = [10, 77, 0, 1];
    assert_eq!(
        verdict(&v4(ours, 5, 0x4000, 17, 4791)),
        TCX_DROP,
        "RoCE v2 with DF"
    );
    assert_eq!(verdict(&v4(ours, 5, 0, 17, 4791)), TCX_DROP, "without DF");
    assert_eq!(
        verdict(&v4(ours, 5, 0x2000, 17, 4791)),
        TCX_DROP,
        "a first fragment (its datagram is ours to drop)"
    );
    let passes = [
        (v4(ours, 5, 0x4000, 17, 4792), "another port"),
        (v4([10, 77, 0, 3], 5, 0x4000, 17, 4791), "another address"),
        (
            v4([1, 77, 0, 10], 5, 0x4000, 17, 4791),
            "the address's bytes reversed",
        ),
        (v4(ours, 5, 0x4000, 6, 4791), "TCP"),
        (
            v4(ours, 5, 0x0010, 17, 4791),
            "a later fragment: no UDP header there",
        ),
        (
            v4(ours, 6, 0x4000, 17, 4791),
            "options: the port is elsewhere",
        ),
        (v6("fd77::1", 17, 4791), "IPv6, for an IPv4 endpoint"),
        (eth(0x8915, &[0x60; 60]), "RoCE v1"),
        (eth(0x0806, &[0; 28]), "ARP"),
        (
            v4(ours, 5, 0x4000, 17, 4791)[..37].to_vec(),
            "cut before the port",
        ),
        (vec![0u8; 10], "a runt"),
    ];
    for (f, what) in passes {
        assert_eq!(verdict(&f), TCX_NEXT, "{what}");
    }
    // An address whose last byte is 128 or more: compared as 32 bits, not sign-extended.
    let high = drop_program("10.77.0.200:4791".parse().unwrap());
    assert_eq!(
        verdict_of(&high, &v4([10, 77, 0, 200], 5, 0x4000, 17, 4791)),
        TCX_DROP
    );
    assert_eq!(verdict_of(&high, &v4(ours, 5, 0x4000, 17, 4791)), TCX_NEXT);
}

#[test]
fn ipv6_program_drops_udp_to_our_address_and_port_only() {
    let prog = drop_program("[fd77::1]:4791".parse().unwrap());
    let verdict = |f: &[u8]| verdict_of(&prog, f);
    assert_eq!(verdict(&v6("fd77::1", 17, 4791)), TCX_DROP);
    let passes = [
        (v6("fd77::1", 17, 4792), "another port"),
        (v6("fd77::2", 17, 4791), "another address"),
        (v6("fe80::1", 17, 4791), "another address, first word"),
        (v6("fd77::1", 6, 4791), "TCP"),
        (v6("fd77::1", 0, 4791), "an extension header"),
        (
            v4([10, 77, 0, 1], 5, 0x4000, 17, 4791),
            "IPv4, for an IPv6 endpoint",
        ),
        (
            v6("fd77::1", 17, 4791)[..57].to_vec(),
            "cut before the port's end",
        ),
    ];
    for (f, what) in passes {
        assert_eq!(verdict(&f), TCX_NEXT, "{what}");
    }
}

#[test]
fn the_kernel_verifies_and_attaches_the_program_when_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return; // loading needs CAP_BPF and CAP_NET_ADMIN; the integration tests run as root
    }
    // Port 1 on lo: attached for an instant, the program must not touch anyone's RoCE traffic.
    let lo = crate::transport::soft::netdev::NetDev::by_name("lo").unwrap();
    for to in ["127.0.0.1:1", "[::1]:1"] {
        match attach_drop(lo.index, to.parse().unwrap()) {
            Ok(link) => drop(link),
            // A kernel before 6.6 has no TCX, but it verified the program first.
            Err(TcxError::Attach { .. }) if !super::super::kernel_at_least(6, 6) => {}
            Err(e) => panic!("{to}: {e}"),
        }
    }
}
