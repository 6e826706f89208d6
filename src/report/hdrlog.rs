//! HdrHistogram interval logs (`.hlog`), in the text format HdrHistogram's own tools load.
//!
//! Those tools: HistogramLogProcessor, HdrHistogramVisualizer, hdr-plot, the Go and Python readers.
//! A latency run is written as one interval holding its whole histogram, tagged with the transport, in
//! HdrHistogram's compressed V2 encoding; values are one-way nanoseconds.

use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use std::time::{Duration, SystemTime};

/// A tag HdrHistogram accepts: no spaces, commas or line breaks (`RoCE v2 (soft)` -> `RoCE_v2_(soft)`).
pub(crate) fn tag_of(label: &str) -> String {
    label
        .chars()
        .map(|c| match c {
            ' ' | ',' | '\r' | '\n' => '_',
            c => c,
        })
        .collect()
}

/// The log text: a comment, the start time, and one interval of `duration` holding `h`, tagged `tag`.
pub(crate) fn interval_log(
    h: &Histogram<u64>,
    tag: &str,
    comment: &str,
    start: SystemTime,
    duration: Duration,
) -> Result<Vec<u8>, String> {
    let tag = tag_of(tag);
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    // Headers first, as HdrHistogram's Java writer lays them out: format version, comments, times.
    IntervalLogWriterBuilder::new()
        .add_comment("[Histogram log format version 1.3]")
        .add_comment(comment)
        .add_comment("values are one-way latencies in nanoseconds; Interval_Max is in microseconds")
        .with_start_time(start)
        .with_base_time(start)
        .begin_log_with(&mut out, &mut serializer)
        .map_err(|e| e.to_string())?;
    // The column legend line that HdrHistogram tools expect before the intervals (the crate's writer
    // has no call for it; its reader, like Java's, skips it).
    out.extend_from_slice(
        b"\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
    );
    let mut writer = IntervalLogWriterBuilder::new()
        // Interval_Max is for human readers only; µs is the unit the reports use.
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut out, &mut serializer)
        .map_err(|e| e.to_string())?;
    writer
        .write_histogram(h, Duration::ZERO, duration, Tag::new(&tag))
        .map_err(|e| format!("{e:?}"))?;
    drop(writer);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::new_latency_histogram;
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    #[test]
    fn log_reads_back_with_the_crates_reader() {
        let mut h = new_latency_histogram();
        for v in [1200u64, 1300, 1300, 5000, 250_000] {
            h.record(v).unwrap();
        }
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_947_865);
        let bytes = interval_log(
            &h,
            "RoCE v2 (soft)",
            "roceperf write_lat 2 B",
            start,
            Duration::from_millis(1500),
        )
        .unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.starts_with("#[Histogram log format version 1.3]\n#roceperf write_lat 2 B\n"),
            "{text}"
        );
        assert!(
            text.contains("\n\"StartTimestamp\",\"Interval_Length\""),
            "{text}"
        );
        assert!(text.contains("#[StartTime: 1795947865.000"), "{text}");
        let mut intervals = 0;
        let mut saw_start = false;
        for entry in IntervalLogIterator::new(&bytes) {
            match entry.unwrap() {
                LogEntry::StartTime(t) => {
                    saw_start = true;
                    assert_eq!(t.as_secs(), 1_795_947_865);
                }
                LogEntry::BaseTime(_) => {}
                LogEntry::Interval(i) => {
                    intervals += 1;
                    assert_eq!(i.tag().map(|t| t.as_str()), Some("RoCE_v2_(soft)"));
                    assert_eq!(i.duration(), Duration::from_millis(1500));
                    assert!((i.max() - 250.0).abs() < 0.5, "max {}", i.max());
                    use base64::Engine;
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(i.encoded_histogram())
                        .unwrap();
                    let back: Histogram<u64> = Deserializer::new()
                        .deserialize(&mut raw.as_slice())
                        .unwrap();
                    assert_eq!(back, h);
                }
            }
        }
        assert!(saw_start);
        assert_eq!(intervals, 1);
    }

    #[test]
    fn tags_lose_forbidden_characters() {
        assert_eq!(tag_of("RoCE v1 (soft, veth)"), "RoCE_v1_(soft__veth)");
        assert!(Tag::new(&tag_of("a b,c\nd")).is_some());
    }
}
