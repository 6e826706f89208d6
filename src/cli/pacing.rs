//! The checks of the pacing flags: perftest's rate limiter and its latency gap.
//!
//! Which tests and transports take them, and perftest's defaults (units g, burst = `-t`).

use super::Error;
use super::args::Args;
use crate::params::{Metric, RateLimit, RateLimitType, TestKind, TransportKind};
use std::time::Duration;

/// `--rate_limit` and its companions: the limit to pace by, or none.
pub(crate) fn rate_limit(
    test: TestKind,
    transport: TransportKind,
    tx_depth: u32,
    a: &Args,
) -> Result<Option<RateLimit>, Error> {
    let Some(value) = a.rate_limit else {
        let companion = [
            (a.rate_units.is_some(), "--rate_units"),
            (a.rate_limit_type.is_some(), "--rate_limit_type"),
            (a.burst_size.is_some(), "--burst_size"),
        ]
        .into_iter()
        .find(|f| f.0);
        return match companion {
            Some((_, flag)) => Err(Error::Invalid {
                flag,
                why: "it shapes the rate limiter, which is off; give --rate_limit RATE too".into(),
            }),
            None => Ok(None),
        };
    };
    if test.metric != Metric::Bandwidth {
        return Err(Error::NotApplicable {
            flag: "--rate_limit",
            what: format!("{test} (a latency test)"),
            why: "a latency test has one message in flight; space its iterations with --latency_gap",
        });
    }
    let kind = a.rate_limit_type.unwrap_or(RateLimitType::Sw);
    if kind != RateLimitType::Sw {
        let why = match transport {
            TransportKind::Verbs => {
                "sideway 0.4.3, roceperf's libibverbs binding, offers no way to set a QP's static rate or IBV_QP_RATE_LIMIT; use --rate_limit_type SW (roceperf's pacer, accurate to the burst)"
            }
            TransportKind::Soft => {
                "the soft transport has no hardware pacer; use --rate_limit_type SW (the default here)"
            }
            TransportKind::Tcp => {
                "the TCP baseline has no hardware pacer; use --rate_limit_type SW (the default here)"
            }
        };
        return Err(Error::NotApplicable {
            flag: match kind {
                RateLimitType::Hw => "--rate_limit_type HW",
                _ => "--rate_limit_type PP",
            },
            what: format!("--transport {transport}"),
            why,
        });
    }
    Ok(Some(RateLimit {
        value,
        units: a.rate_units.unwrap_or_default(),
        kind,
        // perftest's default: a burst of the send queue's depth.
        burst_size: a.burst_size.unwrap_or(tx_depth.max(1)),
    }))
}

/// `--latency_gap`: latency tests only; zero when not given.
pub(crate) fn latency_gap(test: TestKind, a: &Args) -> Result<Duration, Error> {
    match a.latency_gap {
        Some(_) if test.metric != Metric::Latency => Err(Error::NotApplicable {
            flag: "--latency_gap",
            what: format!("{test} (a bandwidth test)"),
            why: "it spaces the iterations of a latency test; pace a bandwidth test with --rate_limit",
        }),
        gap => Ok(gap.unwrap_or(Duration::ZERO)),
    }
}
