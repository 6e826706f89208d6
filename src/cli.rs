//! perftest-compatible command-line flags (clap derive) turned into validated options.
