//! Rank 0's outputs while the run goes and at its end: the progress bar, the spool of pair records,
//! a snapshot of fabric.json and fabric.csv whenever a rank is lost (a launcher such as mpirun may
//! kill rank 0 a second later), and at the end fabric.json, fabric.csv, the heatmaps (all through the
//! export pipeline, with the files the format flags name) and the printed summary.

use super::cell::MatrixMetric;
use super::coordinator::Observer;
use super::driver::{Driver, Member, PairRecord, Phase};
use super::files::{self, RunInfo};
use super::metrics_http::Exposition;
use super::say;
use super::summary::{self, LegLabels};
use super::verdict::Sharing;
use crate::report::export::openmetrics::{fabric_text, watch_exposition};
use crate::report::export::{Document, ExportManager, FormatFiles};
use crate::results::fabric::{FabricDoc, FabricRun};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Collects the run's outputs in a results directory.
pub(crate) struct Sink {
    dir: PathBuf,
    spool_path: PathBuf,
    spool: BufWriter<File>,
    bar: indicatif::ProgressBar,
    labels: LegLabels,
    gids: BTreeMap<(usize, &'static str), String>,
    info: RunInfo,
    scheduled: BTreeSet<(usize, usize)>,
    /// The files the format flags name, written with the tables.
    formats: FormatFiles,
    /// `--watch`: what each round's end updates.
    watch: Option<Watching>,
}

/// A watching run's outputs beyond its files.
struct Watching {
    /// The pause between rounds.
    every: Duration,
    /// What `--metrics-listen` serves, when given.
    served: Option<Exposition>,
    /// The last complete round's exit status.
    code: u8,
}

fn label_of(result: &serde_json::Value) -> Option<String> {
    let t = result["test"]["transport"].as_str()?;
    Some(match result["test"]["roce"].as_str() {
        Some(r) => format!("{t} {r}"),
        None => t.to_owned(),
    })
}

impl Sink {
    /// A sink writing into `dir` (created), and to the files `formats` names; `scheduled` are the
    /// (client, server) pairs of the plan.
    pub(crate) fn new(
        dir: &Path,
        info: RunInfo,
        scheduled: BTreeSet<(usize, usize)>,
        formats: FormatFiles,
    ) -> std::io::Result<Sink> {
        std::fs::create_dir_all(dir)?;
        let spool_path = dir.join(".pairs.jsonl");
        let spool = BufWriter::new(File::create(&spool_path)?);
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(0),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if !crate::report::term::interactive(crate::report::term::Stream::Stderr) {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} pair tests  {msg}",
            )
            .expect("template")
            .progress_chars("=> "),
        );
        Ok(Sink {
            dir: dir.to_path_buf(),
            spool_path,
            spool,
            bar,
            labels: BTreeMap::new(),
            gids: BTreeMap::new(),
            info,
            scheduled,
            formats,
            watch: None,
        })
    }

    /// Makes this the sink of a watching run (`--watch every`) whose rounds `served` publishes.
    pub(crate) fn watching(mut self, every: Duration, served: Option<Exposition>) -> Sink {
        if let Some(s) = &served {
            s.set(watch_exposition(0, None, every.as_secs_f64()));
        }
        self.watch = Some(Watching {
            every,
            served,
            code: 1,
        });
        self
    }

    /// Writes the run's files through `exports` (each replaced whole, so a reader never sees half a
    /// file), saying each that cannot be written and going on; the document written.
    fn write_files(
        &mut self,
        mut exports: ExportManager,
        members: &[Member],
        phases: &[Phase],
        interrupted: bool,
    ) -> FabricDoc {
        let _ = self.spool.flush();
        let mut info = self.info.clone();
        info.finished_at = crate::results::now_rfc3339();
        info.interrupted = interrupted;
        let doc = files::document(
            &info,
            members,
            phases,
            &self.labels,
            &self.gids,
            &self.scheduled,
        );
        let sharing = Sharing::of(members, &info.concurrent);
        let pairs = files::PairTests {
            members,
            phases,
            labels: &self.labels,
            sharing: &sharing,
            incast: info.incast.as_ref(),
        };
        let run = FabricRun {
            doc,
            pairs: &pairs,
            spool: &self.spool_path,
        };
        exports.write_each(&Document::Fabric(&run), |e| {
            let path = e.path().to_owned();
            say(&format!(
                "roce_fabric: error: cannot write {}: {}",
                path.display(),
                e.into_io()
            ));
            true
        });
        run.doc
    }

    /// Writes every file and prints the heatmaps and the summary; the exit code.
    pub(crate) fn finish(mut self, members: &[Member], phases: &[Phase], interrupted: bool) -> u8 {
        self.bar.finish_and_clear();
        self.write_files(
            ExportManager::fabric(&self.dir).with_formats(&self.formats),
            members,
            phases,
            interrupted,
        );
        let _ = std::fs::remove_file(&self.spool_path);
        let mut text = self.summary(members, phases);
        if interrupted {
            text.push_str("  interrupted: SIGTERM/SIGINT ended the run early; pairs not run are marked not_run\n");
        }
        text.push_str(&format!("Results: {}\n", self.dir.display()));
        print(&text);
        u8::from(interrupted || !summary::all_ok(members, phases))
    }

    /// Ends a watching run that completed `rounds` rounds: their last one's files stand (a round
    /// SIGTERM/SIGINT cut short, `cancelled`, is dropped); its exit code.
    pub(crate) fn stop_watching(self, rounds: u64, cancelled: bool) -> u8 {
        self.bar.finish_and_clear();
        let _ = std::fs::remove_file(&self.spool_path);
        let cut = if cancelled {
            " (the round under way was cancelled)"
        } else {
            ""
        };
        print(&format!(
            "roce_fabric: watch stopped after {rounds} round{}{cut}; the last one's files: {}\n",
            if rounds == 1 { "" } else { "s" },
            self.dir.display()
        ));
        self.watch.map_or(1, |w| w.code)
    }

    /// The heatmaps as text and the summary of `phases`.
    fn summary(&self, members: &[Member], phases: &[Phase]) -> String {
        let color = crate::report::term::color(crate::report::term::Stream::Stdout);
        let mut text = String::new();
        for p in phases {
            for &m in MatrixMetric::of(p.test) {
                text.push_str(&summary::heatmap_text(
                    p,
                    m,
                    &self.scheduled,
                    &self.labels,
                    color,
                ));
                text.push('\n');
            }
        }
        text.push_str(&summary::summary_text(
            members,
            phases,
            &self.info.rules,
            &self.labels,
            &self.scheduled,
            &Sharing::of(members, &self.info.concurrent),
        ));
        if let Some((receiver, senders)) = &self.info.incast {
            text.push_str(&summary::incast_text(
                phases,
                &self.labels,
                *receiver,
                senders,
            ));
        }
        text
    }

    /// Drops the spool (a run that never started).
    pub(crate) fn discard(self) {
        self.bar.finish_and_clear();
        let _ = std::fs::remove_file(&self.spool_path);
    }
}

impl Observer for Sink {
    fn lost(&mut self, text: &str, driver: Option<&Driver>) {
        self.bar.suspend(|| say(&format!("roce_fabric: {text}")));
        // The launcher may take rank 0 down within a second of a rank's death (mpirun does): leave a
        // matrix that names the lost rank now; the final one replaces it if the run goes on.
        if let Some(d) = driver {
            let tables = ExportManager::fabric_tables(&self.dir).with_formats(&self.formats);
            self.write_files(tables, d.members(), d.phases(), true);
        }
    }

    fn record(&mut self, rec: &PairRecord) {
        if let Some(result) = &rec.result {
            if let Some(l) = label_of(result) {
                self.labels.entry(rec.leg).or_insert(l);
            }
            let (mine, theirs) = super::cell::gids(result);
            let leg = rec.leg.name();
            if let Some(g) = mine {
                self.gids.insert((rec.client, leg), g);
            }
            if let Some(g) = theirs {
                self.gids.insert((rec.server, leg), g);
            }
        }
        if let Ok(line) = serde_json::to_string(rec) {
            let _ = writeln!(self.spool, "{line}");
        }
    }

    fn progress(&mut self, done: u64, total: u64, label: &str) {
        self.bar.set_length(total);
        self.bar.set_position(done);
        self.bar.set_message(label.to_owned());
    }

    fn round(&mut self, driver: &Driver, round: u64) {
        let (members, phases) = (driver.members(), driver.phases());
        let files = ExportManager::fabric(&self.dir).with_formats(&self.formats);
        let doc = self.write_files(files, members, phases, false);
        // The next round's records start a new spool, and its document a new start.
        if let Ok(f) = File::create(&self.spool_path) {
            self.spool = BufWriter::new(f);
        }
        self.info.started_at = crate::results::now_rfc3339();
        let code = u8::from(!summary::all_ok(members, phases));
        let text = format!(
            "{}Round {round} done; results: {}\n",
            self.summary(members, phases),
            self.dir.display()
        );
        self.bar.suspend(|| print(&text));
        let Some(w) = &mut self.watch else { return };
        w.code = code;
        if let Some(served) = &w.served {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            let mut text = fabric_text(&doc);
            text.push_str(&watch_exposition(round, Some(now), w.every.as_secs_f64()));
            served.set(text);
        }
    }
}

/// Writes `text` to stdout, ignoring a closed one (as [`say`] does stderr).
fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}
