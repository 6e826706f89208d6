//! The RoCE v2/IPv4 ICRC when the IPv4 Identification is not known.
//!
//! The ICRC covers the IPv4 ID (roce-wire.md §2.3), yet a UDP socket never shows it to the receiver, and
//! senders choose it differently: 0 for an unconnected DF socket, 0, 1, 2… for the segments of a UDP GSO
//! send, a hash in rxe. CRC-32 is affine, so for a packet of a given length the ICRC under ID `x`
//! differs from the ICRC under ID 0 by `delta(x)`, a linear function of the 16 bits of `x` alone.
//! [`Ipv4IdInfluence`] holds that function for one length: [`delta`](Ipv4IdInfluence::delta) moves an
//! ICRC to another ID (a sender fixing up GSO segment k), and [`solve`](Ipv4IdInfluence::solve) finds the
//! ID, if any, that explains the difference between the ICRC found and the one computed under ID 0 (a
//! receiver verifying what it cannot see). A check through `solve` still rejects all but 2^-16 of
//! corrupted packets, on top of the UDP checksum; AF_PACKET receivers see the real header and keep the
//! full 32 bits.

use crc32fast::Hasher;

use super::{Ipv4Packet, UdpPacket};

/// Bytes of the pseudo-packet after the ID field: the rest of the IPv4 header (14) and the UDP header.
const AFTER_ID_IN_HEADERS: usize =
    Ipv4Packet::<&[u8]>::LEN - super::ipv4::field::IDENT.end + UdpPacket::<&[u8]>::LEN;

/// A block of zeros to feed the CRC, so computing an influence never allocates.
static ZEROS: [u8; 1024] = [0; 1024];

/// Feeds `n` zero bytes.
fn update_zeros(h: &mut Hasher, mut n: usize) {
    while n > 0 {
        let k = n.min(ZEROS.len());
        h.update(&ZEROS[..k]);
        n -= k;
    }
}

/// How the IPv4 ID moves the ICRC of RoCE v2/IPv4 packets with `ib_len` bytes of BTH through pad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4IdInfluence {
    ib_len: usize,
    /// `delta` of each single ID bit (bit i of the ID, i = 0 the least significant).
    bit: [u32; 16],
    /// The bits' deltas in echelon form: (vector, its pivot bit, the ID bits that make it).
    echelon: [(u32, u32, u16); 16],
    rank: usize,
    /// `solve`'s elimination by nibbles: it is linear in the difference it is given, so what it
    /// leaves (the bits no ID explains, high 32 bits) and the ID it finds (low 16 bits) for a
    /// difference are the XOR of what it gives for each of its eight nibbles alone, `by_nibble[j]
    /// [n]` for nibble value `n` at bits `4j..4j+4`: eight lookups instead of sixteen steps.
    by_nibble: [[u64; 16]; 8],
    /// `delta` of each ID a GSO super-datagram's segments take (IDs 0..64, one a segment): a
    /// segment's ICRC moves by one lookup, not a step per set ID bit.
    by_segment: [u32; SEGMENT_IDS],
}

/// IDs [`Ipv4IdInfluence::delta`] keeps ready: a GSO super-datagram has at most 64 segments.
const SEGMENT_IDS: usize = 64;

impl Ipv4IdInfluence {
    /// Computes the influence for packets of `ib_len` bytes (BTH through pad): 17 CRCs of that length.
    pub fn new(ib_len: usize) -> Ipv4IdInfluence {
        let after = AFTER_ID_IN_HEADERS + ib_len;
        // The linear part of the CRC: the same-length message with only the ID bits, minus all zeros.
        let crc_of = |id: u16| {
            let mut h = Hasher::new_with_initial(0);
            h.update(&id.to_be_bytes());
            update_zeros(&mut h, after);
            h.finalize()
        };
        let zero = crc_of(0);
        let mut bit = [0u32; 16];
        for (i, b) in bit.iter_mut().enumerate() {
            *b = crc_of(1 << i) ^ zero;
        }
        // Gaussian elimination in insertion order: every pivot's vector is already clear of the
        // earlier pivots' bits, so `solve` can clear them one after another without undoing any.
        let mut echelon = [(0u32, 0u32, 0u16); 16];
        let mut rank = 0;
        for (i, &b) in bit.iter().enumerate() {
            let (mut v, mut ids) = (b, 1u16 << i);
            for &(pv, pivot, pids) in &echelon[..rank] {
                if v & pivot != 0 {
                    v ^= pv;
                    ids ^= pids;
                }
            }
            if v != 0 {
                echelon[rank] = (v, 1 << (31 - v.leading_zeros()), ids);
                rank += 1;
            }
        }
        let mut inf = Ipv4IdInfluence {
            ib_len,
            bit,
            echelon,
            rank,
            by_nibble: [[0; 16]; 8],
            by_segment: [0; SEGMENT_IDS],
        };
        for id in 0..SEGMENT_IDS {
            inf.by_segment[id] = inf.delta_of_bits(id as u16);
        }
        for j in 0..8 {
            for n in 0..16u32 {
                let (rest, id) = inf.eliminate(n << (4 * j));
                inf.by_nibble[j][n as usize] = u64::from(rest) << 32 | u64::from(id);
            }
        }
        inf
    }

    /// Clears the pivots of `d` one after another: what no ID explains, and the ID bits used.
    fn eliminate(&self, mut d: u32) -> (u32, u16) {
        let mut id = 0u16;
        for &(v, pivot, ids) in &self.echelon[..self.rank] {
            if d & pivot != 0 {
                d ^= v;
                id ^= ids;
            }
        }
        (d, id)
    }

    /// The packet length (BTH through pad) this influence is for.
    pub fn ib_len(&self) -> usize {
        self.ib_len
    }

    /// ICRC under ID `id` XOR ICRC under ID 0, for any packet of this length.
    #[inline]
    pub fn delta(&self, id: u16) -> u32 {
        match self.by_segment.get(usize::from(id)) {
            Some(&d) => d,
            None => self.delta_of_bits(id),
        }
    }

    /// [`delta`](Self::delta) from the single bits' deltas.
    fn delta_of_bits(&self, id: u16) -> u32 {
        let mut d = 0;
        let mut rest = id;
        while rest != 0 {
            d ^= self.bit[rest.trailing_zeros() as usize];
            rest &= rest - 1;
        }
        d
    }

    /// The IPv4 ID under which a packet whose ICRC under ID 0 is `computed` carries ICRC `found`, or
    /// `None` when no ID explains the difference (the packet is corrupt).
    #[inline]
    pub fn solve(&self, computed: u32, found: u32) -> Option<u16> {
        let d = computed ^ found;
        let mut r = 0u64;
        for (j, table) in self.by_nibble.iter().enumerate() {
            r ^= table[(d >> (4 * j)) as usize & 0xf];
        }
        // No bits left over: the ID found explains the whole difference.
        (r >> 32 == 0).then_some(r as u16)
    }
}

/// The influences of the last few packet lengths seen: a benchmark uses only a handful (FIRST with its
/// RETH, MIDDLE, LAST, an ACK), so lookups almost always hit and the datapath never allocates.
#[derive(Debug, Clone, Default)]
pub struct Ipv4IdCache {
    entries: [Option<Ipv4IdInfluence>; 8],
    next: usize,
    /// The entry the last lookup returned.
    last: usize,
}

impl Ipv4IdCache {
    /// An empty cache.
    pub fn new() -> Ipv4IdCache {
        Ipv4IdCache::default()
    }

    /// The influence for `ib_len`, computed on a miss (replacing the oldest entry). Always
    /// inlined up to the first check: the entry that answered last is asked first (a
    /// stream's packets are mostly of one length, its MIDDLEs), so most lookups end there.
    #[inline(always)]
    pub fn get(&mut self, ib_len: usize) -> &Ipv4IdInfluence {
        if !hit(&self.entries[self.last], ib_len) {
            self.last = self.find(ib_len);
        }
        self.entries[self.last]
            .as_ref()
            .expect("found or made above")
    }

    /// [`get`](Self::get) past the last entry: the entry for `ib_len`, made on a miss.
    #[inline(never)]
    fn find(&mut self, ib_len: usize) -> usize {
        match self.entries.iter().position(|e| hit(e, ib_len)) {
            Some(i) => i,
            None => {
                let i = self.next;
                self.next = (self.next + 1) % self.entries.len();
                self.entries[i] = Some(Ipv4IdInfluence::new(ib_len));
                i
            }
        }
    }
}

/// Whether `e` is the influence for `ib_len`.
#[inline(always)]
fn hit(e: &Option<Ipv4IdInfluence>, ib_len: usize) -> bool {
    e.as_ref().is_some_and(|e| e.ib_len == ib_len)
}

#[cfg(test)]
mod tests {
    use super::super::{Ipv4Repr, UdpRepr, icrc_v2_ipv4};
    use super::*;
    use std::net::Ipv4Addr;

    fn repr(ident: u16) -> Ipv4Repr {
        Ipv4Repr {
            ident,
            ..Ipv4Repr::roce(
                Ipv4Addr::new(192, 168, 122, 1),
                Ipv4Addr::new(192, 168, 122, 99),
            )
        }
    }

    fn packet(len: usize, seed: u8) -> Vec<u8> {
        let mut ib: Vec<u8> = (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect();
        ib[0] = 0x0a; // RDMA WRITE MIDDLE
        ib
    }

    const UDP: UdpRepr = UdpRepr {
        src_port: 0xc123,
        dst_port: 4791,
        checksum: 0,
    };

    #[test]
    fn delta_moves_an_icrc_to_any_id() {
        for len in [16usize, 28, 4108, 4124, 9000] {
            let inf = Ipv4IdInfluence::new(len);
            let ib = packet(len, len as u8);
            let at0 = icrc_v2_ipv4(&repr(0), &UDP, &ib);
            for id in [1u16, 2, 3, 63, 0x1234, 0xbeef, 0xffff] {
                assert_eq!(
                    at0 ^ inf.delta(id),
                    icrc_v2_ipv4(&repr(id), &UDP, &ib),
                    "len {len} id {id:#x}"
                );
            }
        }
    }

    #[test]
    fn solve_recovers_the_id_the_sender_used() {
        let inf = Ipv4IdInfluence::new(4108);
        let ib = packet(4108, 7);
        let computed = icrc_v2_ipv4(&repr(0), &UDP, &ib);
        for id in [0u16, 1, 17, 0x8000, 0xa5a5, 0xffff] {
            let found = icrc_v2_ipv4(&repr(id), &UDP, &ib);
            assert_eq!(inf.solve(computed, found), Some(id));
        }
    }

    #[test]
    fn solve_rejects_corruption_that_no_id_explains() {
        let len = 4108;
        let inf = Ipv4IdInfluence::new(len);
        let ib = packet(len, 9);
        let found = icrc_v2_ipv4(&repr(0x4242), &UDP, &ib);
        // Flip one payload bit at a time: a CRC detects every such error, and no ID explains it.
        let mut rejected = 0;
        for at in (12..len).step_by(97) {
            let mut bad = ib.clone();
            bad[at] ^= 0x10;
            let computed = icrc_v2_ipv4(&repr(0), &UDP, &bad);
            if inf.solve(computed, found).is_none() {
                rejected += 1;
            }
        }
        assert_eq!(rejected, (12..len).step_by(97).count());
        // A flipped bit in the ICRC itself is not something an ID change produces either.
        let computed = icrc_v2_ipv4(&repr(0), &UDP, &ib);
        assert_eq!(inf.solve(computed, found ^ 1), None);
    }

    #[test]
    fn every_id_bit_counts() {
        // Sixteen independent deltas: distinct IDs never share an ICRC (a CRC-32 sees every 16-bit burst).
        let inf = Ipv4IdInfluence::new(100);
        assert_eq!(inf.rank, 16);
        assert!(inf.bit.iter().all(|&b| b != 0));
    }

    #[test]
    fn cache_hits_and_replaces_the_oldest() {
        let mut c = Ipv4IdCache::new();
        for len in 0..20usize {
            assert_eq!(c.get(100 + len).ib_len(), 100 + len);
        }
        let before = c.next;
        assert_eq!(c.get(119).ib_len(), 119, "a recent length hits");
        assert_eq!(c.next, before, "a hit computes nothing");
        assert_eq!(c.get(100).ib_len(), 100);
        assert_ne!(c.next, before, "an evicted length is computed again");
    }
}
