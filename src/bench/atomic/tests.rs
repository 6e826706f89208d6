use super::*;
use crate::transport::{ConnInfo, Endpoint};

/// A responder's memory, executing requests as a device does, in host or big-endian order.
struct Device {
    mem: Vec<u8>,
    big: bool,
}

impl Device {
    fn new(seq: &Atomics, big: bool) -> Device {
        let mut mem = vec![0u8; 2 * seq.half_len() as usize];
        let half = seq.half_len() as usize;
        seq.prepare(&mut mem, half, 0);
        Device { mem, big }
    }

    fn load(&self, at: usize) -> u64 {
        let b: [u8; 8] = self.mem[at..at + 8].try_into().unwrap();
        if self.big {
            u64::from_be_bytes(b)
        } else {
            u64::from_ne_bytes(b)
        }
    }

    fn store(&mut self, at: usize, v: u64) {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_ne_bytes()
        };
        self.mem[at..at + 8].copy_from_slice(&b);
    }

    /// Executes `wr` (its remote address is an offset into `mem`); returns the original's bytes as the
    /// device puts them in the requester's slot.
    fn execute(&mut self, wr: &SendRequest) -> [u8; 8] {
        let at = wr.remote.unwrap().addr as usize;
        let orig = self.load(at);
        let new = match wr.op {
            SendOp::FetchAdd(add) => orig.wrapping_add(add),
            SendOp::CompareSwap { compare, swap } if orig == compare => swap,
            SendOp::CompareSwap { .. } => orig,
            _ => unreachable!(),
        };
        self.store(at, new);
        if self.big {
            orig.to_be_bytes()
        } else {
            orig.to_ne_bytes()
        }
    }
}

fn target(seq: &Atomics) -> RemoteAddr {
    RemoteAddr {
        addr: seq.half_len(),
        rkey: 1,
    }
}

/// Runs `ops` operations of queue pair 0 through `dev`, checking every original, then the tally and the
/// target as the responder does.
fn run(seq: Atomics, dev: &mut Device, ops: u64) -> Result<()> {
    let mut run = AtomicRun::new(seq, 1);
    let mut local = vec![0u8; 2 * seq.half_len() as usize];
    for k in 0..ops {
        let wr = seq.request(0, k, target(&seq), true);
        let got = dev.execute(&wr);
        local[wr.offset as usize..wr.offset as usize + 8].copy_from_slice(&got);
        run.check(&mut local, 0, k)?;
        run.add(0, 1);
    }
    let tally = seq.tally_request(run.posted(0), target(&seq));
    assert_eq!(dev.execute(&tally), [0; 8], "the tally word starts at 0");
    seq.check_target(&dev.mem, seq.half_len() as usize, 0)
}

#[test]
fn every_original_and_final_word_follows_the_sequence_in_either_byte_order() {
    for op in AtomicOp::ALL {
        for seq in [Atomics::bandwidth(op, 128, true), Atomics::latency(op)] {
            for big in [false, true] {
                for ops in [0, 1, 5, 63, 64, 65, 1000] {
                    let mut dev = Device::new(&seq, big);
                    run(seq, &mut dev, ops).unwrap_or_else(|e| {
                        panic!("{op} words {} big {big} ops {ops}: {e}", seq.words)
                    });
                }
            }
        }
    }
}

#[test]
fn cmp_and_swap_chains_succeed_every_time() {
    let seq = Atomics::bandwidth(AtomicOp::CmpAndSwap, 128, false);
    let mut dev = Device::new(&seq, false);
    for k in 0..300 {
        let wr = seq.request(0, k, target(&seq), true);
        let SendOp::CompareSwap { compare, swap } = wr.op else {
            panic!("{:?}", wr.op)
        };
        assert_ne!(compare, swap);
        assert_eq!(
            u64::from_ne_bytes(dev.execute(&wr)),
            compare,
            "op {k} failed to swap"
        );
    }
}

#[test]
fn an_operation_run_twice_is_caught() {
    // FETCH_AND_ADD: the word moves on twice, so the next original on it is off by one.
    let seq = Atomics::latency(AtomicOp::FetchAndAdd);
    let mut dev = Device::new(&seq, false);
    let mut run = AtomicRun::new(seq, 1);
    let mut local = vec![0u8; 2 * seq.half_len() as usize];
    let wr = seq.request(0, 0, target(&seq), true);
    local[..8].copy_from_slice(&dev.execute(&wr));
    run.check(&mut local, 0, 0).unwrap();
    dev.execute(&wr); // a duplicate the responder should have answered from its cache
    let wr = seq.request(0, 1, target(&seq), true);
    local[..8].copy_from_slice(&dev.execute(&wr));
    let text = run.check(&mut local, 0, 1).unwrap_err().to_string();
    assert!(
        text.contains("FETCH_AND_ADD number 1 (word 0)") && text.contains("ran twice"),
        "{text}"
    );
    // CMP_AND_SWAP: a second run fails and changes nothing, but its answer is the swapped-in value.
    let seq = Atomics::latency(AtomicOp::CmpAndSwap);
    let mut dev = Device::new(&seq, false);
    let mut run = AtomicRun::new(seq, 1);
    let wr = seq.request(0, 0, target(&seq), true);
    dev.execute(&wr);
    local[..8].copy_from_slice(&dev.execute(&wr));
    let text = run.check(&mut local, 0, 0).unwrap_err().to_string();
    assert!(text.contains("CMP_AND_SWAP number 0 (word 0)"), "{text}");
}

#[test]
fn a_lost_operation_is_caught_at_the_responder() {
    let seq = Atomics::bandwidth(AtomicOp::FetchAndAdd, 16, true);
    let mut dev = Device::new(&seq, false);
    for k in 0..100 {
        // Operation 70 (word 6) never reaches memory, and nothing after it on that word is posted.
        if k != 70 {
            dev.execute(&seq.request(0, k, target(&seq), true));
        }
    }
    dev.execute(&seq.tally_request(100, target(&seq)));
    let e = seq
        .check_target(&dev.mem, seq.half_len() as usize, 0)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::AtomicTarget {
                word: 6,
                ops: 100,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_missing_tally_is_an_error_not_a_pass() {
    let seq = Atomics::latency(AtomicOp::FetchAndAdd);
    let dev = Device::new(&seq, false);
    let e = seq
        .check_target(&dev.mem, seq.half_len() as usize, 0)
        .unwrap_err();
    assert!(matches!(e, Error::AtomicTally { qp: 0, found: 0 }), "{e}");
}

#[test]
fn a_cleared_slot_fails_the_check() {
    // An operation that completed without writing its slot leaves the zero the last check put there.
    let seq = Atomics::latency(AtomicOp::FetchAndAdd);
    let mut run = AtomicRun::new(seq, 1);
    let mut local = vec![0u8; 128];
    assert!(run.check(&mut local, 0, 0).is_err());
}

#[test]
fn the_byte_order_is_fixed_by_the_first_value_that_tells() {
    let mut o = Order::Unknown;
    let p = palindrome(0x1234_5678);
    assert_eq!(p.swap_bytes(), p);
    assert_eq!(o.check(p.to_ne_bytes(), p), Ok(()));
    assert_eq!(o, Order::Unknown);
    assert_eq!(o.check((p + 1).to_be_bytes(), p + 1), Ok(()));
    assert_eq!(o, Order::Big);
    // Held to it: host order no longer passes.
    assert_eq!(
        o.check((p + 2).to_ne_bytes(), p + 2),
        Err((p + 2).swap_bytes())
    );
    let mut h = Order::Unknown;
    assert_eq!(h.check(7u64.to_ne_bytes(), 7), Ok(()));
    assert_eq!(h, Order::Host);
    assert_eq!(h.check(8u64.to_ne_bytes(), 9), Err(8));
}

#[test]
fn first_values_are_palindromes_and_differ_between_words_and_queue_pairs() {
    let seq = Atomics::bandwidth(AtomicOp::CmpAndSwap, 1, false);
    let v = seq.value(0, 0, 0);
    assert_eq!(v.swap_bytes(), v);
    assert_ne!(v, seq.value(0, 1, 0));
    assert_ne!(v, seq.value(1, 0, 0));
    assert_ne!(seq.value(0, 0, 1).swap_bytes(), seq.value(0, 0, 1));
}

#[test]
fn bandwidth_layout_follows_perftest_and_gives_each_operation_in_flight_a_slot() {
    let plain = Atomics::bandwidth(AtomicOp::FetchAndAdd, 128, false);
    assert_eq!((plain.words, plain.slots), (64, 64));
    let wr = plain.request(0, 65, target(&plain), false);
    assert_eq!(wr.offset, 64);
    assert_eq!(wr.remote.unwrap().addr, plain.half_len() + 64);
    assert_eq!((wr.len, wr.op), (8, SendOp::FetchAdd(1)));
    let checked = Atomics::bandwidth(AtomicOp::FetchAndAdd, 1000, true);
    assert_eq!(checked.slots, 1000);
    assert!(checked.half_len() >= 1000 * STRIDE);
    assert_eq!(Atomics::latency(AtomicOp::CmpAndSwap).half_len(), 128);
}

#[test]
fn tallies_run_through_an_endpoint() {
    // Over the TCP baseline (which executes atomics at the responder's poll), end to end.
    let seq = Atomics::bandwidth(AtomicOp::FetchAndAdd, 8, true);
    let half = seq.half_len() as usize;
    let (mut server, mut client) = crate::bench::testing::pair(1, 2 * half, 8);
    seq.prepare(server.buffer_mut(0), half, 0);
    let peer: ConnInfo = server.local_info();
    let targets = vec![RemoteAddr {
        addr: peer.qps[0].vaddr + half as u64,
        rkey: peer.qps[0].rkey,
    }];
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    let t = std::thread::spawn(move || {
        let mut comps = [Completion::EMPTY; 4];
        while !s.load(std::sync::atomic::Ordering::Relaxed) {
            server.poll_cq(&mut comps).unwrap();
        }
        server
    });
    let mut run = AtomicRun::new(seq, 1);
    let mut comps = [Completion::EMPTY; 4];
    for k in 0..10 {
        client
            .post_send(0, &seq.request(0, k, targets[0], true))
            .unwrap();
        while client.poll_cq(&mut comps).unwrap() == 0 {}
        run.check(client.buffer_mut(0), 0, k).unwrap();
        run.add(0, 1);
    }
    run.tally(&mut client, &targets).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let server = t.join().unwrap();
    seq.check_target(server.buffer(0), half, 0).unwrap();
}
