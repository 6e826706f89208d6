//! The NIC's own counters over a run (verbs: `-W`, and the default congestion set): for each size,
//! each counter's value before and after the size ran, and the difference.

use serde::{Deserialize, Serialize};

/// The unit of `port_xmit_data` and `port_rcv_data`: the InfiniBand PMA counts 4-byte words.
pub const WORDS: &str = "4-byte words";

/// Where the counters were read and what they did over each size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicCounters {
    /// The RDMA device (`mlx5_0`, `rxe0`).
    pub device: String,
    /// Its port.
    pub port: u8,
    /// The network interface behind the port, whose `ethtool -S` statistics the `ethtool/` counters
    /// are; absent when the tree names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
    /// One entry per row of the table, in order.
    pub sizes: Vec<SizeCounters>,
}

/// The counters over one row: from the previous row's end to this size's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeCounters {
    /// The row's message size.
    pub size_bytes: u64,
    /// Each counter, in the order read.
    pub counters: Vec<CounterDelta>,
}

/// What one counter read before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterDelta {
    /// The counter: a path under the port's sysfs directory (`hw_counters/np_cnp_sent`), or
    /// `ethtool/<name>` for a statistic of the netdev.
    pub name: String,
    /// Its value at the previous row's end (the first row: when the run was connected).
    pub before: u64,
    /// Its value when the size ended.
    pub after: u64,
    /// `after - before`; null when the counter went backwards (it was reset during the run).
    pub delta: Option<u64>,
    /// [`WORDS`] for `port_xmit_data` and `port_rcv_data`; absent for plain counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// A counter in 4-byte words: its delta in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// A PFC pause counter (`rx_prio<N>_pause`...): its 802.1Q priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc_priority: Option<u8>,
}

impl CounterDelta {
    /// `name` read `before` and `after`; `words`: it counts 4-byte words.
    pub fn new(name: &str, words: bool, pfc_priority: Option<u8>, before: u64, after: u64) -> Self {
        let delta = after.checked_sub(before);
        CounterDelta {
            name: name.to_string(),
            before,
            after,
            delta,
            unit: words.then(|| WORDS.to_string()),
            bytes: delta.filter(|_| words).map(|d| d.saturating_mul(4)),
            pfc_priority,
        }
    }
}

impl SizeCounters {
    /// The counters of `size`, from what was read before and after it (same order as `names`:
    /// each counter's name, whether it counts words, and its PFC priority).
    pub fn new(
        size_bytes: u64,
        names: &[(String, bool, Option<u8>)],
        before: &[u64],
        after: &[u64],
    ) -> SizeCounters {
        SizeCounters {
            size_bytes,
            counters: names
                .iter()
                .zip(before.iter().zip(after))
                .map(|((n, words, prio), (&b, &a))| CounterDelta::new(n, *words, *prio, b, a))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_convert_words_to_bytes_and_refuse_to_go_backwards() {
        let names = [
            ("counters/port_xmit_data".to_string(), true, None),
            ("hw_counters/np_cnp_sent".to_string(), false, None),
            ("ethtool/rx_prio3_pause".to_string(), false, Some(3)),
            ("hw_counters/out_of_buffer".to_string(), false, None),
        ];
        let s = SizeCounters::new(65536, &names, &[1000, 5, 0, 9], &[1250, 12, 4, 2]);
        let d: Vec<Option<u64>> = s.counters.iter().map(|c| c.delta).collect();
        assert_eq!(d, [Some(250), Some(7), Some(4), None]);
        assert_eq!(s.counters[0].bytes, Some(1000));
        assert_eq!(s.counters[0].unit.as_deref(), Some(WORDS));
        assert_eq!(s.counters[1].bytes, None);
        assert_eq!(s.counters[2].pfc_priority, Some(3));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["counters"][0]["bytes"], 1000);
        assert!(json["counters"][1].get("unit").is_none());
        assert!(json["counters"][3]["delta"].is_null());
        let back: SizeCounters = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
    }
}
