//! The TCP baseline transport.
