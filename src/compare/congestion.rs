//! `roce_compare --congestion`: N flows through one congested link under each discipline, with a
//! victim latency probe (docs/congestion.md). Its namespaces and switch are [`topology`]; [`plan`]
//! decides what runs from the flags, [`run`] runs it, [`build`] turns what the runs wrote into the
//! study's document (`crate::results::congestion`); [`wake_cost`] measures what the switch's
//! sleeps cost this machine; [`softirq`] keeps the kernel's frame delivery ahead of the endpoints.

pub(crate) mod build;
pub(crate) mod plan;
pub(crate) mod run;
pub(crate) mod softirq;
pub mod topology;
pub(crate) mod wake_cost;
