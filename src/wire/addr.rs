//! The two addresses RoCE frames carry: [`MacAddr`] (Ethernet) and [`Gid`] (the 128-bit GRH/RoCE
//! address, IPv6-shaped), with the conversions between them and IP addresses that every transport,
//! the out-of-band handshake and the report need.
//!
//! Both serialize as their plain byte arrays (`[u8; 6]`, `[u8; 16]`), which is what the connection
//! description (`ConnInfo`) has always carried.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A 48-bit Ethernet (MAC) address, in wire order. Displays as `aa:bb:cc:dd:ee:ff`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// `00:00:00:00:00:00`: what `lo` reports, and what frames on `lo` may carry.
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// The six bytes.
    #[inline]
    pub const fn octets(self) -> [u8; 6] {
        self.0
    }

    /// The six bytes, borrowed.
    #[inline]
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// True for the all-zero address.
    pub(crate) fn is_zero(self) -> bool {
        self == MacAddr::ZERO
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(b: [u8; 6]) -> MacAddr {
        MacAddr(b)
    }
}

impl From<MacAddr> for [u8; 6] {
    fn from(m: MacAddr) -> [u8; 6] {
        m.0
    }
}

impl TryFrom<&[u8]> for MacAddr {
    type Error = std::array::TryFromSliceError;
    /// The address in a 6-byte slice (a header field).
    fn try_from(b: &[u8]) -> Result<MacAddr, Self::Error> {
        b.try_into().map(MacAddr)
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MacAddr({self})")
    }
}

/// `aa:bb:cc:dd:ee:ff` (hex digits of either case) did not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a MAC address of the form aa:bb:cc:dd:ee:ff")]
pub struct MacAddrParseError;

impl FromStr for MacAddr {
    type Err = MacAddrParseError;
    /// Parses six colon-separated hex bytes, as `ip neigh` and `/proc/net/arp` print them.
    fn from_str(s: &str) -> Result<MacAddr, MacAddrParseError> {
        let mut mac = [0u8; 6];
        let mut parts = s.split(':');
        for b in &mut mac {
            let part = parts.next().ok_or(MacAddrParseError)?;
            *b = u8::from_str_radix(part, 16).map_err(|_| MacAddrParseError)?;
        }
        match parts.next() {
            None => Ok(MacAddr(mac)),
            Some(_) => Err(MacAddrParseError),
        }
    }
}

/// A 128-bit GID in wire order: the GRH SGID/DGID of RoCE v1, the IP address of RoCE v2
/// (IPv4-mapped `::ffff:a.b.c.d` or IPv6). Displays in IPv6 notation, as `show_gids` does.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The all-zero GID: an unused table slot, and what a TCP description carries.
    pub const ZERO: Gid = Gid([0; 16]);

    /// The sixteen bytes.
    #[inline]
    pub const fn octets(self) -> [u8; 16] {
        self.0
    }

    /// The sixteen bytes, borrowed.
    #[inline]
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// True for the all-zero GID.
    pub(crate) fn is_zero(self) -> bool {
        self == Gid::ZERO
    }

    /// The GID that stands for an IP address: IPv4-mapped `::ffff:a.b.c.d`, or the IPv6 address.
    #[inline]
    pub fn from_ip(ip: IpAddr) -> Gid {
        match ip {
            // As one 128-bit value (::ffff in bits 32-47): a receiver builds one per packet.
            IpAddr::V4(v4) => Gid((0xffff_u128 << 32 | u128::from(v4.to_bits())).to_be_bytes()),
            IpAddr::V6(v6) => Gid(v6.octets()),
        }
    }

    /// The IP address a RoCE v2 GID stands for: IPv4 for `::ffff:a.b.c.d`, else IPv6.
    pub(crate) fn to_ip(self) -> IpAddr {
        let v6 = Ipv6Addr::from(self.0);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }

    /// The IPv4 address of an IPv4-mapped GID.
    pub fn ipv4(self) -> Option<Ipv4Addr> {
        Ipv6Addr::from(self.0).to_ipv4_mapped()
    }

    /// True for `::ffff:a.b.c.d`, the form a RoCE v2 GID takes for an IPv4 address.
    pub(crate) fn is_ipv4_mapped(self) -> bool {
        self.ipv4().is_some()
    }

    /// True for fe80::/10, or 169.254/16 for an IPv4-mapped GID.
    pub(crate) fn is_link_local(self) -> bool {
        match self.ipv4() {
            Some(v4) => v4.is_link_local(),
            None => self.0[0] == 0xfe && self.0[1] & 0xc0 == 0x80,
        }
    }

    /// The link-local EUI-64 GID `fe80::` + MAC with the U/L bit flipped and `ff:fe` inserted: the
    /// default GID every RoCE port has, and what RoCE v1 peers use to derive each other's MAC.
    pub fn link_local_eui64(mac: MacAddr) -> Gid {
        let m = mac.0;
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[8] = m[0] ^ 0x02;
        g[9] = m[1];
        g[10] = m[2];
        g[11] = 0xff;
        g[12] = 0xfe;
        g[13] = m[3];
        g[14] = m[4];
        g[15] = m[5];
        Gid(g)
    }

    /// The MAC inside a link-local EUI-64 GID, if the GID is one.
    pub(crate) fn eui64_mac(self) -> Option<MacAddr> {
        let g = self.0;
        let link_local = g[0] == 0xfe && g[1] & 0xc0 == 0x80 && g[2..8] == [0; 6];
        (link_local && g[11] == 0xff && g[12] == 0xfe)
            .then(|| MacAddr([g[8] ^ 0x02, g[9], g[10], g[13], g[14], g[15]]))
    }
}

impl From<[u8; 16]> for Gid {
    fn from(b: [u8; 16]) -> Gid {
        Gid(b)
    }
}

impl From<Gid> for [u8; 16] {
    fn from(g: Gid) -> [u8; 16] {
        g.0
    }
}

impl From<Ipv6Addr> for Gid {
    fn from(a: Ipv6Addr) -> Gid {
        Gid(a.octets())
    }
}

impl From<Gid> for Ipv6Addr {
    fn from(g: Gid) -> Ipv6Addr {
        Ipv6Addr::from(g.0)
    }
}

impl TryFrom<&[u8]> for Gid {
    type Error = std::array::TryFromSliceError;
    /// The GID in a 16-byte slice (a header field).
    fn try_from(b: &[u8]) -> Result<Gid, Self::Error> {
        b.try_into().map(Gid)
    }
}

impl FromStr for Gid {
    type Err = std::net::AddrParseError;
    /// Parses IPv6 notation, including sysfs's zero-padded `fe80:0000:...:9b01`.
    fn from_str(s: &str) -> Result<Gid, Self::Err> {
        s.parse::<Ipv6Addr>().map(Gid::from)
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Ipv6Addr::from(self.0), f)
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_prints_parses_and_serializes_as_bytes() {
        let m = MacAddr([0x02, 0xfc, 0, 0xab, 0, 1]);
        assert_eq!(m.to_string(), "02:fc:00:ab:00:01");
        assert_eq!("02:FC:00:ab:00:01".parse::<MacAddr>(), Ok(m));
        assert!("02:fc:00:ab:00".parse::<MacAddr>().is_err());
        assert!("02:fc:00:ab:00:01:07".parse::<MacAddr>().is_err());
        assert!("02:fc:00:ab:00:zz".parse::<MacAddr>().is_err());
        assert_eq!(serde_json::to_string(&m).unwrap(), "[2,252,0,171,0,1]");
        assert_eq!(
            serde_json::from_str::<MacAddr>("[2,252,0,171,0,1]").unwrap(),
            m
        );
        assert!(MacAddr::ZERO.is_zero() && !m.is_zero());
    }

    #[test]
    fn gid_prints_as_ipv6_and_serializes_as_bytes() {
        let g = Gid::from_ip("10.0.0.5".parse().unwrap());
        assert_eq!(g.to_string(), "::ffff:10.0.0.5");
        assert_eq!(format!("{g:>18}"), "   ::ffff:10.0.0.5");
        assert_eq!(
            serde_json::to_string(&g).unwrap(),
            "[0,0,0,0,0,0,0,0,0,0,255,255,10,0,0,5]"
        );
        let back: Gid = serde_json::from_str("[0,0,0,0,0,0,0,0,0,0,255,255,10,0,0,5]").unwrap();
        assert_eq!(back, g);
        assert_eq!(
            "fe80:0000:0000:0000:c8d1:02ff:fe3a:9b01"
                .parse::<Gid>()
                .unwrap()
                .to_string(),
            "fe80::c8d1:2ff:fe3a:9b01"
        );
    }

    #[test]
    fn gid_ip_round_trip_and_families() {
        for ip in ["10.77.0.2", "fd77::2", "::1"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(Gid::from_ip(ip).to_ip(), ip);
        }
        let v4 = Gid::from_ip("169.254.1.1".parse().unwrap());
        assert!(v4.is_ipv4_mapped() && v4.is_link_local());
        assert!(!Gid::from_ip("10.0.0.1".parse().unwrap()).is_link_local());
        let v6: Gid = "fe80::1".parse().unwrap();
        assert!(!v6.is_ipv4_mapped() && v6.is_link_local());
        assert!(Gid::ZERO.is_zero());
    }

    #[test]
    fn eui64_round_trips_and_matches_the_kernel_rule() {
        let mac = MacAddr([0x02, 0xfc, 0x00, 0x00, 0x00, 0x01]);
        let gid = Gid::link_local_eui64(mac);
        // Same rule as the kernel's addrconf: fe80::fc:ff:fe00:1 for 02:fc:00:00:00:01.
        assert_eq!(gid.to_string(), "fe80::fc:ff:fe00:1");
        assert_eq!(gid.eui64_mac(), Some(mac));
        assert_eq!(Gid::from_ip("10.0.0.1".parse().unwrap()).eui64_mac(), None);
    }
}
