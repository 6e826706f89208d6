//! Verbs: the NIC's counters around each size (`-W`, or the default congestion set), resolved once
//! at set-up, read when the run is connected and when each size ends, and kept in the run's
//! description.
//!
//! Rows are contiguous, as perftest's (which reads at set-up and at each row): each counts from the
//! previous row's end, the first from the connection. A read when a size starts would race the
//! peer: after the barrier a passive side may read its start after the first packets arrived (over
//! rxe, a 5-message size then read no packets at all).

use super::Error;
use super::notes::Warning;
use super::plan::Plan;
use crate::results::{NicCounters, SizeCounters};
use crate::transport::verbs::counters::PortCounters;
use crate::transport::verbs::sysfs::Sysfs;
use std::sync::Arc;
use std::time::Instant;

/// The counters `-W` asks for on `device` port `port`; a name the port lacks is an error now, before
/// the peer is contacted. With -v, says what is read and why PFC counters are not.
pub(crate) fn open(
    plan: &Plan,
    device: &str,
    port: u8,
) -> Result<Option<Arc<PortCounters>>, Error> {
    let Some(req) = &plan.report_counters else {
        return Ok(None);
    };
    let pc = PortCounters::open(Sysfs::default().root(), device, port, req)?;
    if let Some(pc) = &pc {
        plan.output.verbose(|| {
            let names: Vec<&str> = pc.counters.iter().map(|c| c.name.as_str()).collect();
            format!("NIC counters read around each size: {}", names.join(", "))
        });
        if let Some(note) = &pc.pfc_note {
            plan.output.verbose(|| note.clone());
        }
    } else {
        plan.output
            .verbose(|| format!("{device} port {port} exposes none of the NIC counters asked for"));
    }
    Ok(pc.map(Arc::new))
}

/// One run's readings: the last value of every counter, and the sizes settled.
pub(crate) struct Window {
    counters: Option<Arc<PortCounters>>,
    /// Each counter's name, unit and PFC priority, as the results keep them.
    names: Vec<(String, bool, Option<u8>)>,
    /// When the last row ended (or the run was connected).
    before: Option<Vec<u64>>,
    /// When it ended, once it has.
    after: Option<Vec<u64>>,
    /// When the last read was.
    read_at: Option<Instant>,
}

impl Window {
    /// The plan's counters, nothing read yet.
    pub(crate) fn new(plan: &Plan) -> Window {
        let counters = plan.nic.clone();
        let names = counters.as_ref().map_or_else(Vec::new, |pc| {
            pc.counters
                .iter()
                .map(|c| (c.name.clone(), c.words, c.pfc_priority))
                .collect()
        });
        Window {
            counters,
            names,
            before: None,
            after: None,
            read_at: None,
        }
    }

    /// What the run's description says before any size ran (where they are read), if anything is.
    pub(crate) fn describe(&self) -> Option<NicCounters> {
        self.counters.as_ref().map(|pc| NicCounters {
            device: pc.device.clone(),
            port: pc.port,
            netdev: pc.netdev.clone(),
            sizes: Vec::new(),
        })
    }

    /// The run is connected: the first row counts from here.
    pub(crate) fn start(&mut self) {
        self.before = self.read();
        self.after = None;
    }

    /// A size ran. A size shorter than the kernel's cache of `hw_counters/` waits it out, so that
    /// its end is not read as the last row's.
    pub(crate) fn end(&mut self) {
        if let (Some(pc), Some(at)) = (&self.counters, self.read_at) {
            std::thread::sleep(pc.refresh_after().saturating_sub(at.elapsed()));
        }
        self.after = self.read();
    }

    /// A row is settled: its counters from the last row's end to its own (now, when it had no run
    /// here); the next row counts from there.
    pub(crate) fn settle(&mut self, size: u64) -> Option<SizeCounters> {
        let after = self.after.take().or_else(|| self.read())?;
        let before = self.before.replace(after.clone())?;
        Some(SizeCounters::new(size, &self.names, &before, &after))
    }

    /// Every counter now; a failure is said once and ends the reading.
    fn read(&mut self) -> Option<Vec<u64>> {
        let pc = self.counters.as_ref()?;
        self.read_at = Some(Instant::now());
        match pc.read() {
            Ok(v) => Some(v),
            Err(e) => {
                Warning::NicCountersLost(e.to_string()).emit();
                self.counters = None;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::tests::parse_raw;
    use crate::params::TestKind;
    use crate::params::parse_request;
    use std::path::Path;

    fn put(root: &Path, name: &str, value: u64) {
        let p = root.join("class/infiniband/mlx5_0/ports/1").join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{value}\n")).unwrap();
    }

    /// A fake port whose counters move between the reads, as the session makes them.
    #[test]
    fn rows_count_from_the_last_rows_end_and_the_first_from_the_connection() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(r, "counters/port_xmit_data", 100);
        put(r, "hw_counters/np_cnp_sent", 1);
        let args = [
            "--transport",
            "verbs",
            "-d",
            "mlx5_0",
            "-W",
            "default,counters/port_xmit_data",
        ];
        let mut plan = Plan::new(parse_raw(TestKind::WRITE_BW, &args).unwrap());
        let req = plan.report_counters.clone().unwrap();
        assert_eq!(
            req,
            parse_request("default,counters/port_xmit_data").unwrap()
        );
        plan.nic = PortCounters::open(r, "mlx5_0", 1, &req)
            .unwrap()
            .map(Arc::new);
        let mut w = Window::new(&plan);
        let described = w.describe().unwrap();
        assert_eq!((described.device.as_str(), described.port), ("mlx5_0", 1));
        assert!(described.sizes.is_empty());
        w.start(); // connected: the first row counts from here, packets before its barrier too
        put(r, "hw_counters/np_cnp_sent", 3);
        put(r, "counters/port_xmit_data", 1124);
        put(r, "hw_counters/np_cnp_sent", 10);
        w.end();
        put(r, "hw_counters/np_cnp_sent", 50); // after the run: the next size's
        let first = w.settle(65536).unwrap();
        assert_eq!(first.size_bytes, 65536);
        let deltas: Vec<_> = first
            .counters
            .iter()
            .map(|c| (c.name.as_str(), c.delta))
            .collect();
        assert_eq!(
            deltas,
            [
                ("counters/port_xmit_data", Some(1024)),
                ("hw_counters/np_cnp_sent", Some(9))
            ]
        );
        assert_eq!(first.counters[0].bytes, Some(4096));
        // A row with no run on this side (perftest's passive server): from the last row's end to now.
        let second = w.settle(131072).unwrap();
        assert_eq!(second.counters[1].delta, Some(40));
        assert_eq!(second.counters[0].delta, Some(0));
        // Rows are contiguous: what the two rows counted is all that moved since the connection.
        assert_eq!(first.counters[1].delta.unwrap() + 40, 50 - 1);
        // A counter that vanishes: said once, and the run goes on without counters.
        std::fs::remove_file(r.join("class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent"))
            .unwrap();
        w.end();
        assert!(w.settle(8).is_none());
        assert!(w.settle(8).is_none());
    }
}
