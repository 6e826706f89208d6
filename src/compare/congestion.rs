//! `roce_compare --congestion`: flows through one congested link (docs/congestion.md), its
//! namespaces and switch in [`topology`].

pub mod topology;
