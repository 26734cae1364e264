//! The EFA RDM protocol v4 (efa-reference §1–§7): reliable datagram messaging, tagged
//! messaging, emulated RMA and atomics over a device that offers unordered reliable datagrams.

pub mod pkt;
