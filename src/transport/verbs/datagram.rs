//! What a UD queue pair needs that sideway does not wrap: INIT with a Q_Key, and the address handle
//! every send names. Raw libibverbs calls, each checked.

use super::error::VerbsError;
use super::qp_attrs::{Init, Route};
use rdma_mummy_sys as sys;
use std::io;
use std::ptr::NonNull;

/// An `ibv_ah`, destroyed when dropped (before the protection domain it lives in: it is held by its
/// queue pair, which the endpoint drops first).
pub(super) struct AddressHandle(NonNull<sys::ibv_ah>);

impl AddressHandle {
    /// The handle for `route` in the protection domain `pd`.
    pub(super) fn create(
        pd: NonNull<sys::ibv_pd>,
        route: &Route,
        device: &str,
    ) -> Result<AddressHandle, VerbsError> {
        // SAFETY: ibv_ah_attr is plain old data; all-zero is a valid start.
        let mut attr: sys::ibv_ah_attr = unsafe { std::mem::zeroed() };
        attr.grh.dgid.raw = route.dgid.0;
        attr.grh.sgid_index = route.sgid_index;
        attr.grh.hop_limit = route.hop_limit;
        attr.grh.traffic_class = route.traffic_class;
        attr.grh.flow_label = route.flow_label;
        attr.is_global = 1;
        attr.dlid = 0;
        attr.sl = route.sl;
        attr.port_num = route.port;
        // SAFETY: `pd` is a live protection domain; `attr` outlives the call, which copies it.
        let ah = unsafe { sys::ibv_create_ah(pd.as_ptr(), &mut attr) };
        NonNull::new(ah)
            .map(AddressHandle)
            .ok_or_else(|| VerbsError::call("ibv_create_ah", device, &io::Error::last_os_error()))
    }

    /// The raw handle, for a send work request.
    pub(super) fn as_ptr(&self) -> *mut sys::ibv_ah {
        self.0.as_ptr()
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_ah and destroyed only here; no send that names it is still
        // posted once its queue pair is being dropped.
        unsafe {
            sys::ibv_destroy_ah(self.0.as_ptr());
        }
    }
}

/// RESET → INIT of a UD queue pair: port, P_Key index and Q_Key (sideway sets no Q_Key).
pub(super) fn init(qp: *mut sys::ibv_qp, init: &Init, device: &str) -> Result<(), VerbsError> {
    // SAFETY: ibv_qp_attr is plain old data; all-zero is a valid start.
    let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
    attr.qp_state = sys::ibv_qp_state::IBV_QPS_INIT;
    attr.pkey_index = init.pkey_index;
    attr.port_num = init.port;
    attr.qkey = init.qkey.unwrap_or(crate::params::DEFAULT_QKEY);
    let mask = sys::ibv_qp_attr_mask::IBV_QP_STATE.0
        | sys::ibv_qp_attr_mask::IBV_QP_PKEY_INDEX.0
        | sys::ibv_qp_attr_mask::IBV_QP_PORT.0
        | sys::ibv_qp_attr_mask::IBV_QP_QKEY.0;
    // SAFETY: `qp` is a live queue pair; `attr` outlives the call.
    let ret = unsafe { sys::ibv_modify_qp(qp, &mut attr, mask as i32) };
    if ret != 0 {
        return Err(VerbsError::call(
            "ibv_modify_qp(INIT, Q_Key)",
            device,
            &io::Error::from_raw_os_error(ret),
        ));
    }
    Ok(())
}
