//! Which pairs test when: every pair by the circle method, a ring, a bisection, or a list from a file,
//! as steps of disjoint (client, server) pairs that run at the same time; or an incast, one step of
//! many senders into one receiver.

use std::collections::BTreeSet;
use std::path::Path;

/// Which pairs to test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pattern {
    /// Every pair, both directions: n−1 rounds of n/2 pairs (n rounds with one bye each when n is odd).
    AllPairs,
    /// Each rank with the next one (n−1 with 0), both directions.
    Ring,
    /// The first half against the second half, rank i with i + n/2, both directions.
    Bisection,
    /// (client, server) pairs from `--pairs FILE`, in file order.
    Pairs(Vec<(usize, usize)>),
    /// Many to one: `senders` ranks (None: every other rank) each run a client against `receiver`,
    /// all in one step, so the receiver serves them at once.
    Incast {
        /// `--incast-receiver`.
        receiver: usize,
        /// `--incast-senders`.
        senders: Option<usize>,
    },
}

/// One pair test: `client` runs the binary with `server`'s address. Bandwidth flows client → server for
/// SEND and WRITE, server → client for READ (as in the single-pair binaries).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub(crate) struct Pair {
    /// The rank that runs the client side (the matrix row).
    pub client: usize,
    /// The rank that runs the server side (the matrix column).
    pub server: usize,
}

/// Pairs that run at the same time: no rank appears twice, but for an incast's receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    /// The round this step belongs to (a round is one matching, run in both directions).
    pub round: usize,
    /// The pairs.
    pub pairs: Vec<Pair>,
}

impl Pattern {
    /// Reads `--pairs FILE`: one `CLIENT SERVER` pair of ranks per line; `#` starts a comment.
    pub(crate) fn from_file(path: &Path) -> Result<Pattern, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--pairs {}: {e}", path.display()))?;
        let mut pairs = Vec::new();
        for (no, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let nums: Vec<&str> = line
                .split(|c: char| c.is_whitespace() || c == ',' || c == '-' || c == '>')
                .filter(|w| !w.is_empty())
                .collect();
            let parsed: Option<Vec<usize>> = nums.iter().map(|w| w.parse().ok()).collect();
            match parsed.as_deref() {
                Some(&[c, s]) if c != s => pairs.push((c, s)),
                Some(&[_, _]) => {
                    return Err(format!(
                        "--pairs {} line {}: a rank cannot test against itself",
                        path.display(),
                        no + 1
                    ));
                }
                _ => {
                    return Err(format!(
                        "--pairs {} line {}: expected two ranks, 'CLIENT SERVER', got {line:?}",
                        path.display(),
                        no + 1
                    ));
                }
            }
        }
        if pairs.is_empty() {
            return Err(format!("--pairs {}: no pairs in the file", path.display()));
        }
        Ok(Pattern::Pairs(pairs))
    }

    /// A short description, the same on every rank that was given the same pattern.
    pub(crate) fn describe(&self) -> String {
        match self {
            Pattern::AllPairs => "all".into(),
            Pattern::Ring => "ring".into(),
            Pattern::Bisection => "bisection".into(),
            Pattern::Pairs(p) => {
                let list: Vec<String> = p.iter().map(|(c, s)| format!("{c}>{s}")).collect();
                format!("pairs {}", list.join(","))
            }
            Pattern::Incast { receiver, senders } => match senders {
                Some(k) => format!("incast {k}>{receiver}"),
                None => format!("incast all>{receiver}"),
            },
        }
    }

    /// The incast's receiver and senders for `n` ranks: the first `senders` ranks other than the
    /// receiver, in rank order. Fails naming the flag when the job is too small for it.
    pub(crate) fn incast(
        receiver: usize,
        senders: Option<usize>,
        n: usize,
    ) -> Result<(usize, Vec<usize>), String> {
        if receiver >= n {
            return Err(format!(
                "--incast-receiver {receiver}: the job has {n} ranks (0..{}); give one of them",
                n.saturating_sub(1)
            ));
        }
        let others: Vec<usize> = (0..n).filter(|&r| r != receiver).collect();
        let k = senders.unwrap_or(others.len());
        if k == 0 || k > others.len() {
            return Err(format!(
                "--incast-senders {k}: the job has {} ranks besides the receiver; give 1 to {} \
                 (or leave it out for all of them)",
                others.len(),
                others.len()
            ));
        }
        Ok((receiver, others[..k].to_vec()))
    }

    /// Checks `--victim CLIENT,SERVER` against an incast of `receiver` and `senders` in `n` ranks: the
    /// client sends nothing else, the server is the receiver or a rank that does not send.
    pub(crate) fn victim(
        (client, server): (usize, usize),
        receiver: usize,
        senders: &[usize],
        n: usize,
    ) -> Result<Pair, String> {
        let flag = format!("--victim {client},{server}");
        if client >= n || server >= n {
            return Err(format!(
                "{flag}: the job has {n} ranks (0..{})",
                n.saturating_sub(1)
            ));
        }
        if client == receiver || senders.contains(&client) {
            return Err(format!(
                "{flag}: rank {client} already {} in the incast; the victim's client must be a \
                 rank that does not send (leave one out with --incast-senders N)",
                if client == receiver {
                    "receives"
                } else {
                    "sends"
                }
            ));
        }
        if senders.contains(&server) {
            return Err(format!(
                "{flag}: rank {server} sends in the incast; the victim's server is the receiver \
                 ({receiver}) or a rank that does not send"
            ));
        }
        Ok(Pair { client, server })
    }

    /// The steps for `n` ranks, in order. Fails when a pair names a rank outside 0..n.
    pub(crate) fn steps(&self, n: usize) -> Result<Vec<Step>, String> {
        let rounds: Vec<Vec<(usize, usize)>> = match self {
            Pattern::AllPairs => circle_rounds(n),
            Pattern::Ring => ring_rounds(n),
            Pattern::Bisection => vec![(0..n / 2).map(|i| (i, i + n / 2)).collect()],
            Pattern::Pairs(list) => {
                if let Some(&(c, s)) = list.iter().find(|&&(c, s)| c >= n || s >= n) {
                    return Err(format!(
                        "--pairs names rank {} but the job has {n} ranks (0..{})",
                        c.max(s),
                        n.saturating_sub(1)
                    ));
                }
                return Ok(pack(list));
            }
            Pattern::Incast { receiver, senders } => {
                let (receiver, senders) = Pattern::incast(*receiver, *senders, n)?;
                let pairs = senders
                    .into_iter()
                    .map(|client| Pair {
                        client,
                        server: receiver,
                    })
                    .collect();
                return Ok(vec![Step { round: 0, pairs }]);
            }
        };
        // Each round of a symmetric pattern runs its matching twice: a → b, then b → a.
        let mut steps = Vec::new();
        for (round, matching) in rounds.into_iter().enumerate() {
            if matching.is_empty() {
                continue;
            }
            let fwd = matching.iter().map(|&(a, b)| Pair {
                client: a,
                server: b,
            });
            let back = matching.iter().map(|&(a, b)| Pair {
                client: b,
                server: a,
            });
            steps.push(Step {
                round,
                pairs: fwd.collect(),
            });
            steps.push(Step {
                round,
                pairs: back.collect(),
            });
        }
        Ok(steps)
    }
}

/// The circle method (round-robin tournament): rank n−1 (or a dummy when n is odd) stays put while the
/// others rotate, so every round is a perfect matching and every pair meets exactly once.
pub(crate) fn circle_rounds(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return Vec::new();
    }
    let m = if n.is_multiple_of(2) { n } else { n + 1 };
    let fixed = m - 1;
    (0..m - 1)
        .map(|r| {
            let mut round = Vec::with_capacity(m / 2);
            // The fixed player meets the one at the rotation's head; a dummy partner is a bye.
            if fixed < n {
                round.push(order(fixed, r));
            }
            for k in 1..m / 2 {
                let a = (r + k) % (m - 1);
                let b = (r + m - 1 - k) % (m - 1);
                if a < n && b < n {
                    round.push(order(a, b));
                }
            }
            round.sort_unstable();
            round
        })
        .collect()
}

fn order(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}

/// The ring's edges (i, i+1 mod n) as matchings: two for an even n, three for an odd one.
fn ring_rounds(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return Vec::new();
    }
    if n == 2 {
        return vec![vec![(0, 1)]];
    }
    let edge = |i: usize| order(i, (i + 1) % n);
    let even: Vec<_> = (0..n / 2).map(|k| edge(2 * k)).collect();
    let odd: Vec<_> = (0..(n - 1) / 2).map(|k| edge(2 * k + 1)).collect();
    let mut rounds = vec![even, odd];
    if n % 2 == 1 {
        rounds.push(vec![edge(n - 1)]);
    }
    rounds
}

/// Packs directed pairs into steps first-fit, in file order, so that no rank is in two pairs at once.
fn pack(list: &[(usize, usize)]) -> Vec<Step> {
    let mut steps: Vec<(BTreeSet<usize>, Step)> = Vec::new();
    for &(c, s) in list {
        let pair = Pair {
            client: c,
            server: s,
        };
        match steps
            .iter_mut()
            .find(|(busy, _)| !busy.contains(&c) && !busy.contains(&s))
        {
            Some((busy, step)) => {
                busy.extend([c, s]);
                step.pairs.push(pair);
            }
            None => {
                let round = steps.len();
                steps.push((
                    BTreeSet::from([c, s]),
                    Step {
                        round,
                        pairs: vec![pair],
                    },
                ));
            }
        }
    }
    steps.into_iter().map(|(_, s)| s).collect()
}

#[cfg(test)]
mod tests;
