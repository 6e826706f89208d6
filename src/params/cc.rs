//! Congestion-control vocabulary (`--cc`, `--cc-param`): the algorithm, and ConnectX's DCQCN
//! parameters under the names mlx5 gives them in debugfs (`drivers/infiniband/hw/mlx5/cong.c`,
//! `mlx5_ib_dbg_cc_name`), with the units and firmware defaults NVIDIA documents for them
//! (the driver only forwards values to the firmware: it holds no default). `docs/congestion.md`
//! says what each one does.

use serde::{Deserialize, Serialize};
use std::fmt;

/// `--cc`: the soft transport's congestion control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CongestionControl {
    /// DCQCN (Zhu et al., SIGCOMM'15), as a ConnectX runs it out of the box.
    #[default]
    Dcqcn,
    /// No notification point and no reaction point: CE marks are counted, nothing else.
    None,
}

impl CongestionControl {
    /// Both choices.
    pub const ALL: [CongestionControl; 2] = [CongestionControl::Dcqcn, CongestionControl::None];

    /// `dcqcn` or `none`.
    pub fn name(&self) -> &'static str {
        match self {
            CongestionControl::Dcqcn => "dcqcn",
            CongestionControl::None => "none",
        }
    }
}

word!(CongestionControl, "congestion control", "dcqcn or none");

value_enum!(CongestionControl {
    Dcqcn => "DCQCN, ConnectX's default: CE-marked packets get a CNP back, a CNP cuts the sender's rate, timers and bytes bring it back",
    None => "no CNPs and no rate control (the queue fills until it drops)",
});

/// One DCQCN parameter: its mlx5 name, unit, accepted range and ConnectX's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CcParamInfo {
    /// The mlx5 debugfs name with its `rp_`/`np_` prefix (`rp_ai_rate`).
    pub name: &'static str,
    /// Unit of the value.
    pub unit: &'static str,
    /// Smallest value accepted.
    pub min: u32,
    /// Largest value accepted.
    pub max: u32,
    /// ConnectX's default.
    pub default: u32,
}

macro_rules! cc_params {
    ($( $(#[$doc:meta])* $field:ident = $default:literal, $unit:literal, $min:literal ..= $max:expr; )*) => {
        /// ConnectX's DCQCN parameters, by their mlx5 names (`--cc-param name=value`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        pub struct CcParams {
            $( $(#[$doc])* pub $field: u32, )*
        }

        impl Default for CcParams {
            fn default() -> Self {
                CcParams { $( $field: $default, )* }
            }
        }

        impl CcParams {
            /// Every parameter, in mlx5's order.
            pub const INFO: &'static [CcParamInfo] = &[
                $( CcParamInfo { name: stringify!($field), unit: $unit, min: $min, max: $max, default: $default }, )*
            ];

            fn slot(&mut self, name: &str) -> Option<&mut u32> {
                match name {
                    $( stringify!($field) => Some(&mut self.$field), )*
                    _ => None,
                }
            }

            /// Each value with its name, in [`INFO`](Self::INFO)'s order.
            pub fn by_name(&self) -> Vec<(&'static str, u32)> {
                vec![$( (stringify!($field), self.$field), )*]
            }
        }
    };
}

cc_params! {
    /// On every CNP, the target rate becomes the current rate (0: only as `rp_clamp_tgt_rate_ati` says).
    rp_clamp_tgt_rate = 0, "0/1", 0..=1;
    /// On a CNP, the target rate becomes the current rate if a timer expiry raised the rate since the last cut.
    rp_clamp_tgt_rate_ati = 1, "0/1", 0..=1;
    /// T: the rate-increase timer's period.
    rp_time_reset = 300, "µs", 1..=u32::MAX;
    /// B: the bytes sent that make one byte-counter expiry.
    rp_byte_reset = 32767, "bytes", 1..=u32::MAX;
    /// F: expiries of the timer or the byte counter before fast recovery gives way to additive increase.
    rp_threshold = 1, "expiries", 1..=31;
    /// R_AI: the target rate's step in additive increase.
    rp_ai_rate = 5, "Mb/s", 1..=u32::MAX;
    /// The most a queue pair is paced to (0: its starting rate; see docs/congestion.md).
    rp_max_rate = 0, "Mb/s", 0..=u32::MAX;
    /// R_HAI: the target rate's step in hyper increase (times the stage).
    rp_hai_rate = 50, "Mb/s", 1..=u32::MAX;
    /// A cut leaves at least this share of the rate.
    rp_min_dec_fac = 50, "%", 0..=100;
    /// The rate a cut never goes below.
    rp_min_rate = 1, "Mb/s", 1..=u32::MAX;
    /// The current and target rate a first CNP sets (0: cut as any CNP does).
    rp_rate_to_set_on_first_cnp = 0, "Mb/s", 0..=u32::MAX;
    /// α's gain: g = (1024 − rp_dce_tcp_g) / 1024 (1019: g = 5/1024; the paper's 1/256 is 1020).
    rp_dce_tcp_g = 1019, "1/1024", 0..=1023;
    /// K: α's update period.
    rp_dce_tcp_rtt = 1, "µs", 1..=131071;
    /// The least time between two rate cuts; CNPs in between are handled without a cut.
    rp_rate_reduce_monitor_period = 4, "µs", 0..=u32::MAX;
    /// α at a queue pair's first CNP.
    rp_initial_alpha_value = 1023, "1/1024", 0..=1023;
    /// A cut takes α / 2^(rp_gd − 10) of the rate (11: the paper's α/2).
    rp_gd = 11, "log2", 10..=15;
    /// The least time between two CNPs a queue pair sends.
    np_min_time_between_cnps = 4, "µs", 0..=4095;
    /// The DSCP of CNPs (what the egress marks them with).
    np_cnp_dscp = 48, "DSCP", 0..=63;
    /// The 802.1p priority of CNPs.
    np_cnp_prio = 6, "PCP", 0..=7;
}

/// A `--cc-param` that is not `name=value` with a known name and a value in its range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CcParamError {
    /// Not `name=value`.
    #[error("--cc-param {0:?}: expected name=value (e.g. rp_ai_rate=10); names: {names}", names = names())]
    Syntax(String),
    /// An unknown name.
    #[error("--cc-param {0:?}: no such DCQCN parameter; the names (ConnectX's) are: {names}", names = names())]
    Name(String),
    /// A value that is no number or out of range.
    #[error(
        "--cc-param {name}={value:?}: {name} takes a whole number from {min} to {max} ({unit})"
    )]
    Value {
        /// The parameter.
        name: &'static str,
        /// What was given.
        value: String,
        /// Its least value.
        min: u32,
        /// Its largest value.
        max: u32,
        /// Its unit.
        unit: &'static str,
    },
}

fn names() -> String {
    CcParams::INFO
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rate and CNP timers of [`CcParams::slow_link`], µs.
pub(crate) const SLOW_LINK_TIMER_US: u32 = 300;

impl CcParams {
    /// DCQCN for a slow link with a long round trip, as `roce_compare --congestion` runs it
    /// (docs/congestion.md, "DCQCN's parameters in the study"): the SIGCOMM'15 paper's rules
    /// (F = 5, g = 1/256, R_T ← R_C on every cut, a 10 MB byte counter) with K, T and the least time
    /// between CNPs and between cuts at 300 µs, a round trip of that link (the
    /// paper's 55 µs are a few of its 40 Gb/s fabric's), R_AI 5 Mb/s (ConnectX's; 0.5 % of 1 Gb/s)
    /// and R_HAI five times it (the paper's ratio), and the senders' line rate `line_mbps`.
    pub fn slow_link(line_mbps: u32) -> CcParams {
        CcParams {
            rp_threshold: 5,
            rp_dce_tcp_g: 1020,
            rp_clamp_tgt_rate: 1,
            rp_byte_reset: 10_000_000,
            rp_time_reset: SLOW_LINK_TIMER_US,
            rp_dce_tcp_rtt: SLOW_LINK_TIMER_US,
            np_min_time_between_cnps: SLOW_LINK_TIMER_US,
            rp_rate_reduce_monitor_period: SLOW_LINK_TIMER_US,
            rp_ai_rate: 5,
            rp_hai_rate: 25,
            rp_max_rate: line_mbps,
            ..CcParams::default()
        }
    }

    /// Applies one `name=value`.
    pub fn set(&mut self, spec: &str) -> Result<(), CcParamError> {
        let Some((name, value)) = spec.split_once('=') else {
            return Err(CcParamError::Syntax(spec.to_string()));
        };
        let (name, value) = (name.trim(), value.trim());
        let Some(info) = Self::INFO.iter().find(|p| p.name == name) else {
            return Err(CcParamError::Name(name.to_string()));
        };
        let bad = || CcParamError::Value {
            name: info.name,
            value: value.to_string(),
            min: info.min,
            max: info.max,
            unit: info.unit,
        };
        let v: u32 = value.parse().map_err(|_| bad())?;
        if !(info.min..=info.max).contains(&v) {
            return Err(bad());
        }
        *self
            .slot(name)
            .expect("INFO and the fields list the same names") = v;
        Ok(())
    }

    /// The parameters `specs` set over the defaults.
    pub fn parse<'a>(specs: impl IntoIterator<Item = &'a str>) -> Result<CcParams, CcParamError> {
        let mut p = CcParams::default();
        for s in specs {
            p.set(s)?;
        }
        Ok(p)
    }

    /// The parameters that differ from ConnectX's defaults, as `name=value`.
    pub fn changed(&self) -> Vec<String> {
        let d = CcParams::default().by_name();
        self.by_name()
            .into_iter()
            .zip(d)
            .filter(|(a, b)| a.1 != b.1)
            .map(|((n, v), _)| format!("{n}={v}"))
            .collect()
    }
}

impl fmt::Display for CcParams {
    /// The parameters that differ from the defaults (`defaults` when none does).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.changed();
        if c.is_empty() {
            f.write_str("defaults")
        } else {
            f.write_str(&c.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_defaults_and_ranges_are_connectx_s() {
        let p = CcParams::default();
        assert_eq!((p.rp_ai_rate, p.rp_hai_rate, p.rp_gd), (5, 50, 11));
        assert_eq!((p.rp_dce_tcp_g, p.rp_initial_alpha_value), (1019, 1023));
        assert_eq!((p.rp_time_reset, p.rp_byte_reset), (300, 32767));
        assert_eq!((p.np_cnp_dscp, p.np_cnp_prio), (48, 6));
        assert_eq!(CcParams::INFO.len(), 19);
        assert_eq!(p.to_string(), "defaults");
    }

    #[test]
    fn set_takes_known_names_in_range_and_names_what_is_wrong() {
        let p = CcParams::parse(["rp_ai_rate=10", " np_min_time_between_cnps = 50"]).unwrap();
        assert_eq!((p.rp_ai_rate, p.np_min_time_between_cnps), (10, 50));
        assert_eq!(p.to_string(), "rp_ai_rate=10,np_min_time_between_cnps=50");
        let e = CcParams::parse(["rp_bogus=1"]).unwrap_err().to_string();
        assert!(
            e.contains("rp_bogus") && e.contains("rp_ai_rate") && e.contains("np_cnp_prio"),
            "{e}"
        );
        let e = CcParams::parse(["np_cnp_dscp=64"]).unwrap_err().to_string();
        assert!(e.contains("np_cnp_dscp") && e.contains("0 to 63"), "{e}");
        let e = CcParams::parse(["rp_gd=x"]).unwrap_err().to_string();
        assert!(e.contains("10 to 15"), "{e}");
        assert!(matches!(
            CcParams::parse(["rp_gd"]),
            Err(CcParamError::Syntax(_))
        ));
        assert_eq!(
            "none".parse::<CongestionControl>(),
            Ok(CongestionControl::None)
        );
        assert!(
            "cubic"
                .parse::<CongestionControl>()
                .unwrap_err()
                .to_string()
                .contains("dcqcn or none")
        );
    }
}
