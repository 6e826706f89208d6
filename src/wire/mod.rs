//! RoCE packet formats: Ethernet, GRH, IPv4, IPv6, UDP, BTH and extension headers, ICRC.
