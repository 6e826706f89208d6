//! ICRCs started over a network header, kept by what that header depends on: a path's headers
//! (and a peer's) change only with the packet's length, so most packets hash only their own bytes,
//! not the 28 to 48 bytes of masked IP/UDP or GRH header in front of them.

use crate::wire::Icrc;

/// Entries kept: a ping-pong alternates two lengths (a request and its ACK), a stream one or two.
const ENTRIES: usize = 4;

/// Up to four ICRCs started over a header (`V`: the start, or the start and what else its header
/// fixes), by `K` (a length, or a peer and a length); a new key replaces the oldest entry.
pub(crate) struct HeaderIcrcs<K: Copy + PartialEq, V: Copy = Icrc> {
    entries: [Option<(K, V)>; ENTRIES],
    next: usize,
}

impl<K: Copy + PartialEq, V: Copy> HeaderIcrcs<K, V> {
    pub(crate) fn new() -> HeaderIcrcs<K, V> {
        HeaderIcrcs {
            entries: [None; ENTRIES],
            next: 0,
        }
    }

    /// The ICRC kept for `key`, if any: [`get`](Self::get)'s lookup alone, inlined (the transmit
    /// path makes one per packet, and nearly all hit: a call would cost as much as its compares).
    #[inline(always)]
    pub(crate) fn kept(&self, key: K) -> Option<V> {
        self.entries
            .iter()
            .flatten()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// The ICRC started over the header `key` stands for; `start` computes it when it is not kept.
    #[inline]
    pub(crate) fn get(&mut self, key: K, start: impl FnOnce() -> V) -> V {
        if let Some(icrc) = self.kept(key) {
            return icrc;
        }
        let icrc = start();
        self.keep(key, icrc);
        icrc
    }

    /// [`get`](Self::get) for a header `start` may refuse (`None`), which is then not kept; the
    /// entry is the one whose key `is` accepts, and `start` names the key it keeps. A key compared
    /// where it lies is never built for a hit (a receive's addresses are enums: copying them into a
    /// key cost more than the compares).
    #[inline(always)]
    pub(crate) fn try_get_by(
        &mut self,
        is: impl Fn(&K) -> bool,
        start: impl FnOnce() -> Option<(K, V)>,
    ) -> Option<V> {
        if let Some((_, v)) = self.entries.iter().flatten().find(|(k, _)| is(k)) {
            return Some(*v);
        }
        let (key, icrc) = start()?;
        self.keep(key, icrc);
        Some(icrc)
    }

    /// Keeps `icrc` for `key` in place of the oldest entry.
    #[inline]
    fn keep(&mut self, key: K, icrc: V) {
        self.entries[self.next] = Some((key, icrc));
        self.next = (self.next + 1) % ENTRIES;
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::transport::soft::path::ipv4_repr;
    use crate::wire::{NetRepr, UdpRepr};

    #[test]
    fn a_kept_start_gives_the_icrc_of_every_packet_of_its_length() {
        let net = NetRepr::V2v4(
            ipv4_repr(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)),
            UdpRepr::roce(0xc001),
        );
        let mut cache = HeaderIcrcs::new();
        let mut computed = 0;
        for round in 0..3u8 {
            for len in [16usize, 32, 40, 48, 64, 80] {
                let ib: Vec<u8> = (0..len).map(|i| i as u8 ^ round).collect();
                let start = cache.get(len, || {
                    computed += 1;
                    net.icrc_start(len)
                });
                assert_eq!(start.finish_ib(&ib), net.icrc(&ib), "length {len}");
            }
        }
        // Six lengths through four entries, oldest out first: every lookup misses.
        assert_eq!(computed, 18);
        let mut hits = HeaderIcrcs::new();
        let mut computed = 0;
        for _ in 0..5 {
            for len in [16usize, 32] {
                hits.get(len, || {
                    computed += 1;
                    net.icrc_start(len)
                });
            }
        }
        assert_eq!(computed, 2);
    }
}
