//! The simulated hardware and nothing else: CPUs (clock, TLBs, perf counters, the PCID
//! register), memory nodes (latency, bandwidth, the physical frame ranges) and the cost table
//! of what operations take on this machine. Kernel state lives in `kernel.rs`.

pub mod cache;
pub mod cpu;
pub mod lapic;
pub mod tlb;

use crate::config::Config;
use crate::cost::CostTable;
use cpu::Cpu;

/// A memory node as the hardware sees it: its latency, bandwidth and the traffic it served.
#[derive(Clone, Debug)]
pub struct MemoryNode {
    /// Memory latency in cycles, already divided by the MLP factor: [read, write].
    pub latency_cycles: [u32; 2],
    pub read_bandwidth_gbps: f64,
    pub write_bandwidth_gbps: f64,
    /// Memory accesses served from this node (after the TLB and the cache filter).
    pub accesses: u64,
}

/// The node of frame `pfn`, from the first pfn past each node's frames (`Machine::node_end_pfn`).
#[inline(always)]
pub fn node_of(node_end_pfn: &[u32], pfn: u32) -> usize {
    let mut n = 0;
    while pfn >= node_end_pfn[n] {
        n += 1;
    }
    n
}

pub struct Machine {
    pub cpus: Vec<Cpu>,
    pub mem: Vec<MemoryNode>,
    /// First pfn past each node's frames (the physical address map).
    pub node_end_pfn: Vec<u32>,
    pub cycles_per_ns: f64,
    pub cost: CostTable,
    /// `machine.shared_core`: the CPUs take turns on one core.
    pub shared_core: bool,
    /// `machine.vcpu_turns`: ... in QEMU 7.2's round-robin turns (sim/turns.rs).
    pub vcpu_turns: bool,
    /// The guest's LAPIC clockevent `mult` (shift 32), from `machine.lapic_timer_period`.
    pub lapic_mult: u64,
    /// `machine.lapic_handler_phase`: timer interrupt handlers end at a drawn point of the
    /// LAPIC's count.
    pub lapic_handler_phase: bool,
    /// `machine.tick_offset_ns`: how far into a jiffy the workload starts.
    pub tick_offset_ns: u64,
    /// THP is not `never`: a TLB miss also looks for a 2 MiB entry.
    pub huge_tlb: bool,
}

impl Machine {
    /// Build the hardware a config describes: CPUs on their nodes, node latencies and the
    /// physical frame ranges, node by node in order.
    pub fn new(cfg: &Config) -> Machine {
        let m = &cfg.machine;
        let mut cpu_node = vec![0u8; m.cpus as usize];
        for (n, cpus) in cfg.node_cpus().iter().enumerate() {
            for &c in cpus {
                cpu_node[c as usize] = n as u8;
            }
        }
        let cycles_per_ns = m.cpu_ghz;
        let cpus = (0..m.cpus as usize)
            .map(|c| Cpu::new(c as u32, cpu_node[c], &m.tlb, m.cache_kib, m.cache_ways))
            .collect();
        let lat = |ns: f64| ((ns * cycles_per_ns) / m.mlp).round().max(1.0) as u32;
        let mem = m
            .nodes
            .iter()
            .map(|nc| MemoryNode {
                latency_cycles: [lat(nc.read_latency_ns), lat(nc.write_latency_ns)],
                read_bandwidth_gbps: nc.read_bandwidth_gbps,
                write_bandwidth_gbps: nc.write_bandwidth_gbps,
                accesses: 0,
            })
            .collect();
        let mut end = 0u32;
        let node_end_pfn = m
            .nodes
            .iter()
            .map(|n| {
                end += (n.capacity_mib * 256) as u32;
                end
            })
            .collect();
        Machine {
            cpus,
            mem,
            node_end_pfn,
            cycles_per_ns,
            cost: cfg.cost.clone(),
            shared_core: m.shared_core,
            vcpu_turns: m.vcpu_turns,
            lapic_mult: lapic::clockevent_mult(m.lapic_timer_period, crate::kernel::CONFIG_HZ),
            lapic_handler_phase: m.lapic_handler_phase,
            tick_offset_ns: m.tick_offset_ns,
            huge_tlb: cfg.vm.transparent_hugepage_enabled != crate::config::ThpEnabled::Never,
        }
    }

    /// Charge kernel cycles to a CPU.
    #[inline]
    pub fn charge_sys(&mut self, cpu: usize, cycles: u64) {
        let c = &mut self.cpus[cpu];
        let cycles = cycles * c.share;
        c.clock += cycles;
        c.sys_cycles += cycles;
    }

    /// The node a physical frame belongs to.
    #[inline]
    pub fn node_of_pfn(&self, pfn: u32) -> usize {
        node_of(&self.node_end_pfn, pfn)
    }

    pub fn ns_to_cycles(&self, ns: f64) -> u64 {
        (ns * self.cycles_per_ns) as u64
    }

    pub fn cycles_to_s(&self, cycles: u64) -> f64 {
        cycles as f64 / (self.cycles_per_ns * 1e9)
    }

    /// Simulated milliseconds at CPU `c` (jiffies_to_msecs(jiffies)).
    pub fn now_ms(&self, c: usize) -> u64 {
        (self.cpus[c].clock as f64 / (self.cycles_per_ns * 1e6)) as u64
    }

    /// Simulated time at the end: the latest CPU clock.
    pub fn end_cycles(&self) -> u64 {
        self.cpus.iter().map(|c| c.clock).max().unwrap_or(0)
    }
}
