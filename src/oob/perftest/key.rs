//! perftest's ASCII key record: how one queue pair is addressed, swapped per QP and reused as the barrier.
//!
//! With a GID (always on RoCE) it is 107 characters and a NUL, 108 bytes:
//! `LID:OUT_READS:QPN:PSN:RKEY:VADDR:g0:g1:...:g15:SRQN:` in fixed-width lower-case hex
//! (`%04x:%04x:%06x:%06x:%08x:%016llx:` then 16 × `%02x:` then `%08x:`). Without a GID (InfiniBand
//! without `-x`) it is `LID:OUT_READS:QPN:PSN:RKEY:VADDR:SRQN`, 58 characters and a NUL, 59 bytes.
//! Each side picks the format it *reads* from its own GID setting, so both sides must agree; roceperf
//! speaks RoCE and always uses the GID format.

use super::{PerftestError, Result, show_bytes};
use crate::params::TransportKind;
use crate::transport::{ConnInfo, QpInfo, ROCE_V2_PORT};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Bytes of a key record with a GID, NUL included.
pub(crate) const KEY_LEN_GID: usize = 108;
/// Bytes of a key record without a GID, NUL included (recognised only to explain the mismatch).
pub(crate) const KEY_LEN_NO_GID: usize = 59;

/// One queue pair's key record, as perftest's `struct pingpong_dest` carries it over TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRecord {
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// Outstanding RDMA READs this side accepts as a responder (perftest: 1 for SEND/WRITE, the device's
    /// `max_qp_rd_atom` or `-o` for READ). The peer uses it as its `max_rd_atomic`.
    pub out_reads: u16,
    /// Queue pair number (24 bits).
    pub qpn: u32,
    /// First packet sequence number (24 bits).
    pub psn: u32,
    /// Remote key of the buffer.
    pub rkey: u32,
    /// Address the peer targets (perftest: the second half of its buffer).
    pub vaddr: u64,
    /// The GID, in network order.
    pub gid: [u8; 16],
    /// SRQ number (XRC/DC only; 0 for RC).
    pub srqn: u32,
}

impl KeyRecord {
    /// The 108-byte record: fixed-width lower-case hex fields, colon after each, then a NUL.
    pub fn encode(&self) -> [u8; KEY_LEN_GID] {
        use std::fmt::Write;
        let mut s = String::with_capacity(KEY_LEN_GID);
        let _ = write!(
            s,
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out_reads,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff,
            self.rkey,
            self.vaddr
        );
        for g in self.gid {
            let _ = write!(s, "{g:02x}:");
        }
        let _ = write!(s, "{:08x}:", self.srqn);
        debug_assert_eq!(s.len(), KEY_LEN_GID - 1);
        let mut out = [0u8; KEY_LEN_GID];
        out[..KEY_LEN_GID - 1].copy_from_slice(s.as_bytes());
        out
    }

    /// Parses a 108-byte record strictly: exact field widths, hex digits only, colons where they belong,
    /// a NUL at the end. `step` names the exchange in errors; the error names the field.
    pub fn parse(step: &str, b: &[u8]) -> Result<KeyRecord> {
        let bad = |field: &'static str, detail: String| PerftestError::Malformed {
            step: step.to_string(),
            field,
            detail,
            shown: show_bytes(b),
        };
        if b.len() != KEY_LEN_GID {
            return Err(bad(
                "length",
                format!(
                    "{} bytes, a key record with GID has {KEY_LEN_GID}{}",
                    b.len(),
                    if b.len() == KEY_LEN_NO_GID {
                        " (59 is the format without GID: the peer runs without -x on an InfiniBand link)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        if b[KEY_LEN_GID - 1] != 0 {
            return Err(bad(
                "terminator",
                "the record does not end with a NUL".into(),
            ));
        }
        let mut pos = 0usize;
        let mut field = |name: &'static str, width: usize| -> Result<u64> {
            let digits = &b[pos..pos + width];
            if !digits.iter().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad(
                    name,
                    format!(
                        "expected {width} hex digits at byte {pos}, found {}",
                        show_bytes(digits)
                    ),
                ));
            }
            if b[pos + width] != b':' {
                return Err(bad(
                    name,
                    format!("expected ':' after the field at byte {}", pos + width),
                ));
            }
            // from_utf8 cannot fail on ASCII hex digits, and u64 holds 16 of them.
            let v = u64::from_str_radix(std::str::from_utf8(digits).unwrap_or("0"), 16)
                .map_err(|e| bad(name, e.to_string()))?;
            pos += width + 1;
            Ok(v)
        };
        let lid = field("LID", 4)? as u16;
        let out_reads = field("OUT_READS", 4)? as u16;
        let qpn = field("QPN", 6)? as u32;
        let psn = field("PSN", 6)? as u32;
        let rkey = field("RKEY", 8)? as u32;
        let vaddr = field("VADDR", 16)?;
        let mut gid = [0u8; 16];
        for g in gid.iter_mut() {
            *g = field("GID", 2)? as u8;
        }
        let srqn = field("SRQN", 8)? as u32;
        debug_assert_eq!(pos, KEY_LEN_GID - 1);
        Ok(KeyRecord {
            lid,
            out_reads,
            qpn,
            psn,
            rkey,
            vaddr,
            gid,
            srqn,
        })
    }

    /// Our side's records: one per QP of `info`, LID 0, SRQN 0, OUT_READS from the QP's
    /// `max_rd_atomic` (at least 1, as perftest sends for SEND and WRITE).
    pub(crate) fn from_conn_info(info: &ConnInfo) -> Vec<KeyRecord> {
        info.qps
            .iter()
            .map(|qp| KeyRecord {
                lid: 0,
                out_reads: qp.max_rd_atomic.clamp(1, u16::MAX as u32) as u16,
                qpn: qp.qpn & 0xff_ffff,
                psn: qp.psn & 0xff_ffff,
                rkey: qp.rkey,
                vaddr: qp.vaddr,
                gid: info.gid.octets(),
                srqn: 0,
            })
            .collect()
    }

    /// The peer as our transports want it. `buf_len` is what the peer exposes at each vaddr (perftest:
    /// `max(size, page size)`), `mtu` the agreed path MTU in bytes. The address is RoCE v2's UDP endpoint
    /// derived from the GID. `transport` is the *local* transport: a perftest peer speaks RoCE v2 on the
    /// wire, which `verbs` and `soft` both connect to, and our endpoints refuse a peer description of
    /// another kind.
    pub(crate) fn to_conn_info(
        keys: &[KeyRecord],
        buf_len: u64,
        mtu: u32,
        transport: TransportKind,
    ) -> ConnInfo {
        let gid = keys.first().map(|k| k.gid).unwrap_or([0; 16]);
        ConnInfo {
            needs_single_datagrams: false,
            connection: Default::default(),
            qkey: None,
            transport,
            gid: gid.into(),
            gid_index: None,
            mac: None,
            addr: Some(roce_v2_addr(&gid)),
            mtu,
            qps: keys
                .iter()
                .map(|k| QpInfo {
                    qpn: k.qpn,
                    psn: k.psn,
                    rkey: k.rkey,
                    vaddr: k.vaddr,
                    len: buf_len,
                    max_rd_atomic: u32::from(k.out_reads),
                })
                .collect(),
        }
    }
}

/// True when a GID is IPv4-mapped.
pub(crate) fn gid_is_ipv4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

/// A GID as an address: `10.0.0.2` when IPv4-mapped, else the IPv6 form.
pub(crate) fn gid_to_string(gid: &[u8; 16]) -> String {
    if gid_is_ipv4_mapped(gid) {
        Ipv4Addr::new(gid[12], gid[13], gid[14], gid[15]).to_string()
    } else {
        Ipv6Addr::from(*gid).to_string()
    }
}

/// The RoCE v2 UDP endpoint of a GID: `10.0.0.2:4791` or `[fe80::1]:4791`.
pub(crate) fn roce_v2_addr(gid: &[u8; 16]) -> String {
    if gid_is_ipv4_mapped(gid) {
        format!("{}:{ROCE_V2_PORT}", gid_to_string(gid))
    } else {
        format!("[{}]:{ROCE_V2_PORT}", gid_to_string(gid))
    }
}

/// perftest's `ctx_check_gid_compatibility`: both IPv4-mapped or both not.
pub(crate) fn check_gid_families(ours: &[u8; 16], theirs: &[u8; 16]) -> Result<()> {
    if gid_is_ipv4_mapped(ours) != gid_is_ipv4_mapped(theirs) {
        return Err(PerftestError::GidFamilyMismatch {
            ours: gid_to_string(ours),
            theirs: gid_to_string(theirs),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // A record as ib_write_bw 6.06 on rxe wrote it (tests/data/perftest_oob/write_bw_3000B_x5.trace).
    const REAL: &[u8] = b"0000:0001:000012:e92212:000003db:000056084799d000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01:00000000:\0";

    fn real() -> Vec<u8> {
        REAL.to_vec()
    }

    #[test]
    fn parses_a_real_record() {
        let k = KeyRecord::parse("first key round", &real()).unwrap();
        assert_eq!(k.lid, 0);
        assert_eq!(k.out_reads, 1);
        assert_eq!(k.qpn, 0x12);
        assert_eq!(k.psn, 0xe92212);
        assert_eq!(k.rkey, 0x3db);
        assert_eq!(k.vaddr, 0x5608_4799_d000);
        assert_eq!(
            k.gid,
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]
        );
        assert_eq!(k.srqn, 0);
        assert_eq!(k.encode().as_slice(), real().as_slice());
    }

    #[test]
    fn encode_parse_round_trip_extremes() {
        let k = KeyRecord {
            lid: 0xffff,
            out_reads: 0x80,
            qpn: 0xff_ffff,
            psn: 0,
            rkey: u32::MAX,
            vaddr: u64::MAX,
            gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            srqn: 0x1234,
        };
        let b = k.encode();
        assert_eq!(b.len(), 108);
        assert_eq!(b[107], 0);
        assert!(b[..107].iter().all(|c| c.is_ascii_hexdigit() || *c == b':'));
        assert_eq!(KeyRecord::parse("k", &b).unwrap(), k);
    }

    #[test]
    fn strict_errors_name_the_field() {
        let good = real();
        // The good record with byte `i` replaced by `c`.
        let with = |i: usize, c: u8| {
            let mut b = good.clone();
            b[i] = c;
            b
        };
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (good[..59].to_vec(), "length"),
            (with(107, b'x'), "terminator"),
            (with(10, b'g'), "QPN"),
            (with(16, b'-'), "QPN"),
            (with(40, b'z'), "VADDR"),
            (with(60, b'?'), "GID"),
            (with(100, b' '), "SRQN"),
        ];
        for (bytes, field) in cases {
            match KeyRecord::parse("post-RTR barrier", &bytes) {
                Err(PerftestError::Malformed { field: f, step, .. }) => {
                    assert_eq!(f, field);
                    assert_eq!(step, "post-RTR barrier");
                }
                other => panic!("expected a malformed {field}, got {other:?}"),
            }
        }
        let e = KeyRecord::parse("k", &good[..59]).unwrap_err().to_string();
        assert!(e.contains("without -x"), "{e}");
    }

    #[test]
    fn conn_info_mapping() {
        let info = ConnInfo {
            needs_single_datagrams: false,
            connection: Default::default(),
            qkey: None,
            transport: TransportKind::Soft,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 9, 0, 1].into(),
            gid_index: None,
            mac: None,
            addr: Some("10.9.0.1:4791".into()),
            mtu: 1024,
            qps: vec![QpInfo {
                qpn: 0x1_000011,
                psn: 0xabcdef,
                rkey: 0x1234,
                vaddr: 0x7f00_0000_1000,
                len: 8192,
                max_rd_atomic: 0,
            }],
        };
        let keys = KeyRecord::from_conn_info(&info);
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].qpn, 0x11, "QPN is 24 bits on the wire");
        assert_eq!(keys[0].out_reads, 1);
        assert_eq!(keys[0].gid, info.gid.octets());
        let back = KeyRecord::to_conn_info(&keys, 65536, 1024, TransportKind::Soft);
        assert_eq!(back.transport, TransportKind::Soft);
        assert_eq!(back.addr.as_deref(), Some("10.9.0.1:4791"));
        assert_eq!(back.qps[0].rkey, 0x1234);
        assert_eq!(back.qps[0].vaddr, 0x7f00_0000_1000);
        assert_eq!(back.qps[0].len, 65536);
        assert_eq!(back.qps[0].max_rd_atomic, 1);
        assert_eq!(back.mtu, 1024);
    }

    #[test]
    fn gid_families() {
        let v4 = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1];
        let v6 = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        assert!(check_gid_families(&v4, &v4).is_ok());
        assert!(check_gid_families(&v6, &v6).is_ok());
        let e = check_gid_families(&v4, &v6).unwrap_err().to_string();
        assert!(e.contains("10.0.0.1") && e.contains("fe80::1"), "{e}");
        assert_eq!(roce_v2_addr(&v6), "[fe80::1]:4791");
    }
}
