//! `[machine]`: the simulated hardware: architecture, clock, CPUs, caches, TLBs and memory
//! nodes. Ranges here are the hardware's or tierlab's; the geometry and CPU-list rules that
//! involve several keys are checked in `validate.rs`.

use super::knob::{knob_table, KnobValue, Range, INT_MAX, TIERLAB, UINT_MAX};
use serde::{Deserialize, Serialize};

/// The instruction-set architecture whose TLB and flush rules the run follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Arch {
    /// x86-64: PCID-tagged TLBs, IPI shootdowns (arch/x86/mm/tlb.c).
    #[default]
    X86,
    /// arm64: ASID-tagged TLBs, broadcast TLBI and DSB, no IPIs (arch/arm64/include/asm/tlbflush.h).
    Arm64,
}

impl Arch {
    /// The names `machine.arch` accepts, the first being the canonical one.
    pub const ACCEPTED: &'static [&'static str] = &["x86", "x86_64", "arm64", "aarch64"];
}

impl TryFrom<String> for Arch {
    type Error = String;
    fn try_from(name: String) -> Result<Self, String> {
        match name.as_str() {
            "x86" | "x86_64" => Ok(Arch::X86),
            "arm64" | "aarch64" => Ok(Arch::Arm64),
            _ => Err(format!(
                "\"{name}\" is not an architecture tierlab models; accepted: \"x86\" (alias \"x86_64\"), \"arm64\" (alias \"aarch64\")"
            )),
        }
    }
}

impl From<Arch> for String {
    fn from(arch: Arch) -> String {
        match arch {
            Arch::X86 => "x86".into(),
            Arch::Arm64 => "arm64".into(),
        }
    }
}

impl KnobValue for Arch {
    fn to_toml(&self) -> String {
        format!("{:?}", String::from(*self))
    }
}

knob_table! {
    /// `[machine]`: CPUs, caches and memory nodes.
    pub struct MachineConfig {
        /// Machine name, printed in reports.
        name: String = "machine".into(),
            path: TIERLAB, range: Range::Any, source: "tierlab";
        /// Architecture whose TLB and flush rules apply: x86 (IPI shootdowns) or arm64
        /// (broadcast TLBI and DSB).
        arch: Arch = Arch::X86,
            path: TIERLAB,
            range: Range::OneOf(Arch::ACCEPTED),
            source: "tierlab arch/x86.rs, arch/arm64.rs";
        /// Core clock, GHz; simulated time is kept in these cycles.
        cpu_ghz: f64 = 2.2,
            path: TIERLAB,
            range: Range::Real { min: 0.1, min_open: false, max: 20.0, max_open: true },
            source: "tierlab: a plausible clock rate (no Linux server clocks below 100 MHz or near 20 GHz)";
        /// Number of CPUs.
        cpus: u32,
            path: TIERLAB,
            range: Range::Int(1, 256),
            source: "tierlab: CpuMask holds 256 CPUs (mm/mm_types.rs)";
        /// The data cache one CPU can count on, KiB: its share of every data or unified cache
        /// level (cacheinfo's size_data in seed 002's patch 2, v2). 0: unknown (no cacheinfo),
        /// so the allocator keeps no batch for it (PCPF_FREE_HIGH_BATCH stays clear).
        data_cache_per_cpu_kib: u64 = 0,
            path: "/sys/devices/system/cpu/cpu*/cache/index*/size, shared_cpu_map",
            range: Range::Int(0, 1 << 30),
            source: "drivers/base/cacheinfo.c (seed 002 patch 2)";
        /// Memory-level parallelism: how many misses overlap on average (latency is divided by it).
        mlp: f64 = 4.0,
            path: TIERLAB, range: Range::between(1.0, 64.0),
            source: "hardware: misses in flight per core are bounded by its L1D miss buffers (12 Skylake, 16 Golden Cove, 24 Zen 4); 64 leaves room";
        /// Physical address bits the CPU reports (CPUID 0x80000008, boot_cpu_data.x86_phys_bits;
        /// the kernel's x86_cache_bits): with L1TF they bound the swap offset, and so whether
        /// migration entries keep the A/D bits.
        phys_bits: u32 = 46,
            path: "/proc/cpuinfo \"address sizes\"",
            range: Range::Int(32, 52),
            source: "arch/x86/kernel/cpu/common.c get_cpu_address_sizes; 52 is the architectural maximum (MAX_PHYSADDR_BITS)";
        /// The CPU has the L1 Terminal Fault bug (X86_BUG_L1TF): Intel cores before Cascade
        /// Lake and Ice Lake; no AMD core.
        l1tf: bool = false,
            path: "/sys/devices/system/cpu/vulnerabilities/l1tf",
            range: Range::Any,
            source: "arch/x86/kernel/cpu/common.c cpu_vuln_whitelist (NO_L1TF) and cpu_set_bug_bits";
        /// Every CPU executes on one host core in turn, as QEMU's TCG does under `-icount`
        /// (accel/tcg/tcg-accel-ops-rr.c rr_cpu_thread_fn: one thread runs the vCPUs
        /// round-robin on one shared instruction clock), so work on a CPU takes as many times
        /// longer as CPUs are busy. For `validate`'s stand-in of an emulated guest.
        shared_core: bool = false,
            path: TIERLAB, range: Range::Any, source: "tierlab validate (QEMU TCG round-robin)";
        /// The CPUs take turns on one core as QEMU 7.2's TCG gives them under `-icount`,
        /// instead of `shared_core`'s even share: one CPU runs at a time, in CPU order, until
        /// the next timer deadline (a CPU's 250 Hz tick or a pending wake-up), until it halts,
        /// or until it arms the earliest timer (a pacing `clock_nanosleep`, slot plus 50 µs
        /// slack, or its tick re-armed after a timer interrupt, at the LAPIC's rounding),
        /// which kicks every vCPU and starts a round at the next; a thread past its slack arms
        /// a minimum-delta timer (1 µs), whose kick leaves the next CPU that microsecond.
        vcpu_turns: bool = false,
            path: TIERLAB, range: Range::Any,
            source: "QEMU 7.2 accel/tcg/tcg-accel-ops-rr.c rr_cpu_thread_fn, tcg-accel-ops-icount.c icount_get_limit, softmmu/cpus.c qemu_timer_notify_cb";
        /// Under `vcpu_turns`: the guest's calibrated local APIC timer ticks per jiffy at divide 1
        /// (`lapic_timer_period`), from which the kernel converts a timer's delta to the count it
        /// writes (`lapic_init_clockevent`: mult = div_sc(period / 16, TICK_NSEC, 32)), and so
        /// the few nanoseconds by which QEMU's LAPIC expiry differs between CPUs' ticks.
        lapic_timer_period: u32 = 3_999_971,
            path: TIERLAB, range: Range::Int(16, UINT_MAX),
            source: "measured: Debian 6.12.117 under QEMU 7.2 TCG -icount shift=0, `@lapic_timer_period` fetched by a kprobe on lapic_next_event (tierlab validate --trace); arch/x86/kernel/apic/apic.c";
        /// Under `vcpu_turns`: each timer interrupt's handler ends at a point of the LAPIC's
        /// 16 ns count drawn per (seed, CPU, time), as the guest's handlers vary by
        /// microseconds (the first re-arm after a jiffy: 3.1 to 21 µs, 5th to 95th
        /// percentile of 932 traced ticks), so which of two busy CPUs' re-armed ticks fires
        /// first is even odds at each tick. Off: every handler lasts
        /// `cost.timer_interrupt_cycles` exactly, and the same CPU wins every tick for as long
        /// as both stay busy.
        lapic_handler_phase: bool = true,
            path: TIERLAB, range: Range::Any,
            source: "measured: Debian 6.12.117 under QEMU 7.2 TCG -icount shift=0, the count each busy CPU's tick re-arm writes (kprobe on lapic_next_event, tierlab validate --trace); hw/intc/apic_common.c apic_next_timer";
        /// Under `vcpu_turns`: how far into a jiffy the workload starts, ns. The CPUs tick on
        /// the jiffy boundaries (tick_sched_timer, no skew_tick), so the first tick comes one
        /// jiffy less this after the start; 0 starts the workload on a boundary.
        /// `validate --start-jitter` moves it with the guest program's start.
        tick_offset_ns: u64 = 0,
            path: TIERLAB, range: Range::Int(0, 1_000_000_000 / crate::kernel::CONFIG_HZ - 1),
            source: "kernel/time/tick-sched.c tick_sched_timer (jiffy-aligned, tick_init_jiffy_update)";
        /// Per-CPU data cache filter (L2 plus a share of the LLC), KiB; 0 = off.
        /// Off by default: it costs about a third of the simulator's speed.
        cache_kib: u32 = 0,
            path: TIERLAB,
            range: Range::Rule("0, or a power-of-two number of 64-byte-line sets ≥ 256"),
            source: "tierlab machine/cache.rs";
        /// Ways of the cache filter.
        cache_ways: u32 = 8,
            path: TIERLAB,
            range: Range::Rule("1..=32 when cache_kib > 0"),
            source: "tierlab machine/cache.rs";
        /// TLB geometry of every CPU.
        tlb: TlbConfig = TlbConfig::default(),
            path: TIERLAB, range: Range::Table, source: "tierlab";
        /// Memory nodes, in node-id order.
        nodes: Vec<NodeConfig>,
            path: "/sys/devices/system/node/nodeN",
            range: Range::Rule("1..=64 nodes, every CPU on exactly one, < 16 TiB in all"),
            source: "tierlab: node masks are 64 bits, PFNs 32 bits";
        /// Swap devices, in swapon order (`[[machine.swap]]`); none by default.
        swap: Vec<SwapConfig> = Vec::new(),
            path: "/proc/swaps",
            range: Range::Rule("at most 4 devices (tierlab's swap PTE has 2 type bits)"),
            source: "tierlab mm/pgtable.rs; the kernel allows MAX_SWAPFILES (32 minus the special types)";
        /// SLIT distances (node_distance), one row per node; empty = 10 local, 20 remote.
        distance: Vec<Vec<u32>> = Vec::new(),
            path: "/sys/devices/system/node/nodeN/distance",
            range: Range::Rule("n×n, 10 on the diagonal, > 10 elsewhere"),
            source: "include/linux/topology.h LOCAL_DISTANCE (10), REMOTE_DISTANCE (20); ACPI SLIT";
    }
}

knob_table! {
    /// `[machine.tlb]`: TLB geometry; defaults are a modern x86 server core (Intel Ice
    /// Lake/Sapphire Rapids-class).
    pub struct TlbConfig {
        /// L1 data TLB entries (4 KiB pages).
        dtlb_entries: u32 = 64,
            path: TIERLAB, range: Range::Rule(TLB_GEOMETRY), source: "tierlab machine/tlb.rs";
        /// L1 data TLB ways.
        dtlb_ways: u32 = 4,
            path: TIERLAB, range: Range::Rule(TLB_WAYS), source: "tierlab machine/tlb.rs";
        /// L1 data TLB entries for 2 MiB pages (a separate structure on x86 server cores;
        /// the STLB holds both sizes).
        dtlb_2m_entries: u32 = 32,
            path: TIERLAB, range: Range::Rule(TLB_GEOMETRY), source: "Intel 64 and IA-32 Architectures Optimization Reference Manual, Skylake server microarchitecture: DTLB 2M/4M, 32 entries, 4-way; STLB 1536 entries shared by 4K and 2M pages";
        /// L1 2 MiB data TLB ways.
        dtlb_2m_ways: u32 = 4,
            path: TIERLAB, range: Range::Rule(TLB_WAYS), source: "as dtlb_2m_entries";
        /// L1 instruction TLB entries.
        itlb_entries: u32 = 128,
            path: TIERLAB, range: Range::Rule(TLB_GEOMETRY), source: "tierlab machine/tlb.rs";
        /// L1 instruction TLB ways.
        itlb_ways: u32 = 8,
            path: TIERLAB, range: Range::Rule(TLB_WAYS), source: "tierlab machine/tlb.rs";
        /// Second-level (shared) TLB entries.
        stlb_entries: u32 = 1536,
            path: TIERLAB, range: Range::Rule(TLB_GEOMETRY), source: "tierlab machine/tlb.rs";
        /// Second-level TLB ways.
        stlb_ways: u32 = 12,
            path: TIERLAB, range: Range::Rule(TLB_WAYS), source: "tierlab machine/tlb.rs";
        /// PCIDs each CPU cycles through (TLB_NR_DYN_ASIDS, 6 in Linux).
        nr_dyn_asids: u32 = 6,
            path: TIERLAB,
            range: Range::Int(1, 255),
            source: "arch/x86/include/asm/tlbflush.h TLB_NR_DYN_ASIDS; tierlab tags TLB entries with an 8-bit PCID";
    }
}

/// A memory node's load or store latency, ns.
const NODE_LATENCY_NS: Range = Range::between(1.0, 1e6);
/// Why: DRAM is ~100 ns, CXL and NVM a few hundred; 1 ms is a disk, not memory.
const NODE_LATENCY_WHY: &str =
    "hardware: DRAM ~100 ns, CXL/NVM a few 100 ns; a load beyond 1 ms is an I/O device, not memory";
/// A node's or a swap device's bandwidth, GB/s.
const BANDWIDTH_GBPS: Range = Range::between(0.001, 10000.0);
/// Why: HBM3e peaks near 5 TB/s per package; 1 MB/s is below any memory or swap device.
const BANDWIDTH_WHY: &str = "hardware: HBM3e peaks near 5 TB/s a package, and no memory or swap device is slower than 1 MB/s";
/// A block swap device's service time for one 4 KiB request, µs.
const SWAP_LATENCY_US: Range = Range::between(0.001, 1e6);
/// Why: a request slower than a second is a failing device, and the block layer times it out.
const SWAP_LATENCY_WHY: &str = "hardware: NVMe reads ~80 µs, a disk ~10 ms; the block layer's default request timeout is 30 s, so 1 s bounds a working device";

/// The rule every TLB's entries and ways obey together.
const TLB_GEOMETRY: &str = "entries / ways a power of two";
const TLB_WAYS: &str = "1..=32, dividing the entries";

knob_table! {
    /// `[[machine.nodes]]`: one memory node (DRAM, or a CPU-less CXL-like node).
    pub struct NodeConfig {
        /// Node name, printed in reports.
        name: String = String::new(),
            path: TIERLAB, range: Range::Any, source: "tierlab";
        /// Memory on the node, MiB.
        capacity_mib: u64,
            path: "/sys/devices/system/node/nodeN/meminfo",
            range: Range::Int(16, 1 << 24),
            source: "tierlab: a node needs room for its watermarks and pagesets; PFNs are 32 bits, so 16 TiB (2^24 MiB) in all";
        /// Load latency, ns.
        read_latency_ns: f64,
            path: TIERLAB, range: NODE_LATENCY_NS, source: NODE_LATENCY_WHY;
        /// Store latency, ns.
        write_latency_ns: f64,
            path: TIERLAB, range: NODE_LATENCY_NS, source: NODE_LATENCY_WHY;
        /// Read bandwidth, GB/s.
        read_bandwidth_gbps: f64 = 100.0,
            path: TIERLAB, range: BANDWIDTH_GBPS, source: BANDWIDTH_WHY;
        /// Write bandwidth, GB/s.
        write_bandwidth_gbps: f64 = 100.0,
            path: TIERLAB, range: BANDWIDTH_GBPS, source: BANDWIDTH_WHY;
        /// CPUs on this node, e.g. "0-15" or "0,2,4"; empty for a memory-only (CXL-like) node.
        cpus: String = String::new(),
            path: "/sys/devices/system/node/nodeN/cpulist",
            range: Range::Rule("CPU list; each CPU on one node"),
            source: "tierlab (cpulist format of lib/bitmap-str.c)";
        /// Abstract distance for memory tiers; unset = derived from latency and bandwidth.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        adistance: Option<u64> = None,
            path: "/sys/devices/virtual/memory_tiering/memory_tierN",
            range: Range::Int(0, INT_MAX),
            source: "mm/memory-tiers.c alloc_memory_type(int adistance); default from mt_perf_to_adistance()";
        /// Memory the kernel itself holds on the node from boot (image, memmap, slab), MiB:
        /// taken off the node's free pages before the workload starts.
        reserved_mib: u64 = 0,
            path: "/sys/devices/system/node/nodeN/meminfo (capacity - MemFree at boot)",
            range: Range::Int(0, 1 << 24),
            source: "tierlab: `tierlab validate` measures it in the guest";
        /// Free pages already on each CPU's per-CPU list of the node when the workload
        /// starts (per_cpu_pages.count), by CPU id; taken from the buddy allocator after
        /// `reserved_mib`. Empty: every list starts empty.
        boot_pcp_count: Vec<u32> = Vec::new(),
            path: "/proc/zoneinfo (pagesets: count, summed over the node's zones)",
            range: Range::Rule("at most one entry per CPU; the node keeps 16 MiB free"),
            source: "tierlab: `tierlab validate` measures it in the guest";
        /// Each CPU's per_cpu_pages.high on the node when the workload starts, by CPU id
        /// (clamped to the pageset's high_min..high_max); empty or a missing CPU: high_min.
        boot_pcp_high: Vec<u32> = Vec::new(),
            path: "/proc/zoneinfo (pagesets: high, summed over the node's zones)",
            range: Range::Rule("at most one entry per CPU"),
            source: "mm/page_alloc.c zone_set_pageset_high_and_batch; tierlab validate";
        /// The CPU the node's kswapd last ran on when the workload starts (task_cpu), which a
        /// wakeup keeps while it is idle; unset: none yet.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kswapd_cpu: Option<u32> = None,
            path: "/proc/PID/stat of kswapdN (processor, field 39)",
            range: Range::Rule("a CPU of the machine"),
            source: "kernel/sched/fair.c select_idle_sibling (prev_cpu); tierlab validate";
    }
}

knob_table! {
    /// `[[machine.swap]]`: one swap device: zram (a compressed RAM disk, SWP_SYNCHRONOUS_IO,
    /// so swap-in of a slot with one reference skips the swap cache and readahead) or a block
    /// device (asynchronous writeback, the swap cache, VMA readahead).
    pub struct SwapConfig {
        /// Device kind: "zram" or "block".
        kind: String = "zram".into(),
            path: "/proc/swaps (Type)",
            range: Range::OneOf(&["zram", "block"]),
            source: "drivers/block/zram/zram_drv.c; mm/page_io.c swap_writepage_bdev_async";
        /// Block device: service time of one 4 KiB read, µs [estimate: an NVMe SSD's ~80 µs
        /// random read, as the cost table's file_major_fault_ns].
        read_latency_us: f64 = 80.0,
            path: TIERLAB, range: SWAP_LATENCY_US, source: SWAP_LATENCY_WHY;
        /// Block device: service time of one 4 KiB write, µs [estimate: NVMe writes land in
        /// the drive's cache].
        write_latency_us: f64 = 20.0,
            path: TIERLAB, range: SWAP_LATENCY_US, source: SWAP_LATENCY_WHY;
        /// Block device: transfer bandwidth, GB/s [estimate: a PCIe 3.0 ×4 NVMe SSD].
        bandwidth_gbps: f64 = 3.0,
            path: TIERLAB, range: BANDWIDTH_GBPS, source: BANDWIDTH_WHY;
        /// Size of the swap area (zram's disksize), MiB.
        size_mib: u64,
            path: "/sys/block/zramN/disksize",
            range: Range::Int(1, 1 << 24),
            source: "tierlab: slot offsets are 32 bits";
        /// swapon -p priority; unset: the kernel's automatic -1, -2, ... in swapon order.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        priority: Option<u32> = None,
            path: "swapon -p",
            range: Range::Int(0, 32767),
            source: "mm/swapfile.c SYSCALL_DEFINE2(swapon): SWAP_FLAG_PRIO_MASK (0x7fff)";
        /// Uncompressed over compressed size of the pages stored (zram's mm_stat ratio):
        /// lz4 on the Silesia corpus gives 2.1 (lz4 README). Decides the RAM zram holds.
        compression_ratio: f64 = 2.1,
            path: "/sys/block/zramN/mm_stat",
            range: Range::between(1.0, 4096.0),
            source: "lz4 README benchmark (Silesia corpus): ratio 2.101; a 4 KiB page cannot be stored in less than a byte";
    }
}
