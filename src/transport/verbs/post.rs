//! The hot path's translations between the transport contract and libibverbs: a
//! [`SendRequest`] as an `ibv_send_wr`, an `ibv_wc` as a [`Completion`], a post's return code as
//! an error. Built on the stack, nothing allocated.

use crate::transport::{
    Completion, CompletionOp, CompletionStatus, Error, Param, SendOp, SendRequest,
};
use rdma_mummy_sys as sys;
use std::io;

/// The work request for `wr` with its one scatter/gather entry `sge`; refuses what the QP cannot
/// do (inline beyond `inline_size`, an inline READ, a one-sided request without a remote address).
#[inline]
pub(super) fn send_wr(
    wr: &SendRequest,
    sge: &mut sys::ibv_sge,
    inline_size: u32,
) -> Result<sys::ibv_send_wr, Error> {
    // SAFETY: ibv_send_wr is plain old data (integers, pointers, unions of them).
    let mut swr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
    swr.wr_id = wr.wr_id;
    swr.sg_list = sge;
    swr.num_sge = 1;
    let mut flags = 0;
    if wr.signaled {
        flags |= sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
    }
    if wr.inline {
        if wr.len > inline_size {
            return Err(Error::InvalidRequest(format!(
                "inline send of {} bytes but the QP was created with {} {inline_size}",
                wr.len,
                Param::Inline
            )));
        }
        flags |= sys::ibv_send_flags::IBV_SEND_INLINE.0;
    }
    swr.send_flags = flags;
    let remote = || {
        wr.remote.ok_or_else(|| {
            Error::InvalidRequest("WRITE and READ need a remote address and rkey".into())
        })
    };
    swr.opcode = match wr.op {
        SendOp::Send => sys::ibv_wr_opcode::IBV_WR_SEND,
        SendOp::SendWithImm(imm) => {
            swr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
            sys::ibv_wr_opcode::IBV_WR_SEND_WITH_IMM
        }
        SendOp::Write => {
            let r = remote()?;
            swr.wr.rdma = sys::rdma_t {
                remote_addr: r.addr,
                rkey: r.rkey,
            };
            sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE
        }
        SendOp::WriteWithImm(imm) => {
            let r = remote()?;
            swr.wr.rdma = sys::rdma_t {
                remote_addr: r.addr,
                rkey: r.rkey,
            };
            swr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
            sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM
        }
        SendOp::Read => {
            if wr.inline {
                return Err(Error::InvalidRequest("a READ cannot be inline".into()));
            }
            let r = remote()?;
            swr.wr.rdma = sys::rdma_t {
                remote_addr: r.addr,
                rkey: r.rkey,
            };
            sys::ibv_wr_opcode::IBV_WR_RDMA_READ
        }
        SendOp::FetchAdd(add) => {
            let r = remote()?;
            swr.wr.atomic = sys::atomic_t {
                remote_addr: r.addr,
                compare_add: add,
                swap: 0,
                rkey: r.rkey,
            };
            sys::ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD
        }
        SendOp::CompareSwap { compare, swap } => {
            let r = remote()?;
            swr.wr.atomic = sys::atomic_t {
                remote_addr: r.addr,
                compare_add: compare,
                swap,
                rkey: r.rkey,
            };
            sys::ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP
        }
    };
    Ok(swr)
}

/// A completion of QP index `qp` with its mapped `status`.
#[inline]
pub(super) fn completion(w: &sys::ibv_wc, qp: u32, status: CompletionStatus) -> Completion {
    let with_imm = w.wc_flags & sys::ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0;
    Completion {
        wr_id: w.wr_id,
        qp,
        status,
        op: match w.opcode {
            sys::ibv_wc_opcode::IBV_WC_RDMA_WRITE => CompletionOp::Write,
            sys::ibv_wc_opcode::IBV_WC_RDMA_READ => CompletionOp::Read,
            sys::ibv_wc_opcode::IBV_WC_RECV => CompletionOp::Recv,
            sys::ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM => CompletionOp::RecvWithImm,
            sys::ibv_wc_opcode::IBV_WC_FETCH_ADD => CompletionOp::FetchAdd,
            sys::ibv_wc_opcode::IBV_WC_COMP_SWAP => CompletionOp::CompareSwap,
            _ => CompletionOp::Send,
        },
        byte_len: w.byte_len,
        // SAFETY: reading a u32 out of a union of u32s.
        imm: with_imm.then(|| u32::from_be(unsafe { w.imm_data_invalidated_rkey_union.imm_data })),
    }
}

/// A failed post as the transport error: ENOMEM is a full queue, anything else an OS error.
pub(super) fn post_error(call: &str, ret: i32) -> Error {
    if ret == libc::ENOMEM {
        Error::QueueFull
    } else {
        Error::Io {
            context: call.to_string(),
            source: io::Error::from_raw_os_error(ret),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::RemoteAddr;

    fn request(op: SendOp, remote: Option<RemoteAddr>) -> SendRequest {
        SendRequest {
            wr_id: 7,
            op,
            offset: 64,
            len: 8,
            remote,
            signaled: true,
            inline: false,
        }
    }

    const TARGET: RemoteAddr = RemoteAddr {
        addr: 0x7f00_0000_1040,
        rkey: 0x55,
    };

    #[test]
    fn atomics_become_atomic_work_requests_with_their_operands() {
        let mut sge = sys::ibv_sge {
            addr: 0x2000,
            length: 8,
            lkey: 1,
        };
        let swr = send_wr(&request(SendOp::FetchAdd(1), Some(TARGET)), &mut sge, 0).unwrap();
        assert_eq!(swr.opcode, sys::ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD);
        assert_eq!(
            (swr.wr_id, swr.num_sge, swr.send_flags),
            (7, 1, sys::ibv_send_flags::IBV_SEND_SIGNALED.0)
        );
        // SAFETY: send_wr filled the atomic member of the union for an atomic opcode.
        let a = unsafe { swr.wr.atomic };
        assert_eq!(
            (a.remote_addr, a.compare_add, a.swap, a.rkey),
            (TARGET.addr, 1, 0, 0x55)
        );
        let cas = SendOp::CompareSwap {
            compare: 0x1111,
            swap: 0x2222,
        };
        let swr = send_wr(&request(cas, Some(TARGET)), &mut sge, 0).unwrap();
        assert_eq!(swr.opcode, sys::ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP);
        // SAFETY: as above.
        let a = unsafe { swr.wr.atomic };
        assert_eq!(
            (a.remote_addr, a.compare_add, a.swap, a.rkey),
            (TARGET.addr, 0x1111, 0x2222, 0x55)
        );
        assert!(matches!(
            send_wr(&request(cas, None), &mut sge, 0),
            Err(Error::InvalidRequest(_))
        ));
    }

    #[test]
    fn atomic_completions_keep_their_operation() {
        for (opcode, op) in [
            (sys::ibv_wc_opcode::IBV_WC_FETCH_ADD, CompletionOp::FetchAdd),
            (
                sys::ibv_wc_opcode::IBV_WC_COMP_SWAP,
                CompletionOp::CompareSwap,
            ),
        ] {
            // SAFETY: ibv_wc is plain old data; all-zero is a valid value.
            let mut wc: sys::ibv_wc = unsafe { std::mem::zeroed() };
            wc.opcode = opcode;
            wc.wr_id = 9;
            wc.byte_len = 8;
            let c = completion(&wc, 2, CompletionStatus::Success);
            assert_eq!(
                (c.op, c.wr_id, c.qp, c.byte_len, c.imm),
                (op, 9, 2, 8, None)
            );
        }
    }
}
