//! perftest's key record as `-R` sends it: not the ASCII record of the TCP exchange but the raw
//! `struct pingpong_dest`, each field big-endian (perftest's `HAVE_ENDIAN` build, which every Linux
//! distribution's is), sent as one RDMA SEND on the CM-connected queue pair (`rdma_write_keys`).
//!
//! Layout (x86_64 and arm64 alignment): `lid`, `out_reads`, `qpn`, `psn`, `rkey` (4 bytes each), 4
//! bytes of padding, `vaddr` (8), then from perftest 6.29 (26.04) `tail_markers_vaddr` (8), then
//! `gid` (16), `srqn` (4), `gid_index` (4): 56 bytes up to 6.28, 64 from 6.29. Which one a peer
//! sends follows from the version it announced first.

use super::key::KeyRecord;
use super::msg::PeerVersion;
use super::{PerftestError, Result, show_bytes};

/// The first perftest version whose key record holds `tail_markers_vaddr`.
const TAIL_MARKERS_VERSION: f64 = 6.29;

/// Bytes of `struct pingpong_dest` up to perftest 6.28.
pub const BIN_KEY_LEN: usize = 56;
/// Bytes of `struct pingpong_dest` from perftest 6.29 (it gained `tail_markers_vaddr`).
pub const BIN_KEY_LEN_TAIL: usize = 64;

/// The binary record's length for a peer of `version`.
pub(crate) fn bin_key_len(version: &PeerVersion) -> usize {
    // perftest compares versions as atof() numbers, so do we.
    if version.value >= TAIL_MARKERS_VERSION - 1e-9 {
        BIN_KEY_LEN_TAIL
    } else {
        BIN_KEY_LEN
    }
}

/// Where the GID starts in a record of `len` bytes.
fn gid_at(len: usize) -> usize {
    if len == BIN_KEY_LEN_TAIL { 40 } else { 32 }
}

/// The record as a peer expecting `len` bytes reads it (`gid_index`: ours, which perftest prints).
pub fn encode(k: &KeyRecord, gid_index: u32, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    let put32 = |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_be_bytes());
    put32(&mut b, 0, u32::from(k.lid));
    put32(&mut b, 4, u32::from(k.out_reads));
    put32(&mut b, 8, k.qpn & 0xff_ffff);
    put32(&mut b, 12, k.psn & 0xff_ffff);
    put32(&mut b, 16, k.rkey);
    b[24..32].copy_from_slice(&k.vaddr.to_be_bytes());
    let g = gid_at(len);
    b[g..g + 16].copy_from_slice(&k.gid);
    put32(&mut b, g + 16, k.srqn);
    put32(&mut b, g + 20, gid_index);
    b
}

/// Parses a binary record of `b.len()` bytes (56 or 64); `step` names the exchange in errors.
pub fn parse(step: &str, b: &[u8]) -> Result<KeyRecord> {
    if b.len() != BIN_KEY_LEN && b.len() != BIN_KEY_LEN_TAIL {
        return Err(PerftestError::Malformed {
            step: step.to_string(),
            field: "length",
            detail: format!(
                "{} bytes; -R's binary key record has {BIN_KEY_LEN} (perftest up to 6.28) or {BIN_KEY_LEN_TAIL} (6.29 on)",
                b.len()
            ),
            shown: show_bytes(b),
        });
    }
    let get32 = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let g = gid_at(b.len());
    let mut gid = [0u8; 16];
    gid.copy_from_slice(&b[g..g + 16]);
    let mut vaddr = [0u8; 8];
    vaddr.copy_from_slice(&b[24..32]);
    Ok(KeyRecord {
        lid: get32(0) as u16,
        out_reads: get32(4) as u16,
        qpn: get32(8) & 0xff_ffff,
        psn: get32(12) & 0xff_ffff,
        rkey: get32(16),
        vaddr: u64::from_be_bytes(vaddr),
        gid,
        srqn: get32(g + 16),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> KeyRecord {
        KeyRecord {
            lid: 0,
            out_reads: 16,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234,
            vaddr: 0x5555_0000_1000,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 9, 0, 2],
            srqn: 0,
        }
    }

    #[test]
    fn both_layouts_round_trip_with_fields_big_endian() {
        for len in [BIN_KEY_LEN, BIN_KEY_LEN_TAIL] {
            let b = encode(&key(), 1, len);
            assert_eq!(b.len(), len);
            assert_eq!(&b[8..12], &[0, 0, 0, 0x11], "QPN");
            assert_eq!(&b[24..32], &0x5555_0000_1000u64.to_be_bytes(), "vaddr");
            assert_eq!(&b[len - 4..], &[0, 0, 0, 1], "gid_index last");
            assert_eq!(parse("keys", &b).unwrap(), key());
        }
        assert_eq!(encode(&key(), 1, BIN_KEY_LEN)[32 + 12..48], [10, 9, 0, 2]);
        assert!(parse("keys", &[0u8; 108]).is_err());
    }

    #[test]
    fn the_peer_version_picks_the_layout() {
        let v = |s: &str| {
            let mut b = [0u8; super::super::msg::VERSION_LEN];
            b[..s.len()].copy_from_slice(s.as_bytes());
            PeerVersion::parse(&b).unwrap()
        };
        assert_eq!(bin_key_len(&v("6.06")), 56);
        assert_eq!(bin_key_len(&v("6.28")), 56);
        assert_eq!(bin_key_len(&v("6.29")), 64);
    }
}
