//! The GID table and the choice of a source GID, which is what makes a connection RoCE v1 or v2.
//!
//! Pure: [`select`] works on a recorded table, so the policy is tested without hardware. The policy is
//! perftest's (`get_best_gid_index`, reference §4): `-x` is used as given; otherwise every non-zero entry
//! is scored +100 when its family is the preferred one (IPv4-mapped by default, native IPv6 with
//! `--ipv6`), +10 when it is not link-local, +2 for RoCE v2 and +1 for v1; the best score wins and ties
//! go to the lowest index. `--roce v1|v2` restricts the candidates to that type.

use crate::params::RoceVersion;
use crate::transport::{Gid, Param};
use std::fmt;

/// The type of a GID table entry, which decides the encapsulation of every packet sent from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GidType {
    /// "IB/RoCE v1": on an Ethernet port, RoCE v1 (Ethertype 0x8915 + GRH).
    RoceV1,
    /// "RoCE v2": IP + UDP port 4791.
    RoceV2,
}

impl GidType {
    /// Parses the text of `/sys/class/infiniband/DEV/ports/P/gid_attrs/types/N`.
    pub(crate) fn from_sysfs(text: &str) -> Option<GidType> {
        match text.trim() {
            "IB/RoCE v1" | "RoCE v1" | "IB" => Some(GidType::RoceV1),
            "RoCE v2" => Some(GidType::RoceV2),
            _ => None,
        }
    }

    /// The RoCE version this type carries.
    pub fn version(self) -> RoceVersion {
        match self {
            GidType::RoceV1 => RoceVersion::V1,
            GidType::RoceV2 => RoceVersion::V2,
        }
    }
}

impl fmt::Display for GidType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GidType::RoceV1 => "RoCE v1",
            GidType::RoceV2 => "RoCE v2",
        })
    }
}

/// Display name of a RoCE version (`v1`, `v2`), as the flag spells it.
pub(crate) fn roce_flag(v: RoceVersion) -> &'static str {
    match v {
        RoceVersion::V1 => "v1",
        RoceVersion::V2 => "v2",
    }
}

/// One entry of a port's GID table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidEntry {
    /// Index in the table (the `-x` value and the QP's `sgid_index`).
    pub index: u32,
    /// The 128-bit GID.
    pub gid: Gid,
    /// RoCE v1 or v2.
    pub kind: GidType,
    /// The network interface the entry belongs to, when the kernel says.
    pub netdev: Option<String>,
}

impl GidEntry {
    /// True when every byte is zero (an unused slot).
    pub(crate) fn is_zero(&self) -> bool {
        self.gid.is_zero()
    }

    /// True for `::ffff:a.b.c.d`, the form a RoCE v2 GID takes for an IPv4 address.
    pub(crate) fn is_ipv4_mapped(&self) -> bool {
        self.gid.is_ipv4_mapped()
    }

    /// True for fe80::/10, or 169.254/16 for an IPv4-mapped GID.
    pub(crate) fn is_link_local(&self) -> bool {
        self.gid.is_link_local()
    }

    /// The address in the usual notation (`::ffff:10.0.0.1`, `fe80::...`).
    pub fn address(&self) -> String {
        self.gid.to_string()
    }

    /// perftest's score for this entry under the given preference (see the module documentation).
    pub(crate) fn score(&self, prefer_ipv6: bool) -> u32 {
        let mut s = 0;
        if self.is_ipv4_mapped() != prefer_ipv6 {
            s += 100;
        }
        if !self.is_link_local() {
            s += 10;
        }
        s + match self.kind {
            GidType::RoceV2 => 2,
            GidType::RoceV1 => 1,
        }
    }

    fn family(&self) -> &'static str {
        if self.is_ipv4_mapped() {
            "IPv4-mapped"
        } else {
            "IPv6"
        }
    }
}

impl fmt::Display for GidEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gid[{}] {} {}", self.index, self.address(), self.kind)?;
        if let Some(n) = &self.netdev {
            write!(f, " ({n})")?;
        }
        Ok(())
    }
}

/// The user's wishes: `-x`, `--roce`, `--ipv6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct GidPolicy {
    /// `-x N`: this index, as given.
    pub index: Option<u32>,
    /// `--roce v1|v2`: only entries of that type.
    pub roce: Option<RoceVersion>,
    /// `--ipv6`: prefer native IPv6 GIDs over IPv4-mapped ones.
    pub ipv6: bool,
}

/// The chosen entry and, in words, why it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidChoice {
    /// The entry the QPs will use as source GID.
    pub entry: GidEntry,
    /// A human explanation, printed in the header ("chosen because ...").
    pub why: String,
}

/// Why no GID could be chosen. Each message carries the table so the user can pick `-x`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GidError {
    /// `-x N` names a slot that does not exist.
    #[error(
        "{} {index}: no such GID index (the table has {len} entries); valid entries:\n{table}",
        Param::GidIndex
    )]
    NoSuchIndex {
        /// The requested index.
        index: u32,
        /// Slots in the table.
        len: usize,
        /// The non-zero entries, one per line.
        table: String,
    },
    /// `-x N` names an unused (all-zero) slot.
    #[error(
        "{} {index}: GID index {index} is empty (all zero); valid entries:\n{table}",
        Param::GidIndex
    )]
    EmptyIndex {
        /// The requested index.
        index: u32,
        /// The non-zero entries, one per line.
        table: String,
    },
    /// `-x N` and `--roce` disagree.
    #[error(
        "{} {index} is a {found} GID but {} {wanted} was given; drop one of the two, or pick a {wanted} entry:\n{table}",
        Param::GidIndex,
        Param::Roce
    )]
    TypeMismatch {
        /// The requested index.
        index: u32,
        /// Its type.
        found: GidType,
        /// What `--roce` asked for.
        wanted: &'static str,
        /// The non-zero entries, one per line.
        table: String,
    },
    /// No entry of the requested type (e.g. `--roce v1` on rxe, which has v2 only).
    #[error("no RoCE {wanted} GID on this port{hint}; entries:\n{table}")]
    NoMatchingType {
        /// What `--roce` asked for.
        wanted: &'static str,
        /// A hint such as "(Soft-RoCE implements v2 only)".
        hint: String,
        /// The non-zero entries, one per line.
        table: String,
    },
    /// Every slot is zero: the port has no address.
    #[error(
        "the GID table is empty: the port's network interface has no address; bring it up and give it an IP address (ip addr add ... dev IFACE)"
    )]
    EmptyTable,
}

/// The non-zero entries, one per line, for error messages and `--list`.
pub fn format_table(table: &[GidEntry]) -> String {
    let lines: Vec<String> = table
        .iter()
        .filter(|e| !e.is_zero())
        .map(|e| format!("  {e}"))
        .collect();
    if lines.is_empty() {
        "  (none)".to_string()
    } else {
        lines.join("\n")
    }
}

/// Chooses the source GID from `table` under `policy` (see the module documentation).
pub(crate) fn select(table: &[GidEntry], policy: &GidPolicy) -> Result<GidChoice, GidError> {
    if let Some(index) = policy.index {
        return select_given(table, policy, index);
    }
    let used: Vec<&GidEntry> = table.iter().filter(|e| !e.is_zero()).collect();
    if used.is_empty() {
        return Err(GidError::EmptyTable);
    }
    let candidates = used
        .iter()
        .filter(|e| policy.roce.is_none_or(|v| e.kind.version() == v));
    // max_by_key keeps the last maximum; iterate in reverse index order so that ties go to the lowest.
    let mut sorted: Vec<&&GidEntry> = candidates.collect();
    sorted.sort_by_key(|e| std::cmp::Reverse(e.index));
    let Some(best) = sorted.into_iter().max_by_key(|e| e.score(policy.ipv6)) else {
        let wanted = roce_flag(policy.roce.expect("candidates only filtered by --roce"));
        let hint = if policy.roce == Some(RoceVersion::V1)
            && used.iter().all(|e| e.kind == GidType::RoceV2)
        {
            " (this device has RoCE v2 GIDs only; Soft-RoCE (rxe) implements v2 only)".to_string()
        } else {
            String::new()
        };
        return Err(GidError::NoMatchingType {
            wanted,
            hint,
            table: format_table(table),
        });
    };
    let entry = (*best).clone();
    let preferred = if policy.ipv6 { "IPv6" } else { "IPv4-mapped" };
    let family = if entry.family() == preferred {
        format!("{} +100", entry.family())
    } else {
        format!("{} +0 (no {preferred} entry)", entry.family())
    };
    let scope = if entry.is_link_local() {
        "link-local +0"
    } else {
        "not link-local +10"
    };
    let kind = match entry.kind {
        GidType::RoceV2 => "RoCE v2 +2",
        GidType::RoceV1 => "RoCE v1 +1",
    };
    let mut why = format!(
        "auto-selected, best of {} entr{}: score {} = {family}, {scope}, {kind}",
        used.len(),
        if used.len() == 1 { "y" } else { "ies" },
        entry.score(policy.ipv6),
    );
    if policy.ipv6 {
        why.push_str(&format!("; IPv6 preferred by {}", Param::Ipv6));
    }
    if let Some(v) = policy.roce {
        why.push_str(&format!(
            "; only RoCE {} entries by {} {}",
            roce_flag(v),
            Param::Roce,
            roce_flag(v)
        ));
    }
    why.push_str(&format!("; {} N overrides", Param::GidIndex));
    Ok(GidChoice { entry, why })
}

fn select_given(table: &[GidEntry], policy: &GidPolicy, index: u32) -> Result<GidChoice, GidError> {
    let Some(entry) = table.iter().find(|e| e.index == index) else {
        return Err(GidError::NoSuchIndex {
            index,
            len: table
                .iter()
                .map(|e| e.index as usize + 1)
                .max()
                .unwrap_or(0),
            table: format_table(table),
        });
    };
    if entry.is_zero() {
        return Err(GidError::EmptyIndex {
            index,
            table: format_table(table),
        });
    }
    if let Some(v) = policy.roce
        && entry.kind.version() != v
    {
        return Err(GidError::TypeMismatch {
            index,
            found: entry.kind,
            wanted: roce_flag(v),
            table: format_table(table),
        });
    }
    Ok(GidChoice {
        entry: entry.clone(),
        why: format!("given with {} {index}", Param::GidIndex),
    })
}

#[cfg(test)]
mod tests;
