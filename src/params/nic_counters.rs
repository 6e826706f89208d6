//! What `-W/--report-counters` asks for: perftest's comma-separated list of counters under an RDMA
//! port's sysfs directory, plus `ethtool/NAME`, `default` and `none`. Parsed here, resolved against
//! the device by the verbs transport.

/// The prefix that names a statistic of the port's netdev (`ethtool -S`) rather than a sysfs file.
pub const ETHTOOL_PREFIX: &str = "ethtool/";

/// What `-W` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterRequest {
    /// The default set (`-W` absent, or `default` in its list).
    pub default_set: bool,
    /// The names given, in order, without repeats: paths under the port's directory, or
    /// `ethtool/<name>`.
    pub named: Vec<String>,
}

impl Default for CounterRequest {
    /// `-W` absent: the default set.
    fn default() -> Self {
        CounterRequest {
            default_set: true,
            named: Vec::new(),
        }
    }
}

impl CounterRequest {
    /// Nothing at all (`-W none`).
    pub fn none() -> CounterRequest {
        CounterRequest {
            default_set: false,
            named: Vec::new(),
        }
    }

    /// True when nothing is to be read.
    pub fn is_empty(&self) -> bool {
        !self.default_set && self.named.is_empty()
    }
}

/// Parses `-W`'s list: comma-separated paths under the port's sysfs directory, `ethtool/<name>`,
/// `default` (the default set), or `none` alone.
pub fn parse_request(list: &str) -> Result<CounterRequest, String> {
    let items: Vec<&str> = list.split(',').map(str::trim).collect();
    if items == ["none"] {
        return Ok(CounterRequest::none());
    }
    let mut req = CounterRequest {
        default_set: false,
        named: Vec::new(),
    };
    for item in items {
        match item {
            "" => {
                return Err(format!(
                    "'{list}' has an empty name; give comma-separated counters, e.g. counters/port_xmit_data,hw_counters/out_of_buffer"
                ));
            }
            "none" => return Err("none turns every counter off, so it stands alone".into()),
            "default" => req.default_set = true,
            name => {
                check_name(name)?;
                if !req.named.iter().any(|n| n == name) {
                    req.named.push(name.to_string());
                }
            }
        }
    }
    Ok(req)
}

/// A name stays under the port's directory: relative, no `.` or `..`, no empty part.
fn check_name(name: &str) -> Result<(), String> {
    let bad = name.starts_with('/')
        || name
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if bad {
        return Err(format!(
            "'{name}' is not a counter under the port's directory; name one as counters/NAME, \
             hw_counters/NAME or {ETHTOOL_PREFIX}NAME (what `ethtool -S` of the port's netdev lists)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(list: &str) -> CounterRequest {
        parse_request(list).unwrap()
    }

    #[test]
    fn the_list_is_parsed_as_perftest_spells_it() {
        assert_eq!(
            req("counters/port_xmit_data,hw_counters/out_of_buffer"),
            CounterRequest {
                default_set: false,
                named: vec![
                    "counters/port_xmit_data".into(),
                    "hw_counters/out_of_buffer".into()
                ]
            }
        );
        assert_eq!(req("none"), CounterRequest::none());
        assert!(req("none").is_empty());
        assert!(req("default").default_set);
        assert_eq!(req("a/b,a/b").named, ["a/b"], "a repeat is read once");
        for bad in [
            "",
            "a,,b",
            "/sys/x",
            "../x",
            "counters/../../x",
            "hw_counters/",
            "none,default",
        ] {
            let e = parse_request(bad).unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
        assert!(parse_request("a,,b").unwrap_err().contains("empty name"));
        assert!(parse_request("../x").unwrap_err().contains("counters/NAME"));
    }
}
