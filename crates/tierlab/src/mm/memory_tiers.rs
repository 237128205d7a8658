//! Memory tiers from abstract distance (mm/memory-tiers.c). The core issue only labels nodes;
//! demotion targets come with the tiering work.

use crate::config::MachineConfig;

/// MEMTIER_ADISTANCE_DRAM
pub const MEMTIER_ADISTANCE_DRAM: u64 = 4 * 128 + 64;
/// MEMTIER_CHUNK_BITS
pub const MEMTIER_CHUNK_BITS: u32 = 7;

/// mt_perf_to_adistance: scale DRAM's distance by latency and inverse bandwidth, relative to
/// the first node with CPUs (the reference DRAM node).
pub fn node_adistance(m: &MachineConfig, nid: usize) -> u64 {
    let reference = m
        .nodes
        .iter()
        .position(|n| !n.cpus.trim().is_empty())
        .unwrap_or(0);
    let r = &m.nodes[reference];
    let n = &m.nodes[nid];
    let lat = (n.read_latency_ns + n.write_latency_ns) / (r.read_latency_ns + r.write_latency_ns);
    let bw = (r.read_bandwidth_gbps + r.write_bandwidth_gbps)
        / (n.read_bandwidth_gbps + n.write_bandwidth_gbps);
    (MEMTIER_ADISTANCE_DRAM as f64 * lat * bw) as u64
}

/// The memory_tierN device id of a node: adistance rounded down to a 128-unit chunk.
pub fn node_tier_id(m: &MachineConfig, nid: usize) -> u64 {
    node_adistance(m, nid) >> MEMTIER_CHUNK_BITS
}
