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

pub mod csv;
pub mod fabric;
pub mod figures;
pub mod files;
pub mod json;
pub mod loss;
pub mod read;
pub mod repeat;
pub mod row;
pub mod run;
pub mod set;
pub mod size;
pub mod time;

#[cfg(test)]
pub(crate) mod testdata;

pub use csv::append_csv;
pub use figures::{BandwidthFigures, Figures, LatencyFigures};
pub(crate) use files::{
    LineStream, append_under_header, compare_dir, create_results_dir, replace_with, write_atomic,
};
pub use files::{WriteError, results_paths};
pub use json::{to_json, write_json};
pub use loss::LossPoint;
pub use read::parse_transport;
pub use read::{Document, ReadError, SchemaError};
pub use repeat::Repetitions;
pub use row::ResultRow;
pub use run::{AddressLine, EndlessRun, RunInfo, role_name};
pub use set::{CompareRun, CompareSet, Skipped, default_label};
pub use size::{Measured, SizeResult};
pub use time::now_rfc3339;
