//! The userspace RoCE stack: a sans-IO RC engine, I/O backends, and a simulated link for tests.
pub mod endpoint;
pub mod io;
pub mod neighbour;
pub mod netdev;
pub mod rc;
pub mod sim;
