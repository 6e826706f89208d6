//! The test drivers: bandwidth and latency loops, warm-up, iteration and duration modes.
