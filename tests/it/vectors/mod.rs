//! Helpers shared by the wire integration tests: the repository's reference vectors
//! (`tests/data/vectors/`), hex decoding, a tiny pcap reader and writer.
#![allow(dead_code)] // each test module uses a different subset

use std::path::{Path, PathBuf};

/// `tests/data/vectors/`: the reference `.hex` frames and, under `rxe/`, the real Soft-RoCE captures
/// (see its README for where each came from). Part of the repository, so a clean clone has it.
pub fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/vectors")
}

/// `tests/data/vectors/rxe/<file>`: one of the real kernel Soft-RoCE captures.
pub fn rxe_pcap(file: &str) -> PathBuf {
    vectors_dir().join("rxe").join(file)
}

/// Decodes a hex string (whitespace ignored).
pub fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(s.len().is_multiple_of(2), "odd-length hex");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("bad hex digit"))
        .collect()
}

/// Reads `tests/data/vectors/<name>.hex` as bytes.
pub fn vector(name: &str) -> Vec<u8> {
    let path = vectors_dir().join(format!("{name}.hex"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    unhex(&text)
}

/// Names (file stems) of every `.hex` vector.
pub fn vector_names() -> Vec<String> {
    let dir = vectors_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| {
            let p = e.ok()?.path();
            if p.extension()? != "hex" {
                return None;
            }
            Some(p.file_stem()?.to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    names
}

/// Link type of Ethernet in pcap headers.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// Reads the packets of a classic pcap file (either byte order, µs or ns timestamps). Fails on
/// anything that is not Ethernet.
pub fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        data.len() >= 24,
        "{}: shorter than a pcap header",
        path.display()
    );
    let magic = u32::from_le_bytes(data[0..4].try_into().unwrap());
    let le = match magic {
        0xa1b2_c3d4 | 0xa1b2_3c4d => true,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => false,
        m => panic!("{}: not a pcap file (magic {m:#x})", path.display()),
    };
    let u32_at = |at: usize| {
        let b: [u8; 4] = data[at..at + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    assert_eq!(
        u32_at(20),
        LINKTYPE_ETHERNET,
        "{}: not an Ethernet capture",
        path.display()
    );
    let mut at = 24;
    let mut packets = Vec::new();
    while at < data.len() {
        assert!(
            at + 16 <= data.len(),
            "{}: truncated record header",
            path.display()
        );
        let incl = u32_at(at + 8) as usize;
        let orig = u32_at(at + 12) as usize;
        assert_eq!(
            incl,
            orig,
            "{}: packet was cut by the snap length",
            path.display()
        );
        at += 16;
        assert!(
            at + incl <= data.len(),
            "{}: truncated packet",
            path.display()
        );
        packets.push(data[at..at + incl].to_vec());
        at += incl;
    }
    packets
}

/// Writes Ethernet frames as a little-endian µs pcap file, one second apart.
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(&(i as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
