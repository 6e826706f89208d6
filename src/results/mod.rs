//! The results model and the one reader and writer of roceperf's JSON and CSV schemas.
//!
//! What a run was ([`RunInfo`]), what each message size measured ([`SizeResult`]), the figures reports
//! and gates compare ([`Figures`]), a comparison of transports ([`CompareSet`]), a fabric run's matrices
//! ([`fabric::FabricDoc`]), flat rows for gates ([`ResultRow`]), and their files: the one way each is
//! written ([`files`]) and read ([`read`]).
//!
//! Everything above reads results through here: `report` renders them, `compare` produces comparison
//! sets, `gate` judges them. This module knows nothing of transports, command lines or terminals; it
//! uses only `params` (the vocabulary) and `stats` (the summaries).

pub(crate) mod ceiling;
pub(crate) mod congestion;
pub mod csv;
pub(crate) mod fabric;
pub(crate) mod figures;
pub(crate) mod files;
pub(crate) mod floor;
pub(crate) mod interrupted;
pub mod json;
pub(crate) mod loss;
pub mod nic;
pub(crate) mod provenance;
pub mod read;
pub(crate) mod repeat;
pub(crate) mod row;
pub(crate) mod run;
pub(crate) mod set;
pub(crate) mod size;
pub mod switch;
pub(crate) mod time;

#[cfg(test)]
pub(crate) mod testdata;

pub use ceiling::{WireCeiling, WirePort};
pub use csv::append_csv;
pub(crate) use figures::Figures;
pub use figures::{BandwidthFigures, LatencyFigures};
pub(crate) use files::WriteError;
pub use files::results_paths;
pub(crate) use files::{
    LineStream, Unusable, Writes, append_under_header, claim_stdout, compare_dir,
    create_results_dir, is_stdout, probe_dir, probe_file, replace_with, write_atomic,
};
pub use floor::{Floor, HostPath, path_label};
pub use interrupted::{BY_PEER, Interrupted, SizeReport};
pub use json::{to_json, write_json};
pub(crate) use loss::LossPoint;
pub use nic::{CounterDelta, NicCounters, SizeCounters};
pub use provenance::{NicIdentity, Provenance};
pub(crate) use read::parse_transport;
pub use repeat::Repetitions;
pub(crate) use row::ResultRow;
pub(crate) use run::EndlessRun;
pub use run::{AddressLine, FailedPart, RunError, RunInfo, RunMarks, role_name};
pub(crate) use set::Skipped;
pub use set::{CompareRun, CompareSet, default_label};
pub use size::{Measured, SizeResult};
pub use time::now_rfc3339;
