//! [`Param`]: the run parameters that transport messages refer to, each displayed as the flag that
//! sets it (`-x`, `--io`), so a transport can tell the user what to change without knowing the
//! command line, and the spelling of every flag lives in one place.

use std::fmt;

/// A run parameter, displayed as its command-line flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Param {
    /// `-d`: the RDMA device or network interface.
    Device,
    /// `-x`: the GID index.
    GidIndex,
    /// `--roce`: RoCE v1 or v2.
    Roce,
    /// `--ipv6`: prefer IPv6 GIDs and addresses.
    Ipv6,
    /// `-m`: the path MTU.
    Mtu,
    /// `-q`: queue pairs.
    Qps,
    /// `-t`: send-queue depth.
    TxDepth,
    /// `-r`: receive-queue depth.
    RxDepth,
    /// `-I`: largest inline message.
    Inline,
    /// `-o`: outstanding RDMA READs.
    OutReads,
    /// `--io`: the soft transport's I/O backend.
    Io,
    /// `--bind`: the soft transport's local address.
    Bind,
    /// `--transport`: verbs, soft or tcp.
    Transport,
}

impl Param {
    /// The flag as typed on the command line.
    pub(crate) const fn flag(self) -> &'static str {
        match self {
            Param::Device => "-d",
            Param::GidIndex => "-x",
            Param::Roce => "--roce",
            Param::Ipv6 => "--ipv6",
            Param::Mtu => "-m",
            Param::Qps => "-q",
            Param::TxDepth => "-t",
            Param::RxDepth => "-r",
            Param::Inline => "-I",
            Param::OutReads => "-o",
            Param::Io => "--io",
            Param::Bind => "--bind",
            Param::Transport => "--transport",
        }
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.flag())
    }
}
