//! What a flag means once the hosts are known: ranks that share a host, and hosts whose pairs want
//! more busy-polling cores than they have, and the verdict each pair of a matrix then gets, one rule
//! for the summary, fabric.json and fabric.csv.
//!
//! A "bad host" is a host slow with (nearly) every peer; when its peers run on the same host, they
//! share its NIC, memory and cores, and are no independent witnesses: that verdict is held back. When
//! the pair sides running at once on a host (each busy-polls a core) outnumber its cores, the figures
//! measure the core sharing, and no verdict is given for a pair with a rank there (unjudged).

use super::driver::{Member, MemberState, Phase};
use std::collections::BTreeMap;
use std::fmt::Write;

/// A host that holds several ranks, or more busy pair sides than cores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedHost {
    /// Its host name.
    pub(crate) host: String,
    /// Its ranks.
    pub(crate) ranks: Vec<usize>,
    /// The cores its ranks may run on (the fewest any of them said), None when unknown.
    pub(crate) cores: Option<usize>,
    /// The most pair sides that ran on it at once.
    pub(crate) busy: usize,
}

impl SharedHost {
    /// Whether its busy pair sides outnumber its cores.
    pub(crate) fn oversubscribed(&self) -> bool {
        self.cores.is_some_and(|c| self.busy > c)
    }
}

/// The hosts of a run that hold several ranks or too many busy sides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Sharing {
    /// Those hosts, by name.
    pub(crate) hosts: Vec<SharedHost>,
}

/// The ranks of each side of the pairs that run at once: per step, or per pair with `--serial`.
pub(crate) type Concurrent = Vec<Vec<usize>>;

impl Sharing {
    /// The sharing among `members` (host names from their hellos) when `concurrent` run at once.
    pub(crate) fn of(members: &[Member], concurrent: &Concurrent) -> Sharing {
        let mut by_host: BTreeMap<&str, Vec<&Member>> = BTreeMap::new();
        for m in members
            .iter()
            .filter(|m| m.host != "?" && !matches!(m.state, MemberState::Missing(_)))
        {
            by_host.entry(m.host.as_str()).or_default().push(m);
        }
        let mut hosts = Vec::new();
        for (host, ms) in by_host {
            let ranks: Vec<usize> = ms.iter().map(|m| m.rank).collect();
            let busy = concurrent
                .iter()
                .map(|sides| sides.iter().filter(|r| ranks.contains(r)).count())
                .max()
                .unwrap_or(0);
            let h = SharedHost {
                host: host.to_owned(),
                cores: ms.iter().filter_map(|m| m.cores).min(),
                ranks,
                busy,
            };
            if h.ranks.len() > 1 || h.oversubscribed() {
                hosts.push(h);
            }
        }
        Sharing { hosts }
    }

    fn host_of(&self, rank: usize) -> Option<&SharedHost> {
        self.hosts.iter().find(|h| h.ranks.contains(&rank))
    }

    /// Why no bad-host verdict is given for `rank`, if none is.
    pub(crate) fn held_back(&self, rank: usize) -> Option<String> {
        let h = self.host_of(rank)?;
        if let Some(why) = self.unjudged_rank(rank) {
            return Some(why);
        }
        (h.ranks.len() > 1).then(|| format!("ranks {} share host {}", join(&h.ranks), h.host))
    }

    fn unjudged_rank(&self, rank: usize) -> Option<String> {
        let h = self.host_of(rank)?;
        h.oversubscribed().then(|| {
            format!(
                "{} ran {} pair sides at once on {} cores",
                h.host,
                h.busy,
                h.cores.unwrap_or(0)
            )
        })
    }

    /// Why the flag of (client, server) is not judged, if it is not.
    pub(crate) fn unjudged(&self, client: usize, server: usize) -> Option<String> {
        self.unjudged_rank(client)
            .or_else(|| self.unjudged_rank(server))
    }

    /// The warnings to print and to write in fabric.json.
    pub(crate) fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for h in &self.hosts {
            if h.ranks.len() > 1 {
                out.push(format!(
                    "ranks {} share host {}: their pairs cross no link between hosts and share its \
                     NIC, memory and cores; no bad-host verdict is given for them (held back)",
                    join(&h.ranks),
                    h.host
                ));
            }
            if h.oversubscribed() {
                out.push(format!(
                    "host {} ran up to {} pair sides at once, each busy-polling a core, on {} cores: \
                     their figures measure the core sharing, and no flag of a pair with a rank there \
                     is judged (give the host more cores, fewer ranks, or --serial)",
                    h.host,
                    h.busy,
                    h.cores.unwrap_or(0)
                ));
            }
        }
        out
    }
}

fn join(ranks: &[usize]) -> String {
    let mut s = String::new();
    for (i, r) in ranks.iter().enumerate() {
        let _ = write!(s, "{}{r}", if i == 0 { "" } else { ", " });
    }
    s
}

/// What a matrix says of one pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Not flagged (or not judged: no limit).
    Ok,
    /// Flagged, with a rank on a host whose cores were oversubscribed: not judged.
    Unjudged(String),
    /// Flagged and confirmed, no bad host in it: a cable, a switch port, a path.
    BadPair,
    /// Flagged, but passed when retested alone.
    LoadOnly,
    /// Flagged and confirmed, explained by a bad host.
    BadHost,
    /// Flagged and confirmed, with a bad host whose verdict is held back (it shares its host).
    HeldBack(String),
}

impl Verdict {
    /// The verdict of (client, server) in `p`.
    pub(crate) fn of(p: &Phase, sharing: &Sharing, client: usize, server: usize) -> Verdict {
        if !p.flagged.contains(&(client, server)) {
            return Verdict::Ok;
        }
        if let Some(why) = sharing.unjudged(client, server) {
            return Verdict::Unjudged(why);
        }
        if p.diagnosis.bad_pairs.contains(&(client, server)) {
            return Verdict::BadPair;
        }
        if !p.confirmed.contains(&(client, server)) {
            return Verdict::LoadOnly;
        }
        let held = [client, server]
            .into_iter()
            .filter(|r| p.diagnosis.bad_hosts.iter().any(|h| h.rank == *r))
            .find_map(|r| sharing.held_back(r));
        match held {
            Some(why) => Verdict::HeldBack(why),
            None => Verdict::BadHost,
        }
    }

    /// fabric.csv's word: `ok`, `unjudged`, `bad_pair`, `load_only`, `bad_host`, `held_back`.
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Unjudged(_) => "unjudged",
            Verdict::BadPair => "bad_pair",
            Verdict::LoadOnly => "load_only",
            Verdict::BadHost => "bad_host",
            Verdict::HeldBack(_) => "held_back",
        }
    }

    /// The summary's words: `bad pair`, `slow under load only`, ...
    pub(crate) fn describe(&self) -> String {
        match self {
            Verdict::Ok => "ok".into(),
            Verdict::Unjudged(why) => format!("unjudged, {why}"),
            Verdict::BadPair => "bad pair".into(),
            Verdict::LoadOnly => "slow under load only".into(),
            Verdict::BadHost => "flagged (bad host)".into(),
            Verdict::HeldBack(why) => format!("no verdict, {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(rank: usize, host: &str, cores: usize) -> Member {
        Member {
            rank,
            host: host.into(),
            addr: format!("10.0.0.{rank}"),
            device: None,
            cores: Some(cores),
            state: MemberState::Present,
        }
    }

    #[test]
    fn three_ranks_on_one_two_core_host_share_it_and_are_not_oversubscribed_by_one_pair() {
        let ms: Vec<Member> = (0..3).map(|r| member(r, "vm", 2)).collect();
        // Three ranks: one pair per step (two sides).
        let s = Sharing::of(&ms, &vec![vec![0, 1], vec![1, 2], vec![2, 0]]);
        assert_eq!(s.hosts.len(), 1);
        assert_eq!((s.hosts[0].busy, s.hosts[0].cores), (2, Some(2)));
        assert!(!s.hosts[0].oversubscribed());
        assert!(
            s.held_back(1)
                .unwrap()
                .contains("ranks 0, 1, 2 share host vm")
        );
        assert_eq!(s.unjudged(0, 1), None);
        assert_eq!(s.warnings().len(), 1);
    }

    #[test]
    fn four_sides_on_two_cores_leave_every_flag_there_unjudged() {
        let ms: Vec<Member> = (0..4).map(|r| member(r, "vm", 2)).collect();
        let s = Sharing::of(&ms, &vec![vec![0, 1, 2, 3]]);
        assert!(s.hosts[0].oversubscribed());
        assert!(
            s.unjudged(0, 3)
                .unwrap()
                .contains("vm ran 4 pair sides at once on 2 cores")
        );
        assert_eq!(s.warnings().len(), 2);
    }

    #[test]
    fn one_rank_per_host_is_no_sharing() {
        let ms = vec![member(0, "a", 8), member(1, "b", 8), member(2, "c", 8)];
        let s = Sharing::of(&ms, &vec![vec![0, 1], vec![1, 2]]);
        assert_eq!(s, Sharing::default());
        assert_eq!(s.held_back(0), None);
        assert!(s.warnings().is_empty());
    }

    #[test]
    fn an_incast_receiver_alone_on_its_host_is_oversubscribed_by_its_servers() {
        let ms = vec![
            member(0, "rx", 2),
            member(1, "a", 8),
            member(2, "b", 8),
            member(3, "c", 8),
        ];
        let s = Sharing::of(&ms, &vec![vec![1, 0, 2, 0, 3, 0]]);
        assert_eq!(s.hosts.len(), 1);
        assert_eq!(s.hosts[0].busy, 3);
        assert!(s.unjudged(1, 0).is_some());
    }
}
