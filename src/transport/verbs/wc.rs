//! Work-completion statuses: libibverbs' numbers to our [`CompletionStatus`], names and hints.
//!
//! The numbers are the `enum ibv_wc_status` ABI of `<infiniband/verbs.h>`, stable since OFED 1.x;
//! they are spelled out here so the mapping is testable without the `verbs` feature.

use crate::transport::CompletionStatus;

/// `(value, libibverbs name)` for every status of `enum ibv_wc_status`.
const NAMES: [(u32, &str); 24] = [
    (0, "IBV_WC_SUCCESS"),
    (1, "IBV_WC_LOC_LEN_ERR"),
    (2, "IBV_WC_LOC_QP_OP_ERR"),
    (3, "IBV_WC_LOC_EEC_OP_ERR"),
    (4, "IBV_WC_LOC_PROT_ERR"),
    (5, "IBV_WC_WR_FLUSH_ERR"),
    (6, "IBV_WC_MW_BIND_ERR"),
    (7, "IBV_WC_BAD_RESP_ERR"),
    (8, "IBV_WC_LOC_ACCESS_ERR"),
    (9, "IBV_WC_REM_INV_REQ_ERR"),
    (10, "IBV_WC_REM_ACCESS_ERR"),
    (11, "IBV_WC_REM_OP_ERR"),
    (12, "IBV_WC_RETRY_EXC_ERR"),
    (13, "IBV_WC_RNR_RETRY_EXC_ERR"),
    (14, "IBV_WC_LOC_RDD_VIOL_ERR"),
    (15, "IBV_WC_REM_INV_RD_REQ_ERR"),
    (16, "IBV_WC_REM_ABORT_ERR"),
    (17, "IBV_WC_INV_EECN_ERR"),
    (18, "IBV_WC_INV_EEC_STATE_ERR"),
    (19, "IBV_WC_FATAL_ERR"),
    (20, "IBV_WC_RESP_TIMEOUT_ERR"),
    (21, "IBV_WC_GENERAL_ERR"),
    (22, "IBV_WC_TM_ERR"),
    (23, "IBV_WC_TM_RNDV_INCOMPLETE"),
];

/// The libibverbs name of a status (`IBV_WC_RETRY_EXC_ERR`), or `IBV_WC_<n>` for an unknown one.
pub(crate) fn status_name(status: u32) -> String {
    NAMES
        .iter()
        .find(|(v, _)| *v == status)
        .map(|(_, n)| n.to_string())
        .unwrap_or_else(|| format!("IBV_WC_{status}"))
}

/// Maps a libibverbs status to the contract's status (statuses with no equivalent become `FatalError`).
pub(crate) fn map_status(status: u32) -> CompletionStatus {
    match status {
        0 => CompletionStatus::Success,
        1 => CompletionStatus::LocalLengthError,
        4 | 8 => CompletionStatus::LocalProtectionError,
        5 => CompletionStatus::WrFlushError,
        9 | 15 => CompletionStatus::RemoteInvalidRequestError,
        10 => CompletionStatus::RemoteAccessError,
        11 | 16 => CompletionStatus::RemoteOperationalError,
        12 => CompletionStatus::RetryExceeded,
        13 => CompletionStatus::RnrRetryExceeded,
        _ => CompletionStatus::FatalError,
    }
}

/// A one-line report of a failed completion: the verbs name, the vendor syndrome and what to check.
pub(crate) fn describe(status: u32, vendor_err: u32, qp: u32, wr_id: u64) -> String {
    let hint = match map_status(status) {
        CompletionStatus::FatalError => match status {
            2 => {
                "local QP operation error: the work request was malformed (e.g. inline data larger than -I allows)"
            }
            7 => {
                "bad response from the peer: check that both sides run the same roceperf version and test"
            }
            20 => "response timeout: the peer stopped answering",
            _ => "the device reported a fatal error; see dmesg",
        },
        s => s.describe(),
    };
    format!(
        "work completion on QP {qp} (wr_id {wr_id}) failed with {} (vendor syndrome 0x{vendor_err:x}): {hint}",
        status_name(status)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_verbs_h() {
        assert_eq!(status_name(12), "IBV_WC_RETRY_EXC_ERR");
        assert_eq!(status_name(10), "IBV_WC_REM_ACCESS_ERR");
        assert_eq!(status_name(99), "IBV_WC_99");
        for (i, (v, _)) in NAMES.iter().enumerate() {
            assert_eq!(*v as usize, i, "table must stay dense and ordered");
        }
    }

    #[test]
    fn retry_exceeded_points_at_gids_roce_pfc_mtu() {
        assert_eq!(map_status(12), CompletionStatus::RetryExceeded);
        let d = describe(12, 0x81, 3, 77);
        assert!(d.contains("IBV_WC_RETRY_EXC_ERR"), "{d}");
        assert!(
            d.contains("QP 3") && d.contains("wr_id 77") && d.contains("0x81"),
            "{d}"
        );
        for w in ["GIDs", "RoCE version", "PFC", "MTU"] {
            assert!(d.contains(w), "missing {w}: {d}");
        }
    }

    #[test]
    fn remote_access_points_at_rkey_and_length() {
        assert_eq!(map_status(10), CompletionStatus::RemoteAccessError);
        let d = describe(10, 0, 0, 1);
        assert!(d.contains("rkey") && d.contains("size"), "{d}");
    }

    #[test]
    fn unmapped_statuses_are_fatal_with_their_own_hint() {
        assert_eq!(map_status(2), CompletionStatus::FatalError);
        assert!(describe(2, 0, 0, 0).contains("inline"));
    }
}
