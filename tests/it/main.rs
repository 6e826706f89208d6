//! The integration tests, one crate so that CI links one binary: a module per area, helpers in one place.
//! `alloc_counter` is the binary's global allocator: the allocation-free datapath tests count per thread.

mod alloc_counter;
mod common;
mod rc_harness;
mod soft_support;
mod vectors;

mod cli_errors;
mod compare_from;
mod compare_local;
mod gate_cli;
mod gate_in_binaries;
mod layering;
mod oob_errors;
mod perftest_oob_six;
mod perftest_oob_stub;
mod perftest_oob_traces;
mod rc_errors;
mod rc_lossy;
mod rc_no_alloc;
mod rc_ops;
mod rc_pingpong_loss;
mod rc_selective;
mod ref_binary;
mod report_pipeline;
mod soft_bench;
mod soft_capture;
mod soft_endpoint;
mod soft_io_rate;
mod soft_lossy;
mod soft_netdev;
mod soft_netns;
mod soft_noalloc;
mod soft_packet;
mod soft_process;
mod soft_six_tests;
mod tcp_reports;
mod tcp_six_tests;
mod verbs_binaries_unavailable;
mod wire_proptest;
mod wire_rxe_pcaps;
mod wire_tshark;
mod wire_vectors;
