//! Reports: console in perftest layout, CSV, JSON.
