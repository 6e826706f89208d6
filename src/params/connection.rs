//! Connection types (`-c RC|UC|UD`, perftest's `--connection`): what a queue pair promises.

use super::{ParseError, TestKind, Verb, parse_word};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The Q_Key of every UD queue pair: perftest's `DEF_QKEY` (0x11111111), which perftest never
/// exchanges, so a roceperf side must use it too to pair with `ib_send_bw -c UD`.
pub const DEFAULT_QKEY: u32 = 0x1111_1111;

/// Bytes of GRH (or, on RoCE v2 over IPv4, 20 zero bytes and the IPv4 header) that verbs puts in
/// front of every UD message in the receive buffer: a UD receive needs this much more room.
pub(crate) const UD_GRH_LEN: u64 = 40;

/// IB transport service of the queue pairs: reliable or unreliable, connected or datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ConnType {
    /// Reliable Connection: acknowledged, retransmitted, every verb.
    #[default]
    #[serde(rename = "RC")]
    Rc,
    /// Unreliable Connection: SEND and WRITE, no ACK, no retransmission; a lost packet loses its message.
    #[serde(rename = "UC")]
    Uc,
    /// Unreliable Datagram: SEND of at most one MTU, addressed per message (address handle, Q_Key).
    #[serde(rename = "UD")]
    Ud,
}

impl ConnType {
    /// The three, in perftest's order.
    pub const ALL: [ConnType; 3] = [ConnType::Rc, ConnType::Uc, ConnType::Ud];

    /// `RC`, `UC` or `UD`, as perftest spells them.
    pub fn name(&self) -> &'static str {
        match self {
            ConnType::Rc => "RC",
            ConnType::Uc => "UC",
            ConnType::Ud => "UD",
        }
    }

    /// True for UC and UD: nothing is acknowledged or resent, so loss shows as missing messages.
    pub(crate) fn is_unreliable(&self) -> bool {
        *self != ConnType::Rc
    }

    /// Why `test` cannot run over this connection type, if it cannot (perftest refuses the same).
    pub fn refuses(&self, test: TestKind) -> Option<&'static str> {
        // Written as "anything but" so that a verb added later (atomics) is refused until it says otherwise.
        match (self, test.verb) {
            (ConnType::Rc, _) => None,
            (ConnType::Uc, Verb::Send | Verb::Write) | (ConnType::Ud, Verb::Send) => None,
            (ConnType::Uc, _) => Some(
                "UC carries only SEND and RDMA WRITE: READ and atomics need a response, which only RC carries; use -c RC",
            ),
            (ConnType::Ud, _) => Some(
                "UD carries only SENDs (a datagram has no remote address or rkey); use roce_send_bw or roce_send_lat, or -c UC/RC",
            ),
        }
    }

    /// Bytes of receive-buffer room in front of each received message (the GRH of UD).
    pub(crate) fn recv_headroom(&self) -> u64 {
        match self {
            ConnType::Ud => UD_GRH_LEN,
            ConnType::Rc | ConnType::Uc => 0,
        }
    }

    /// Queue pair `i` of `qps` whose `-c` is `self`: the last `rc_tail` are RC whatever `-c`
    /// says (perftest's `-R` message queue pair beside UD test queue pairs).
    pub(crate) fn of_qp(self, i: usize, qps: usize, rc_tail: usize) -> ConnType {
        if i + rc_tail >= qps {
            ConnType::Rc
        } else {
            self
        }
    }

    /// The rdma_cm port spaces `qps` queue pairs of this `-c` with `rc_tail` RC ones use:
    /// (UDP for UD, TCP for the rest).
    pub(crate) fn port_spaces(self, qps: usize, rc_tail: usize) -> (bool, bool) {
        let kinds = (0..qps).map(|i| self.of_qp(i, qps, rc_tail));
        let ud = kinds.clone().any(|c| c == ConnType::Ud);
        (ud, kinds.clone().any(|c| c != ConnType::Ud))
    }
}

impl fmt::Display for ConnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ConnType {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let up = s.to_ascii_uppercase();
        parse_word(
            &up,
            &ConnType::ALL,
            ConnType::name,
            "connection type",
            "RC, UC or UD",
        )
        .map_err(|e| ParseError {
            given: s.to_string(),
            ..e
        })
    }
}

/// `-c RC|UC|UD`, with the one-line help each value shows in `--help`.
impl clap::ValueEnum for ConnType {
    fn value_variants<'a>() -> &'a [Self] {
        &ConnType::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let help = match self {
            ConnType::Rc => "Reliable Connection: every test",
            ConnType::Uc => {
                "Unreliable Connection: send and write tests; loss is counted, not repaired"
            }
            ConnType::Ud => "Unreliable Datagram: send tests, -s at most one MTU; loss is counted",
        };
        let lower = match self {
            ConnType::Rc => "rc",
            ConnType::Uc => "uc",
            ConnType::Ud => "ud",
        };
        Some(
            clap::builder::PossibleValue::new(self.name())
                .alias(lower)
                .help(help),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Metric;

    #[test]
    fn the_rc_tail_is_rc_and_says_which_port_spaces_are_used() {
        let kinds: Vec<ConnType> = (0..3).map(|i| ConnType::Ud.of_qp(i, 3, 1)).collect();
        assert_eq!(kinds, [ConnType::Ud, ConnType::Ud, ConnType::Rc]);
        assert_eq!(ConnType::Ud.port_spaces(3, 1), (true, true));
        assert_eq!(ConnType::Ud.port_spaces(2, 0), (true, false));
        assert_eq!(ConnType::Rc.port_spaces(2, 1), (false, true));
        assert_eq!(ConnType::Uc.port_spaces(1, 0), (false, true));
    }

    #[test]
    fn names_parse_in_either_case_and_serialize_as_perftest_spells_them() {
        assert_eq!("UD".parse(), Ok(ConnType::Ud));
        assert_eq!("uc".parse(), Ok(ConnType::Uc));
        let e = "XRC".parse::<ConnType>().unwrap_err().to_string();
        assert_eq!(e, "\"XRC\" is not a connection type; use RC, UC or UD");
        assert_eq!(serde_json::to_string(&ConnType::Ud).unwrap(), "\"UD\"");
        assert_eq!(ConnType::default(), ConnType::Rc);
    }

    #[test]
    fn unreliable_types_refuse_what_they_cannot_carry() {
        let t = |v, m| TestKind::new(v, m);
        for m in [Metric::Bandwidth, Metric::Latency] {
            assert!(ConnType::Rc.refuses(t(Verb::Read, m)).is_none());
            assert!(ConnType::Uc.refuses(t(Verb::Write, m)).is_none());
            assert!(ConnType::Uc.refuses(t(Verb::Send, m)).is_none());
            assert!(ConnType::Uc.refuses(t(Verb::Read, m)).is_some());
            assert!(ConnType::Ud.refuses(t(Verb::Send, m)).is_none());
            assert!(ConnType::Ud.refuses(t(Verb::Write, m)).is_some());
            assert!(ConnType::Ud.refuses(t(Verb::Read, m)).is_some());
        }
        assert_eq!(ConnType::Ud.recv_headroom(), 40);
        assert_eq!(ConnType::Uc.recv_headroom(), 0);
    }
}
