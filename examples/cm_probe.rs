//! throwaway probe (not committed): CM connect to a kernel rdma_cm listener.
use roceperf::params::RoceVersion;
use roceperf::transport::cm::{CmEndpoint, CmQpParams};
use roceperf::transport::soft::endpoint::{SoftConfig, SoftEndpoint};
use std::time::{Duration, Instant};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let mut c = SoftConfig::new(&a[1], RoceVersion::V2);
    c.bind = Some(a[2].parse().unwrap());
    c.buffer_len = 1 << 16;
    let mut ep = SoftEndpoint::open(c).unwrap();
    let p = CmQpParams {
        responder_resources: 0,
        initiator_depth: 0,
        retry_count: 7,
        rnr_retry_count: 7,
        ack_timeout: 14,
    };
    ep.cm_connect(0, a[3].parse().unwrap(), &p, &[]).unwrap();
    let end = Instant::now() + Duration::from_secs(a.get(4).map_or(30, |s| s.parse().unwrap()));
    while Instant::now() < end {
        if let Some(e) = ep.cm_poll().unwrap() {
            println!("event {e:?}");
        }
    }
    println!("counters {:?}", ep.counters());
}
