//! The NIC's counters under a row, in perftest's `-W` layout: a tab, `name=delta`, one a line, then
//! an empty line. Where perftest prints raw words, the bytes follow; unchanged PFC counters are said
//! in one line rather than 24.

use crate::results::SizeCounters;
use std::fmt::Write;

/// Unchanged PFC counters are folded into one line from this many on (one priority's three).
const FOLD_FROM: usize = 3;

/// The lines of one size's counters; `netdev`: the interface the `ethtool/` ones belong to.
pub(crate) fn nic_counters(c: &SizeCounters, netdev: Option<&str>) -> String {
    let quiet_pfc =
        |d: &&crate::results::CounterDelta| d.pfc_priority.is_some() && d.delta == Some(0);
    let folded = c.counters.iter().filter(quiet_pfc).count();
    let fold = folded >= FOLD_FROM;
    let mut out = String::new();
    for d in &c.counters {
        if fold && quiet_pfc(&d) {
            continue;
        }
        let _ = match (d.delta, d.bytes) {
            (Some(n), Some(bytes)) => {
                writeln!(out, "\t{}={n} (4-byte words: {bytes} bytes)", d.name)
            }
            (Some(n), None) => writeln!(out, "\t{}={n}", d.name),
            (None, _) => writeln!(
                out,
                "\t{}=reset during the run ({} then {})",
                d.name, d.before, d.after
            ),
        };
    }
    if fold {
        let _ = writeln!(
            out,
            "\tPFC pause: no change in {folded} counters of {} (rx/tx_prio<N>_pause, _duration)",
            netdev.unwrap_or("the netdev")
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_follow_perftest_with_bytes_and_quiet_pfc_folded() {
        let mut names = vec![
            ("counters/port_xmit_data".to_string(), true, None),
            ("hw_counters/np_cnp_sent".to_string(), false, None),
            ("hw_counters/out_of_buffer".to_string(), false, None),
        ];
        let (mut before, mut after) = (vec![1000, 5, 9], vec![1250, 12, 2]);
        for p in 0..8u8 {
            for dir in ["rx", "tx"] {
                names.push((format!("ethtool/{dir}_prio{p}_pause"), false, Some(p)));
                before.push(10);
                after.push(if p == 3 && dir == "rx" { 14 } else { 10 });
            }
        }
        let c = SizeCounters::new(65536, &names, &before, &after);
        assert_eq!(
            nic_counters(&c, Some("ens1f0np0")),
            "\tcounters/port_xmit_data=250 (4-byte words: 1000 bytes)\n\
             \thw_counters/np_cnp_sent=7\n\
             \thw_counters/out_of_buffer=reset during the run (9 then 2)\n\
             \tethtool/rx_prio3_pause=4\n\
             \tPFC pause: no change in 15 counters of ens1f0np0 (rx/tx_prio<N>_pause, _duration)\n\n"
        );
        // Two unchanged PFC counters named by -W are printed as they are.
        let few = SizeCounters::new(8, &names[3..5], &before[3..5], &after[3..5]);
        assert_eq!(
            nic_counters(&few, None),
            "\tethtool/rx_prio0_pause=0\n\tethtool/tx_prio0_pause=0\n\n"
        );
    }
}
