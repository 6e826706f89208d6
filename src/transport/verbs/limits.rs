//! What the device allows, applied to the configuration before anything is created: `-m` capped
//! at the port's active MTU and `-o` at the device's READ depth (each with a note), `-t`/`-r`
//! refused beyond its queue depth. Pure, so it is tested without an RDMA device.

use super::error::VerbsError;
use super::{DeviceInfo, PortInfo, VerbsConfig};
use crate::transport::{Access, Param};

/// The MTU and READ depth this side offers, and what was adjusted to get them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limits {
    /// MTU offered to the peer, in bytes.
    pub mtu: u32,
    /// Outstanding READs accepted as responder.
    pub out_reads: u32,
    /// Adjustments, in words, for the header.
    pub notes: Vec<String>,
}

/// Fits `cfg` to device `dev` and its port `port`.
pub(crate) fn fit(
    cfg: &VerbsConfig,
    dev: &DeviceInfo,
    port: &PortInfo,
) -> Result<Limits, VerbsError> {
    let name = &dev.name;
    if cfg.access.contains(Access::REMOTE_ATOMIC) && !dev.atomics {
        return Err(VerbsError::Config(format!(
            "{name} does not execute atomics (its atomic_cap is IBV_ATOMIC_NONE); the atomic tests need a device that does (rxe and ConnectX do), or --transport soft"
        )));
    }
    let mut notes = Vec::new();
    let mtu = match cfg.mtu {
        Some(m) if m > port.active_mtu => {
            notes.push(format!(
                "{} {m} is above the active MTU of {name} port {} ({}); using {}",
                Param::Mtu,
                port.port,
                port.active_mtu,
                port.active_mtu
            ));
            port.active_mtu
        }
        Some(m) => m,
        None => port.active_mtu,
    };
    let max_rd = dev.max_qp_rd_atom.clamp(1, 255);
    let out_reads = match cfg.out_reads {
        Some(o) if o > max_rd => {
            notes.push(format!(
                "{} {o} is above what {name} allows ({max_rd}); using {max_rd}",
                Param::OutReads
            ));
            max_rd
        }
        Some(o) => o.max(1),
        None => max_rd,
    };
    if dev.max_qp_wr > 0 && (cfg.tx_depth > dev.max_qp_wr || cfg.rx_depth > dev.max_qp_wr) {
        return Err(VerbsError::Config(format!(
            "{} {} / {} {}: {name} allows at most {} work requests per queue",
            Param::TxDepth,
            cfg.tx_depth,
            Param::RxDepth,
            cfg.rx_depth,
            dev.max_qp_wr
        )));
    }
    Ok(Limits {
        mtu,
        out_reads,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rxe() -> (DeviceInfo, PortInfo) {
        let port = PortInfo {
            port: 1,
            state: "ACTIVE".into(),
            active: true,
            ethernet: true,
            link_layer: "Ethernet".into(),
            active_mtu: 1024,
            max_mtu: 4096,
            gids: Vec::new(),
        };
        let dev = DeviceInfo {
            name: "rxe0".into(),
            vendor_id: 0,
            vendor_part_id: 0,
            firmware: String::new(),
            max_qp_wr: 1024,
            max_qp_rd_atom: 128,
            atomics: true,
            ports: vec![port.clone()],
        };
        (dev, port)
    }

    #[test]
    fn mtu_and_reads_are_capped_with_notes() {
        let (dev, port) = rxe();
        let cfg = VerbsConfig {
            mtu: Some(4096),
            out_reads: Some(500),
            ..VerbsConfig::default()
        };
        let l = fit(&cfg, &dev, &port).unwrap();
        assert_eq!((l.mtu, l.out_reads), (1024, 128));
        assert_eq!(
            l.notes,
            [
                "-m 4096 is above the active MTU of rxe0 port 1 (1024); using 1024",
                "-o 500 is above what rxe0 allows (128); using 128"
            ]
        );
        let l = fit(&VerbsConfig::default(), &dev, &port).unwrap();
        assert_eq!((l.mtu, l.out_reads, l.notes.len()), (1024, 128, 0));
    }

    #[test]
    fn atomics_need_a_device_that_executes_them() {
        let (mut dev, port) = rxe();
        let cfg = VerbsConfig {
            access: Access::LOCAL_WRITE | Access::REMOTE_ATOMIC,
            ..VerbsConfig::default()
        };
        assert!(fit(&cfg, &dev, &port).is_ok());
        dev.atomics = false;
        let e = fit(&cfg, &dev, &port).unwrap_err().to_string();
        assert!(e.contains("rxe0 does not execute atomics"), "{e}");
        assert!(fit(&VerbsConfig::default(), &dev, &port).is_ok());
    }

    #[test]
    fn queues_deeper_than_the_device_are_refused() {
        let (dev, port) = rxe();
        let cfg = VerbsConfig {
            tx_depth: 4096,
            ..VerbsConfig::default()
        };
        assert_eq!(
            fit(&cfg, &dev, &port).unwrap_err().to_string(),
            VerbsError::Config(
                "-t 4096 / -r 512: rxe0 allows at most 1024 work requests per queue".into()
            )
            .to_string()
        );
    }
}
