//! The checks of the reporting flags: `--run_infinitely` and its intervals, `--json-stream`,
//! perftest's `--out_json`, `--report-both` and `--qp-series`.

use super::Error;
use super::args::{Args, OobArg};
use crate::params::{Metric, TestKind};
use std::time::Duration;

/// How the run reports, beyond the table and its files (whose flags `Options` keeps as given).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Reporting {
    /// `--run_infinitely`: a report line every this long.
    pub interval: Option<Duration>,
    /// `--report-both`.
    pub report_both: bool,
    /// `--qp-series`: milliseconds between samples of each queue pair's bytes.
    pub qp_series: Option<u32>,
}

/// Checks the reporting flags against the test and the run's shape.
pub(crate) fn reporting(test: TestKind, a: &Args) -> Result<Reporting, Error> {
    let interval = if a.run_infinitely {
        Some(run_infinitely(test, a)?)
    } else {
        let needs = [
            (a.report_interval.is_some(), "--report-interval"),
            (a.reporting_files.json_stream.is_some(), "--json-stream"),
        ];
        if let Some((_, flag)) = needs.into_iter().find(|f| f.0) {
            return Err(Error::Invalid {
                flag,
                why: "it reports the intervals of a run without end; give --run_infinitely too"
                    .into(),
            });
        }
        None
    };
    if a.report_both {
        if test.metric != Metric::Bandwidth {
            return Err(Error::NotApplicable {
                flag: "--report-both",
                what: format!("{test} (a latency test)"),
                why: "it splits a bidirectional bandwidth run's figures",
            });
        }
        if !a.bidirectional {
            return Err(Error::Invalid {
                flag: "--report-both",
                why: "it splits a bidirectional run's figures into this side's and the peer's; give -b too"
                    .into(),
            });
        }
    }
    if a.qp_series.is_some() {
        qp_series(test, a)?;
    }
    Ok(Reporting {
        interval,
        report_both: a.report_both,
        qp_series: a.qp_series,
    })
}

/// `--qp-series`: a bandwidth test with a JSON result to hold the series, and an end to record.
fn qp_series(test: TestKind, a: &Args) -> Result<(), Error> {
    if test.metric != Metric::Bandwidth {
        return Err(Error::NotApplicable {
            flag: "--qp-series",
            what: format!("{test} (a latency test)"),
            why: "it samples each queue pair's bytes in a bandwidth run; a latency test has one queue pair",
        });
    }
    if a.run_infinitely {
        return Err(Error::Conflict {
            a: "--qp-series",
            b: "--run_infinitely",
            why: "a run without end reports intervals (--json-stream); the series is written with a run's result",
        });
    }
    if a.files.json.is_none() && a.files.results.is_none() {
        return Err(Error::Invalid {
            flag: "--qp-series",
            why: "the series is written into the JSON result only; give --json FILE or --results DIR too"
                .into(),
        });
    }
    Ok(())
}

/// `--run_infinitely`: bandwidth tests, one size, roceperf's dialect; the interval from
/// `--report-interval`, or from `-D` as perftest spells it, else one second.
fn run_infinitely(test: TestKind, a: &Args) -> Result<Duration, Error> {
    if test.metric != Metric::Bandwidth {
        return Err(Error::NotApplicable {
            flag: "--run_infinitely",
            what: format!("{test} (a latency test)"),
            why: "it repeats bandwidth lines (perftest has it for bandwidth tests only); a latency run takes -D",
        });
    }
    let conflicts: [(bool, &'static str, &'static str); 5] = [
        (
            a.iters.is_some(),
            "-n",
            "a run without end has no iteration count",
        ),
        (a.all, "-a", "a run without end measures one size; use -s"),
        (
            a.margin.is_some(),
            "-f",
            "every second of a run without end is measured; there is no margin to leave out",
        ),
        (
            a.oob == OobArg::Perftest,
            "--oob perftest",
            "a perftest peer ends such a run by being killed, with no results exchange to stop on; pair two roceperf sides",
        ),
        (
            a.duration.is_some() && a.report_interval.is_some(),
            "-D",
            "with --run_infinitely, -D is perftest's spelling of the report interval; give -D or --report-interval",
        ),
    ];
    if let Some((_, flag, why)) = conflicts.into_iter().find(|c| c.0) {
        return Err(Error::Conflict {
            a: "--run_infinitely",
            b: flag,
            why,
        });
    }
    Ok(a.report_interval
        .or(a.duration.map(Duration::from_secs))
        .unwrap_or(Duration::from_secs(1)))
}
