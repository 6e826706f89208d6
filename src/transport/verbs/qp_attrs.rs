//! The attributes that take each queue pair through INIT, RTR and RTS, computed from both sides'
//! descriptions, for each connection type (`-c`).
//!
//! Pure, so that what a perftest peer expects (reference §3.3, perftest's `ctx_modify_qp_to_rtr/rts`)
//! is checked by tests rather than by a failed connection:
//! - **RC**: INIT with the access rights; RTR with the negotiated path MTU, the peer's QPN and PSN,
//!   this side's responder depth (`max_dest_rd_atomic` = local out_reads), `min_rnr_timer` 12 and an
//!   address vector (GRH with hop limit 255 and our source GID index); RTS with our PSN, the `-u`
//!   timeout, `retry_cnt` (7 by default), `rnr_retry` 7 and the initiator depth (`max_rd_atomic` =
//!   the peer's out_reads).
//! - **UC**: the same without anything about acknowledgements: RTR has no responder depth or RNR
//!   timer, RTS only our PSN.
//! - **UD**: INIT with a Q_Key instead of access rights; RTR takes nothing from the peer and RTS only
//!   our PSN; the peer's address goes into an address handle, its QPN and Q_Key into every send.

use super::error::VerbsError;
use crate::params::{ConnType, TransportKind};
use crate::transport::{Access, ConnInfo, Gid, Param, RoceMtu};

/// What this side brings to the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalSide {
    /// Source GID.
    pub gid: Gid,
    /// Its index in the port's table.
    pub gid_index: u32,
    /// Largest MTU this side offers, in bytes.
    pub mtu: u32,
    /// Outstanding READs this side accepts as responder.
    pub out_reads: u32,
    /// Starting PSN of each local QP.
    pub psns: Vec<u32>,
    /// Port number.
    pub port: u8,
    /// Service level (`-S`).
    pub sl: u8,
    /// GRH traffic class (`--tclass`).
    pub traffic_class: u8,
    /// GRH flow labels (`--flow_label`), queue pair `i` takes entry `i % len`; none: 0.
    pub flow_labels: Vec<u32>,
    /// ACK timeout exponent (`-u`).
    pub timeout: u8,
    /// Transport retries (`--retry_count`).
    pub retry_cnt: u8,
    /// `-c`: the queue pairs' connection type.
    pub connection: ConnType,
}

impl LocalSide {
    /// Queue pair `qp`'s flow label: `--flow_label`'s list round-robin, as perftest assigns it.
    pub(crate) fn flow_label(&self, qp: usize) -> u32 {
        match self.flow_labels.len() {
            0 => 0,
            n => self.flow_labels[qp % n],
        }
    }
}

/// Attributes of the RESET → INIT transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Init {
    /// Port number.
    pub port: u8,
    /// P_Key index (perftest: 0).
    pub(crate) pkey_index: u16,
    /// RC and UC: what the peer may do to our memory; UD has none.
    pub access: Option<Access>,
    /// UD: the Q_Key datagrams to this QP must carry.
    pub qkey: Option<u32>,
}

/// The INIT attributes of a QP of `conn` on `port`: access rights for connected QPs, a Q_Key for UD.
pub(crate) fn init(conn: ConnType, port: u8, access: Access, qkey: u32) -> Init {
    let ud = conn == ConnType::Ud;
    Init {
        port,
        pkey_index: 0,
        access: (!ud).then_some(access),
        qkey: ud.then_some(qkey),
    }
}

/// Where the peer is: an RTR address vector (RC, UC) or an address handle (UD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Route {
    /// The peer's GID.
    pub dgid: Gid,
    /// Our source GID index.
    pub(crate) sgid_index: u8,
    /// GRH hop limit (255, as perftest).
    pub hop_limit: u8,
    /// GRH traffic class.
    pub traffic_class: u8,
    /// GRH flow label (20 bits; ConnectX and rxe derive RoCE v2's UDP source port from it).
    pub flow_label: u32,
    /// Service level.
    pub sl: u8,
    /// Port number.
    pub port: u8,
}

/// What an RC responder promises: outstanding READs it takes and the RNR timer it answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Responder {
    /// READs we accept in flight as responder.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code (12 = 0.64 ms, as perftest).
    pub min_rnr_timer: u8,
}

/// Attributes of the INIT → RTR transition of a connected QP (RC, UC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rtr {
    /// `enum ibv_mtu` code of the path MTU.
    pub path_mtu: u32,
    /// The peer QP's number.
    pub(crate) dest_qp_num: u32,
    /// The peer QP's starting PSN.
    pub(crate) rq_psn: u32,
    /// The address vector.
    pub(crate) route: Route,
    /// RC only.
    pub responder: Option<Responder>,
}

/// What an RC requester retries with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retries {
    /// ACK timeout exponent.
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7 = forever, as perftest).
    pub rnr_retry: u8,
    /// READs we keep in flight as requester: the peer's responder depth.
    pub max_rd_atomic: u8,
}

/// Attributes of the RTR → RTS transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rts {
    /// Our starting PSN.
    pub(crate) sq_psn: u32,
    /// RC only.
    pub retries: Option<Retries>,
}

/// UD: where every send goes, since the QP itself is connected to nobody.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Datagram {
    /// The address handle's attributes.
    pub(crate) ah: Route,
    /// The peer QP's number.
    pub(crate) remote_qpn: u32,
    /// The Q_Key the peer's QP accepts.
    pub(crate) remote_qkey: u32,
}

/// One queue pair's transitions once the peer is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpPlan {
    /// RC and UC: the peer's address and PSN in RTR; UD: `None` (RTR takes only the state).
    pub(crate) rtr: Option<Rtr>,
    /// RTS.
    pub(crate) rts: Rts,
    /// UD: the address handle and the send parameters.
    pub datagram: Option<Datagram>,
}

/// The whole connection: the agreed MTU and one plan per QP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Path MTU in bytes.
    pub path_mtu: u32,
    /// Per QP, in index order.
    pub qps: Vec<QpPlan>,
}

/// Checks the peer's description against ours and computes every transition, or names the mismatch.
pub(crate) fn plan(local: &LocalSide, peer: &ConnInfo) -> Result<Plan, VerbsError> {
    if peer.transport != TransportKind::Verbs {
        return Err(VerbsError::Peer(format!(
            "the peer runs {t} {}, this side {t} verbs; give both sides the same {t}",
            peer.transport,
            t = Param::Transport
        )));
    }
    if peer.connection != local.connection {
        return Err(VerbsError::Peer(format!(
            "the peer's queue pairs are {} and this side's {}; give both sides the same -c",
            peer.connection, local.connection
        )));
    }
    if peer.qps.len() != local.psns.len() {
        return Err(VerbsError::Peer(format!(
            "the peer has {} QPs ({q}), this side {}; give both sides the same {q}",
            peer.qps.len(),
            local.psns.len(),
            q = Param::Qps
        )));
    }
    // perftest refuses the same mix: one IPv4-mapped GID and one native IPv6 GID cannot reach each other.
    if local.gid.is_ipv4_mapped() != peer.gid.is_ipv4_mapped() {
        let fam = |g: Gid| {
            if g.is_ipv4_mapped() {
                "IPv4-mapped"
            } else {
                "IPv6"
            }
        };
        return Err(VerbsError::Peer(format!(
            "this side's GID {} is {} but the peer's GID {} is {}; choose GIDs of the same family on both sides ({}, {})",
            local.gid,
            fam(local.gid),
            peer.gid,
            fam(peer.gid),
            Param::GidIndex,
            Param::Ipv6
        )));
    }
    let mtu = local.mtu.min(peer.mtu);
    if mtu < 256 {
        return Err(VerbsError::Peer(format!(
            "the peer offers an MTU of {} bytes; RoCE needs at least 256",
            peer.mtu
        )));
    }
    let path_mtu = RoceMtu::at_most(mtu);
    let code = u32::from(path_mtu.ib_enum());
    let depth = |n: u32| n.clamp(1, 255) as u8;
    let route = Route {
        dgid: peer.gid,
        sgid_index: local.gid_index as u8,
        hop_limit: 0xff,
        traffic_class: local.traffic_class,
        flow_label: 0,
        sl: local.sl,
        port: local.port,
    };
    let reliable = local.connection == ConnType::Rc;
    let qps = peer
        .qps
        .iter()
        .zip(&local.psns)
        .enumerate()
        .map(|(i, (p, &psn))| {
            let route = Route {
                flow_label: local.flow_label(i),
                ..route
            };
            let rtr = Rtr {
                path_mtu: code,
                dest_qp_num: p.qpn & 0x00ff_ffff,
                rq_psn: p.psn & 0x00ff_ffff,
                route,
                responder: reliable.then(|| Responder {
                    max_dest_rd_atomic: depth(local.out_reads),
                    min_rnr_timer: 12,
                }),
            };
            let rts = Rts {
                sq_psn: psn & 0x00ff_ffff,
                retries: reliable.then(|| Retries {
                    timeout: local.timeout,
                    retry_cnt: local.retry_cnt,
                    rnr_retry: 7,
                    max_rd_atomic: depth(p.max_rd_atomic),
                }),
            };
            match local.connection {
                ConnType::Rc | ConnType::Uc => QpPlan {
                    rtr: Some(rtr),
                    rts,
                    datagram: None,
                },
                ConnType::Ud => QpPlan {
                    rtr: None,
                    rts,
                    datagram: Some(Datagram {
                        ah: route,
                        remote_qpn: rtr.dest_qp_num,
                        remote_qkey: peer.qkey.unwrap_or(crate::params::DEFAULT_QKEY),
                    }),
                },
            }
        })
        .collect();
    Ok(Plan {
        path_mtu: path_mtu.bytes(),
        qps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::QpInfo;

    fn mapped(last: u8) -> Gid {
        Gid::from_ip(std::net::Ipv4Addr::new(10, 0, 0, last).into())
    }

    fn local() -> LocalSide {
        LocalSide {
            gid: mapped(1),
            gid_index: 3,
            mtu: 4096,
            out_reads: 16,
            psns: vec![0x12_3456, 0xab_cdef],
            port: 1,
            sl: 0,
            traffic_class: 106,
            flow_labels: Vec::new(),
            timeout: 14,
            retry_cnt: 7,
            connection: ConnType::Rc,
        }
    }

    /// This side and a peer of two queue pairs and path MTU `mtu`, both running `connection`.
    fn both_running(connection: ConnType, mtu: u32) -> (LocalSide, ConnInfo) {
        let l = LocalSide {
            connection,
            ..local()
        };
        let p = ConnInfo {
            connection,
            ..peer(2, mtu)
        };
        (l, p)
    }

    fn peer(n: usize, mtu: u32) -> ConnInfo {
        ConnInfo {
            needs_single_datagrams: false,
            connection: Default::default(),
            qkey: None,
            transport: TransportKind::Verbs,
            gid: mapped(2),
            gid_index: Some(1),
            mac: None,
            addr: None,
            mtu,
            qps: (0..n)
                .map(|i| QpInfo {
                    qpn: 0x11 + i as u32,
                    psn: 0x77_0000 + i as u32,
                    rkey: 0x1000,
                    vaddr: 0x7f00_0000_0000,
                    len: 65536,
                    max_rd_atomic: 128,
                })
                .collect(),
        }
    }

    fn route() -> Route {
        Route {
            dgid: mapped(2),
            sgid_index: 3,
            hop_limit: 0xff,
            traffic_class: 106,
            flow_label: 0,
            sl: 0,
            port: 1,
        }
    }

    #[test]
    fn attributes_follow_perftest() {
        let p = plan(&local(), &peer(2, 1024)).unwrap();
        assert_eq!(p.path_mtu, 1024);
        let q = p.qps[1];
        assert_eq!(
            q.rtr,
            Some(Rtr {
                path_mtu: 3,
                dest_qp_num: 0x12,
                rq_psn: 0x77_0001,
                route: route(),
                responder: Some(Responder {
                    max_dest_rd_atomic: 16,
                    min_rnr_timer: 12,
                }),
            })
        );
        assert_eq!(
            q.rts,
            Rts {
                sq_psn: 0xab_cdef,
                retries: Some(Retries {
                    timeout: 14,
                    retry_cnt: 7,
                    rnr_retry: 7,
                    max_rd_atomic: 128,
                }),
            }
        );
        assert_eq!(q.datagram, None);
        let i = init(ConnType::Rc, 1, Access::REMOTE_WRITE, 0x1111_1111);
        assert_eq!((i.access, i.qkey), (Some(Access::REMOTE_WRITE), None));
    }

    #[test]
    fn uc_connects_without_acknowledgement_attributes() {
        let (l, p2) = both_running(ConnType::Uc, 4096);
        let q = plan(&l, &p2).unwrap().qps[0];
        let rtr = q
            .rtr
            .expect("UC moves to RTR with the peer's address, QPN and PSN");
        assert_eq!(
            (rtr.dest_qp_num, rtr.rq_psn, rtr.path_mtu),
            (0x11, 0x77_0000, 5)
        );
        assert_eq!(rtr.responder, None, "no responder depth, no RNR timer");
        assert_eq!(
            q.rts.retries, None,
            "no timeout, retry counts or initiator depth"
        );
        assert_eq!((q.rts.sq_psn, q.datagram), (0x12_3456, None));
    }

    #[test]
    fn ud_takes_no_remote_attributes_but_an_address_handle_and_q_keys() {
        let (l, mut p2) = both_running(ConnType::Ud, 1024);
        p2.qkey = Some(0x4242);
        let q = plan(&l, &p2).unwrap().qps[1];
        assert_eq!(q.rtr, None, "RTR carries only the state");
        assert_eq!(
            q.rts,
            Rts {
                sq_psn: 0xab_cdef,
                retries: None
            }
        );
        assert_eq!(
            q.datagram,
            Some(Datagram {
                ah: route(),
                remote_qpn: 0x12,
                remote_qkey: 0x4242,
            })
        );
        // A perftest peer says no Q_Key: its QPs all use 0x11111111.
        p2.qkey = None;
        let q = plan(&l, &p2).unwrap().qps[0];
        assert_eq!(q.datagram.unwrap().remote_qkey, 0x1111_1111);
        let i = init(ConnType::Ud, 1, Access::REMOTE_WRITE, 0x1111_1111);
        assert_eq!(
            (i.port, i.pkey_index, i.access, i.qkey),
            (1, 0, None, Some(0x1111_1111))
        );
        // The two sides must agree on the type.
        let e = plan(&l, &peer(2, 1024)).unwrap_err().to_string();
        assert!(
            e.contains("the peer's queue pairs are RC and this side's UD"),
            "{e}"
        );
    }

    #[test]
    fn mismatches_are_named() {
        let e = plan(&local(), &peer(1, 4096)).unwrap_err().to_string();
        assert!(e.contains("the peer has 1 QPs (-q), this side 2"), "{e}");
        let mut v6 = peer(2, 4096);
        v6.gid = "2001:db8::2".parse().unwrap();
        let e = plan(&local(), &v6).unwrap_err().to_string();
        assert!(
            e.contains("::ffff:10.0.0.1 is IPv4-mapped but the peer's GID 2001:db8::2 is IPv6"),
            "{e}"
        );
        let mut soft = peer(2, 4096);
        soft.transport = TransportKind::Soft;
        assert!(
            plan(&local(), &soft)
                .unwrap_err()
                .to_string()
                .contains("--transport soft")
        );
        assert!(
            plan(&local(), &peer(2, 100))
                .unwrap_err()
                .to_string()
                .contains("at least 256")
        );
    }

    #[test]
    fn the_smaller_mtu_wins_and_rounds_down_to_a_verbs_mtu() {
        let mut l = local();
        l.mtu = 2048;
        assert_eq!(plan(&l, &peer(2, 4096)).unwrap().path_mtu, 2048);
        assert_eq!(plan(&local(), &peer(2, 1500)).unwrap().path_mtu, 1024);
    }

    #[test]
    fn sl_traffic_class_and_flow_labels_reach_every_queue_pairs_route() {
        let l = LocalSide {
            sl: 5,
            traffic_class: 104,
            flow_labels: vec![0x111, 0x222],
            ..local()
        };
        let p = plan(&l, &peer(2, 1024)).unwrap();
        let routes: Vec<Route> = p.qps.iter().map(|q| q.rtr.unwrap().route).collect();
        assert_eq!(
            routes
                .iter()
                .map(|r| (r.sl, r.traffic_class, r.flow_label))
                .collect::<Vec<_>>(),
            [(5, 104, 0x111), (5, 104, 0x222)]
        );
        // UD's address handles carry the same route.
        let (mut ud, peer) = both_running(ConnType::Ud, 1024);
        ud.flow_labels = vec![9];
        ud.sl = 2;
        let p = plan(&ud, &peer).unwrap();
        let ah = p.qps[1].datagram.unwrap().ah;
        assert_eq!((ah.sl, ah.flow_label), (2, 9));
        assert_eq!(l.flow_label(5), 0x222);
    }
}
