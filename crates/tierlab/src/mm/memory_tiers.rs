//! Memory tiers from abstract distance (mm/memory-tiers.c): tiers of 128 units,
//! `node_is_toptier`, demotion targets (`establish_demotion_targets`) and the fallback mask.

use crate::config::Config;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// MEMTIER_ADISTANCE_DRAM
pub const MEMTIER_ADISTANCE_DRAM: u64 = 4 * 128 + 64;
/// MEMTIER_CHUNK_BITS
pub const MEMTIER_CHUNK_BITS: u32 = 7;
pub const MEMTIER_CHUNK_SIZE: u64 = 1 << MEMTIER_CHUNK_BITS;

/// mt_perf_to_adistance: scale DRAM's distance by latency and inverse bandwidth relative to
/// the first node with CPUs (the reference DRAM node); an explicit `adistance` wins.
pub fn node_adistance(cfg: &Config, nid: usize) -> u64 {
    let m = &cfg.machine;
    if let Some(a) = m.nodes[nid].adistance {
        return a;
    }
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

/// The tiers of a machine and the demotion paths between them.
#[derive(Clone, Debug)]
pub struct MemoryTiers {
    /// Per node: the adistance_start of its tier (sysfs memory_tierN is this >> 7).
    pub tier_start: Vec<u64>,
    /// Per node: node_is_toptier.
    pub toptier: Vec<bool>,
    /// Per node: node_demotion[n].preferred (nearest nodes of the next lower tier).
    pub preferred: Vec<Vec<u8>>,
    /// Per node: memtier->lower_tier_mask (every node of every slower tier).
    pub lower_tier_mask: Vec<Vec<u8>>,
}

impl MemoryTiers {
    /// set_node_memory_tier for every node, then establish_demotion_targets.
    pub fn new(cfg: &Config) -> MemoryTiers {
        let n = cfg.machine.nodes.len();
        let tier_start: Vec<u64> = (0..n)
            .map(|i| node_adistance(cfg, i) / MEMTIER_CHUNK_SIZE * MEMTIER_CHUNK_SIZE)
            .collect();
        let mut tiers: Vec<u64> = tier_start.clone();
        tiers.sort_unstable();
        tiers.dedup();
        // Walking from the slowest tier, the first one holding a node with CPUs ends the top
        // tier: it and every faster tier are top tier.
        let has_cpus = |i: usize| !cfg.machine.nodes[i].cpus.trim().is_empty();
        let top_tier_adistance = tiers
            .iter()
            .rev()
            .find(|&&t| (0..n).any(|i| tier_start[i] == t && has_cpus(i)))
            .map(|t| t + MEMTIER_CHUNK_SIZE - 1)
            .unwrap_or(u64::MAX);
        let toptier = tier_start
            .iter()
            .map(|&t| t <= top_tier_adistance)
            .collect();
        let mut preferred = vec![Vec::new(); n];
        let mut lower_tier_mask = vec![Vec::new(); n];
        for i in 0..n {
            let pos = tiers.iter().position(|&t| t == tier_start[i]).unwrap_or(0);
            lower_tier_mask[i] = (0..n as u8)
                .filter(|&j| tier_start[j as usize] > tier_start[i])
                .collect();
            let Some(&next) = tiers.get(pos + 1) else {
                continue;
            };
            let cand: Vec<usize> = (0..n).filter(|&j| tier_start[j] == next).collect();
            let best = cand
                .iter()
                .map(|&j| cfg.distance(i, j))
                .min()
                .unwrap_or(u32::MAX);
            preferred[i] = cand
                .into_iter()
                .filter(|&j| cfg.distance(i, j) == best)
                .map(|j| j as u8)
                .collect();
        }
        MemoryTiers {
            tier_start,
            toptier,
            preferred,
            lower_tier_mask,
        }
    }

    /// node_is_toptier
    pub fn node_is_toptier(&self, nid: usize) -> bool {
        self.toptier[nid]
    }

    /// next_demotion_node: a random preferred target, or None.
    pub fn next_demotion_node(&self, nid: usize, rng: &mut ChaCha8Rng) -> Option<usize> {
        let p = &self.preferred[nid];
        match p.len() {
            0 => None,
            1 => Some(p[0] as usize),
            n => Some(p[rng.gen_range(0..n)] as usize),
        }
    }

    /// The memory_tierN device id of a node.
    pub fn tier_id(&self, nid: usize) -> u64 {
        self.tier_start[nid] >> MEMTIER_CHUNK_BITS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn cfg(nodes: &str, distance: &str) -> Config {
        let text = format!("[machine]\ncpus = 4\n{distance}\n{nodes}\n[workload]\ntype = \"t\"\n");
        Config::from_str_with(&text, "t.toml", None, &[]).unwrap()
    }

    const DRAM: &str = "[[machine.nodes]]\ncapacity_mib = 64\nread_latency_ns = 100\nwrite_latency_ns = 100\nread_bandwidth_gbps = 100\nwrite_bandwidth_gbps = 100\ncpus = \"0-3\"\n";

    #[test]
    fn dram_is_tier_4_and_a_slow_node_sits_lower() {
        // CXL at 2x latency, 1/2 bandwidth: adist = 576 * 2 * 2 = 2304 → tier 18.
        let cxl = "[[machine.nodes]]\ncapacity_mib = 64\nread_latency_ns = 200\nwrite_latency_ns = 200\nread_bandwidth_gbps = 50\nwrite_bandwidth_gbps = 50\n";
        let c = cfg(&format!("{DRAM}{cxl}"), "");
        assert_eq!(node_adistance(&c, 0), 576);
        assert_eq!(node_adistance(&c, 1), 2304);
        let t = MemoryTiers::new(&c);
        assert_eq!(t.tier_id(0), 4);
        assert_eq!(t.tier_id(1), 18);
        assert!(t.node_is_toptier(0) && !t.node_is_toptier(1));
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(t.next_demotion_node(0, &mut rng), Some(1));
        assert_eq!(
            t.next_demotion_node(1, &mut rng),
            None,
            "the last tier demotes nowhere"
        );
        assert_eq!(t.lower_tier_mask[0], vec![1]);
    }

    #[test]
    fn demotion_prefers_the_nearest_lower_nodes_and_ties_are_random() {
        let slow = |a: u64| {
            format!("[[machine.nodes]]\ncapacity_mib = 64\nread_latency_ns = 300\nwrite_latency_ns = 300\nadistance = {a}\n")
        };
        // Nodes 1 and 2 in tier 22 (2880), node 3 in tier 30: 0's targets are the nearest of 1, 2.
        let nodes = format!("{DRAM}{}{}{}", slow(2880), slow(2880), slow(3900));
        let d =
            "distance = [[10, 20, 30, 20], [20, 10, 20, 20], [30, 20, 10, 20], [20, 20, 20, 10]]";
        let t = MemoryTiers::new(&cfg(&nodes, d));
        assert_eq!(t.preferred[0], vec![1], "node 1 is nearer than node 2");
        assert_eq!(t.preferred[1], vec![3]);
        assert_eq!(t.lower_tier_mask[0], vec![1, 2, 3]);
        let ties =
            "distance = [[10, 20, 20, 30], [20, 10, 20, 20], [20, 20, 10, 20], [30, 20, 20, 10]]";
        let t = MemoryTiers::new(&cfg(&nodes, ties));
        assert_eq!(t.preferred[0], vec![1, 2]);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let picks: Vec<_> = (0..64)
            .map(|_| t.next_demotion_node(0, &mut rng).unwrap())
            .collect();
        assert!(
            picks.contains(&1) && picks.contains(&2),
            "random among ties"
        );
    }

    #[test]
    fn a_cpu_less_node_as_fast_as_dram_is_top_tier() {
        let fast = "[[machine.nodes]]\ncapacity_mib = 64\nread_latency_ns = 100\nwrite_latency_ns = 100\nread_bandwidth_gbps = 100\nwrite_bandwidth_gbps = 100\n";
        let t = MemoryTiers::new(&cfg(&format!("{DRAM}{fast}"), ""));
        assert!(t.node_is_toptier(1));
        assert_eq!(
            t.next_demotion_node(0, &mut ChaCha8Rng::seed_from_u64(0)),
            None
        );
    }
}
