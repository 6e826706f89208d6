//! Per-QP counters: plain fields, read by reports and tests.

/// Declares a struct of `u64` counters with `add`, which sums another's into it field by field, and
/// `by_name`: the fields are listed once, so a counter added to the struct cannot be left out of the
/// sums or of what is built from `by_name`.
macro_rules! counters {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident: u64, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* $fvis $field: u64, )*
        }

        impl $name {
            /// Adds another queue pair's counts.
            pub fn add(&mut self, other: &$name) {
                $( self.$field += other.$field; )*
            }

            /// Each count with its field's name, in declaration order.
            pub fn by_name(&self) -> [(&'static str, u64); [$(stringify!($field)),*].len()] {
                [$( (stringify!($field), self.$field) ),*]
            }
        }
    };
}
pub(crate) use counters;

counters! {
    /// NAKs by kind (also the soft endpoint's report, summed over its queue pairs).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
    pub struct NakCounts {
        /// PSN sequence error (0x60).
        #[serde(rename = "psn_sequence")]
        pub psn_seq: u64,
        /// RNR NAK (0x20 | timer).
        pub rnr: u64,
        /// Invalid request (0x61).
        pub invalid_request: u64,
        /// Remote access error (0x62).
        pub remote_access: u64,
        /// Remote operational error (0x63) and unknown NAK codes.
        pub remote_operational: u64,
    }
}

/// Packets dropped on receive, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropCounts {
    /// BTH.DestQP is not this QP.
    pub unknown_qpn: u64,
    /// Truncated or inconsistent headers, bad TVer or P_Key, a non-RC or unknown opcode.
    pub malformed: u64,
    /// Dropped for a protocol reason.
    pub protocol: ProtocolDrops,
}

counters! {
    /// Packets dropped for a protocol reason, by reason (also the soft endpoint's report, summed over its
    /// queue pairs).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct ProtocolDrops {
        /// A request beyond the expected PSN after the one PSN-sequence NAK was sent.
        pub out_of_sequence: u64,
        /// A duplicate request with nothing to replay, or one that does not match its saved READ.
        pub duplicate_unmatched: u64,
        /// A response or ACK for PSNs this QP is not waiting for (stale, duplicated or out of order).
        pub stale_response: u64,
        /// A response whose opcode, length or AETH does not fit the request it answers.
        pub(crate) bad_response: u64,
        /// The response queue was full; the request is left for the peer to retransmit.
        pub(crate) response_queue_full: u64,
        /// The QP is in the error state.
        pub(crate) qp_error: u64,
    }
}

impl ProtocolDrops {
    /// All reasons together.
    pub fn total(&self) -> u64 {
        self.by_name().iter().map(|&(_, n)| n).sum()
    }
}

/// Everything one queue pair counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets handed out by `poll_transmit`.
    pub tx_packets: u64,
    /// Payload bytes in them.
    pub(crate) tx_payload_bytes: u64,
    /// Packets given to `handle_packet`.
    pub rx_packets: u64,
    /// Request packets sent again (go-back-N or selective repeat).
    pub retransmitted_packets: u64,
    /// Payload bytes sent again: request data resent and READ responses replayed.
    pub(crate) retransmitted_bytes: u64,
    /// Go-back-N restarts, for any reason.
    pub retries: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Duplicate requests received (re-ACKed or replayed).
    pub duplicate_requests: u64,
    /// ACK packets sent (including atomic ACKs).
    pub acks_sent: u64,
    /// ACK packets received (including atomic ACKs).
    pub(crate) acks_received: u64,
    /// NAKs this QP sent, by kind.
    pub naks_sent: NakCounts,
    /// NAKs this QP received, by kind.
    pub naks_received: NakCounts,
    /// Remote WRITE/READ/atomic refused for a bad rkey, bounds or rights (each also a NAK 0x62).
    pub remote_access_violations: u64,
    /// Receive drops by reason.
    pub drops: DropCounts,
}
