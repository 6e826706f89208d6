//! HDR-histogram summaries (min, max, median, mean, stdev, percentiles), bandwidth and message rate.
