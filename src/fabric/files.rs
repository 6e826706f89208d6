//! What rank 0 writes, as the results model types it: the fabric document (`results::fabric`) made
//! from the members and phases, and the pair tests behind fabric.csv. The export pipeline writes them
//! (fabric.json with every pair's full single-run result streamed from a spool, so that rank 0 never
//! holds n² results in memory; fabric.csv; a heatmap per matrix).

use super::args::Leg;
use super::cell::{MatrixMetric, Status};
use super::driver::{Member, MemberState, Phase, VICTIM_TEST};
use super::rules::Rules;
use super::summary::{LegLabels, cell_state};
use super::verdict::{Concurrent, Sharing, Verdict};
use crate::results::fabric::{
    BadHostDoc, FabricDoc, Flag, Host, HostState, IncastCells, IncastShare, LegLabel, Matrix,
    MatrixLimit, PairRow, PairRows, RulesDoc, SharedHostDoc, Summary, Tool, VictimDoc,
};
use std::collections::{BTreeMap, BTreeSet};

/// The run's description for fabric.json.
#[derive(Debug, Clone)]
pub(crate) struct RunInfo {
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC.
    pub(crate) finished_at: String,
    /// `slurm`, `openmpi`, ...
    pub launcher: String,
    /// Pattern description.
    pub pattern: String,
    /// `--serial`.
    pub serial: bool,
    /// Rank 0's test flags.
    pub args: Vec<String>,
    /// Outlier rules.
    pub rules: Rules,
    /// Whether flagged pairs were retested.
    pub retest: bool,
    /// Whether SIGTERM/SIGINT cut the run short.
    pub interrupted: bool,
    /// Whether the binaries ran with `--validate` (an ok cell is then a validated one).
    pub validate: bool,
    /// `--pattern incast`: the receiver and the senders.
    pub(crate) incast: Option<(usize, Vec<usize>)>,
    /// The ranks of the pair sides that run at once (per step, or per pair with `--serial`).
    pub(crate) concurrent: Concurrent,
}

/// The fabric document of the run so far.
pub(crate) fn document(
    info: &RunInfo,
    members: &[Member],
    phases: &[Phase],
    labels: &LegLabels,
    gids: &BTreeMap<(usize, &'static str), String>,
    scheduled: &BTreeSet<(usize, usize)>,
) -> FabricDoc {
    let sharing = Sharing::of(members, &info.concurrent);
    let hosts = members
        .iter()
        .map(|m| {
            let (status, reason) = match &m.state {
                MemberState::Present => (HostState::Present, None),
                MemberState::Missing(w) => (HostState::Missing, Some(w.clone())),
                MemberState::Lost(w) => (HostState::Lost, Some(w.clone())),
            };
            Host {
                rank: m.rank,
                host: m.host.clone(),
                address: m.addr.clone(),
                device: m.device.clone(),
                status,
                reason,
                gids: gids
                    .range((m.rank, "")..)
                    .take_while(|((r, _), _)| *r == m.rank)
                    .map(|((_, leg), gid)| ((*leg).to_owned(), gid.clone()))
                    .collect(),
                cores: m.cores,
            }
        })
        .collect();
    let n = members.len();
    let mut matrices = Vec::new();
    let mut victims = Vec::new();
    let mut summary = Summary::default();
    for p in phases {
        if let Some((pair, cell)) = &p.victim {
            let fig = &cell.figures;
            let v = |x: f32| x.is_finite().then_some(f64::from(x));
            victims.push(VictimDoc {
                leg: Some(p.leg),
                test: p.test.name().to_owned(),
                probe: VICTIM_TEST.name().to_owned(),
                client: pair.client,
                server: pair.server,
                client_host: members[pair.client].host.clone(),
                server_host: members[pair.server].host.clone(),
                shares_receiver: info.incast.as_ref().is_some_and(|(r, _)| *r == pair.server),
                status: cell.status.name().to_owned(),
                size_bytes: (fig.size_bytes > 0).then_some(fig.size_bytes),
                lat_median_us: v(fig.lat_median_us),
                lat_p99_us: v(fig.lat_p99_us),
                lat_max_us: v(fig.lat_max_us),
                error: cell.error.as_deref().map(str::to_owned),
            });
        }
        let label = labels.get(&p.leg).cloned().unwrap_or_default();
        for (_, c) in p.grid.iter() {
            match c.status {
                Status::Ok => summary.ok += 1,
                Status::Failed => summary.failed += 1,
                Status::Missing => summary.missing += 1,
            }
        }
        summary.not_run += scheduled
            .iter()
            .filter(|(c, s)| p.grid.get(*c, *s).is_none())
            .count() as u64;
        let size_bytes = p
            .grid
            .iter()
            .find(|(_, c)| c.status == Status::Ok)
            .map(|(_, c)| c.figures.size_bytes);
        let status: Vec<Vec<_>> = (0..n)
            .map(|c| {
                (0..n)
                    .map(|s| cell_state(&p.grid, scheduled, c, s))
                    .collect()
            })
            .collect();
        let judged_metric = MatrixMetric::flagged(p.test);
        for &metric in MatrixMetric::of(p.test) {
            let judged = metric == judged_metric;
            matrices.push(Matrix {
                leg: p.leg,
                label: label.clone(),
                test: p.test.name().to_owned(),
                metric,
                unit: metric.unit().to_owned(),
                size_bytes,
                judged,
                values: (0..n)
                    .map(|c| {
                        (0..n)
                            .map(|s| p.grid.get(c, s).and_then(|x| x.value(metric)))
                            .collect()
                    })
                    .collect(),
                status: status.clone(),
                flagged: judged.then(|| {
                    (0..n)
                        .map(|c| (0..n).map(|s| p.flagged.contains(&(c, s))).collect())
                        .collect()
                }),
                limit: p.limit.filter(|_| judged).map(|l| MatrixLimit {
                    reference: l.reference,
                    value: l.value,
                    rule: l.describe(&info.rules),
                }),
                incast: None,
            });
            let m = matrices.last_mut().expect("just pushed");
            if let Some((receiver, senders)) = &info.incast
                && matches!(metric, MatrixMetric::BwAvg | MatrixMetric::MsgRate)
            {
                m.incast = Some(IncastShare::of(&m.values, *receiver, senders));
            }
        }
        for &(c, s) in &p.flagged {
            let retest = p.grid.retests.get(&(c, s));
            let retest_value = retest.and_then(|r| r.value(judged_metric));
            let verdict = Verdict::of(p, &sharing, c, s);
            summary.flagged.push(Flag {
                leg: p.leg,
                test: p.test.name().to_owned(),
                metric: judged_metric,
                client: c,
                server: s,
                client_host: members[c].host.clone(),
                server_host: members[s].host.clone(),
                value: p.grid.get(c, s).and_then(|x| x.value(judged_metric)),
                limit: p.limit.map(|l| l.value),
                bad_pair: p.diagnosis.bad_pairs.contains(&(c, s)),
                retest_value,
                retest_error: retest.and_then(|r| r.error.as_deref()).map(str::to_owned),
                confirmed: retest_value.zip(p.limit).map(|(v, l)| l.breached(v)),
                verdict: verdict.word().to_owned(),
                why: match verdict {
                    Verdict::Unjudged(w) | Verdict::HeldBack(w) => Some(w),
                    _ => None,
                },
            });
        }
        for h in &p.diagnosis.bad_hosts {
            let reason = sharing.held_back(h.rank);
            let doc = BadHostDoc {
                leg: p.leg,
                test: p.test.name().to_owned(),
                rank: h.rank,
                host: members[h.rank].host.clone(),
                flagged_peers: h.flagged_peers,
                measured_peers: h.measured_peers,
                reason: reason.clone(),
            };
            match reason {
                Some(_) => summary.held_back.push(doc),
                None => summary.bad_hosts.push(doc),
            }
        }
    }
    let legs = phases
        .iter()
        .map(|p| p.leg)
        .collect::<BTreeSet<Leg>>()
        .into_iter()
        .map(|leg| LegLabel {
            leg,
            label: labels.get(&leg).cloned(),
        })
        .collect();
    let tests = phases
        .iter()
        .map(|p| p.test.name())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(str::to_owned)
        .collect();
    FabricDoc {
        tool: Tool::default(),
        started_at: info.started_at.clone(),
        finished_at: info.finished_at.clone(),
        interrupted: info.interrupted,
        launcher: info.launcher.clone(),
        ranks: n,
        tests,
        legs,
        pattern: info.pattern.clone(),
        serial: info.serial,
        args: info.args.clone(),
        validate: info.validate,
        rules: RulesDoc {
            lat_factor: info.rules.lat_factor,
            bw_fraction: info.rules.bw_fraction,
            retest: info.retest,
        },
        hosts,
        shared_hosts: sharing
            .hosts
            .iter()
            .map(|h| SharedHostDoc {
                host: h.host.clone(),
                ranks: h.ranks.clone(),
                cores: h.cores,
                busy_sides: h.busy,
                oversubscribed: h.oversubscribed(),
            })
            .collect(),
        warnings: sharing.warnings(),
        matrices,
        victims,
        summary,
        provenance: Some(crate::results::Provenance::of_this_process(None)),
        ..FabricDoc::default()
    }
}

/// The pair tests of a run, as fabric.csv lists them: per phase, the cells row by row, then the
/// retests (attempt 2).
pub(crate) struct PairTests<'a> {
    /// The ranks.
    pub(crate) members: &'a [Member],
    /// The phases.
    pub(crate) phases: &'a [Phase],
    /// The legs' transports.
    pub(crate) labels: &'a LegLabels,
    /// Who shares a host, for the verdicts.
    pub(crate) sharing: &'a Sharing,
    /// `--pattern incast`: the receiver and the senders.
    pub(crate) incast: Option<&'a (usize, Vec<usize>)>,
}

impl PairTests<'_> {
    /// A matrix row's part in the incast: a sender's share of the receiver's bandwidth matrix.
    fn incast_cells(&self, p: &Phase, client: usize, server: usize) -> Option<IncastCells> {
        let (receiver, senders) = self.incast?;
        if server != *receiver || !senders.contains(&client) {
            return None;
        }
        let bw = MatrixMetric::of(p.test)
            .contains(&MatrixMetric::BwAvg)
            .then(|| {
                let values: Vec<Vec<Option<f64>>> = (0..p.grid.n)
                    .map(|c| {
                        (0..p.grid.n)
                            .map(|s| p.grid.get(c, s).and_then(|x| x.value(MatrixMetric::BwAvg)))
                            .collect()
                    })
                    .collect();
                let share = IncastShare::of(&values, *receiver, senders);
                let mine = values[client][server];
                (share, mine)
            });
        Some(IncastCells {
            role: "sender",
            share_pct: bw.as_ref().and_then(|(share, mine)| {
                mine.filter(|_| share.sum > 0.0)
                    .map(|m| 100.0 * m / share.sum)
            }),
            sum_gbps: bw.as_ref().map(|(share, _)| share.sum),
            jain: bw.and_then(|(share, _)| share.jain),
        })
    }
}

impl PairRows for PairTests<'_> {
    fn rows(&self) -> Box<dyn Iterator<Item = PairRow<'_>> + '_> {
        Box::new(self.phases.iter().flat_map(move |p| {
            let label = self.labels.get(&p.leg).map_or("", String::as_str);
            let retests = p.grid.retests.iter().map(|(&k, c)| (k, c, "retest"));
            let victim = p
                .victim
                .iter()
                .map(|(v, c)| ((v.client, v.server), c, "victim"));
            let cells = p.grid.iter().map(|(k, c)| (k, c, "matrix"));
            let metric = MatrixMetric::flagged(p.test);
            cells
                .chain(retests)
                .chain(victim)
                .map(move |((c, s), cell, run)| {
                    let fig = &cell.figures;
                    let judged = p.limit.filter(|_| run != "victim");
                    let within_limit = judged.zip(cell.value(metric)).map(|(l, v)| !l.breached(v));
                    let verdict = match (judged, run) {
                        (None, _) => "",
                        (Some(_), "matrix") => Verdict::of(p, self.sharing, c, s).word(),
                        // A retest that fails, or breaches the limit again, confirms the flag (the
                        // summary's "(confirmed)"); one within it clears it: slow under load only.
                        (Some(_), _) if within_limit == Some(true) => "cleared",
                        (Some(_), _) => "confirmed",
                    };
                    let incast = match run {
                        "matrix" => self.incast_cells(p, c, s),
                        "victim" => Some(IncastCells {
                            role: "victim",
                            share_pct: None,
                            sum_gbps: None,
                            jain: None,
                        }),
                        _ => None,
                    };
                    PairRow {
                        leg: p.leg,
                        label,
                        test: if run == "victim" { VICTIM_TEST } else { p.test },
                        round: cell.round,
                        run,
                        client: c,
                        server: s,
                        client_host: &self.members[c].host,
                        server_host: &self.members[s].host,
                        status: cell.status.name(),
                        within_limit,
                        verdict,
                        size_bytes: fig.size_bytes,
                        figures: [
                            fig.bw_gbps,
                            fig.bw_peak_gbps,
                            fig.msg_rate_mpps,
                            fig.lat_median_us,
                            fig.lat_p99_us,
                            fig.lat_max_us,
                        ],
                        incast,
                        error: cell.error.as_deref(),
                    }
                })
        }))
    }
}
