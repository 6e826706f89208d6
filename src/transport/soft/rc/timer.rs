//! Timer encodings of the IB spec: local ACK timeout and RNR NAK timer (roce-wire.md §6.7).

/// RNR timer code to nanoseconds. Code 0 means 655.36 ms; rxe's typo for code 25 is not copied.
const RNR_TIMER_NS: [u64; 32] = [
    655_360_000,
    10_000,
    20_000,
    30_000,
    40_000,
    60_000,
    80_000,
    120_000,
    160_000,
    240_000,
    320_000,
    480_000,
    640_000,
    960_000,
    1_280_000,
    1_920_000,
    2_560_000,
    3_840_000,
    5_120_000,
    7_680_000,
    10_240_000,
    15_360_000,
    20_480_000,
    30_720_000,
    40_960_000,
    61_440_000,
    81_920_000,
    122_880_000,
    163_840_000,
    245_760_000,
    327_680_000,
    491_520_000,
];

/// Local ACK timeout for a 5-bit code: 4.096 µs × 2^code; code 0 disables the timer (`None`).
pub fn ack_timeout_ns(code: u8) -> Option<u64> {
    match code & 0x1f {
        0 => None,
        c => Some(4096u64 << c),
    }
}

/// RNR NAK wait for a 5-bit timer code, in nanoseconds.
pub fn rnr_timer_ns(code: u8) -> u64 {
    RNR_TIMER_NS[usize::from(code & 0x1f)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_timeout_follows_4096ns_times_power_of_two() {
        assert_eq!(ack_timeout_ns(0), None);
        assert_eq!(ack_timeout_ns(1), Some(8192));
        // perftest's default 14 is about 67 ms.
        assert_eq!(ack_timeout_ns(14), Some(67_108_864));
        assert_eq!(ack_timeout_ns(31), Some(4096u64 << 31));
    }

    #[test]
    fn rnr_timer_table_matches_the_spec_values() {
        assert_eq!(rnr_timer_ns(0), 655_360_000);
        assert_eq!(rnr_timer_ns(1), 10_000);
        assert_eq!(rnr_timer_ns(12), 640_000);
        assert_eq!(rnr_timer_ns(25), 61_440_000);
        assert_eq!(rnr_timer_ns(31), 491_520_000);
        assert_eq!(rnr_timer_ns(32 + 1), 10_000, "only the low 5 bits count");
    }
}
