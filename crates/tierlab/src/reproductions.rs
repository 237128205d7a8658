//! The seeds' experiments that tierlab reproduces: for each, the built-in scenario, the
//! variants it runs and the figures the seed published, each with its source. `tierlab
//! reproduce` reads this table (and a Python API can read the same one); to add a
//! reproduction, add one `Reproduction` to `REPRODUCTIONS`.
//!
//! The scenarios are compiled in with `include_str!` from the repository's `scenarios/`
//! directory (the path is relative to this file and resolved at build time), so the library
//! opens no file at run time. Message ids are those in the seeds' archive headers.

use serde::Serialize;

/// One seed's experiment.
#[derive(Debug, Serialize)]
pub struct Reproduction {
    /// What `tierlab reproduce NAME` takes.
    pub name: &'static str,
    /// The seed's number, e.g. "000".
    pub seed: &'static str,
    /// The report's first line, after "Reproducing ".
    pub title: &'static str,
    /// One line for listings.
    pub what_it_runs: &'static str,
    /// The built-in scenario's file name under `scenarios/`.
    pub scenario: &'static str,
    /// Its TOML text, as compiled in.
    pub scenario_toml: &'static str,
    /// The runs: the scenario with these knobs set (after the user's `--set`s). The first is
    /// the baseline.
    pub variants: &'static [Variant],
    /// What the seed published, in the order of its tables.
    pub figures: &'static [Figure],
}

/// One run of a reproduction.
#[derive(Debug, Serialize)]
pub struct Variant {
    /// Its column in the tables, e.g. "tpp".
    pub label: &'static str,
    /// How prose names it, e.g. "TPP".
    pub title: &'static str,
    /// `KEY=VALUE` assignments, as `--set` takes them.
    pub sets: &'static [&'static str],
}

/// A published figure and where it was published.
#[derive(Debug, Serialize)]
pub struct Figure {
    /// The row's name in the report.
    pub metric: &'static str,
    /// How a sentence names it, e.g. "throughput loss".
    pub prose: &'static str,
    /// The simulated value to set beside it.
    pub measure: Measure,
    pub published: Published,
    /// Seed, message, table or paragraph.
    pub source: &'static str,
}

/// What a figure's simulated value is, from the runs' results.
#[derive(Debug, Clone, Copy, Serialize)]
pub enum Measure {
    /// A metric of the comparison table (`tierlab compare`'s row name) of each variant.
    Metric(&'static str),
    /// 100 × (1 − metric / the baseline's metric): a loss in % against the first variant.
    LossVsBaseline(&'static str),
    /// The time one run of the scripted phase of that name took, ms.
    PhaseMs(&'static str),
    /// 100 × metric / the baseline's metric: a value relative to the first variant, as
    /// seed 002's tables print them (base = 100).
    PercentOfBaseline(&'static str),
    /// The share of CPU time spent flushing TLBs on arm64 (issuing TLBIs and waiting in
    /// DSB ISH: ptep_clear_flush's time when every unmap flushes at once), %.
    TlbFlushSharePct,
}

/// The published side of a figure.
#[derive(Debug, Clone, Copy, Serialize)]
pub enum Published {
    /// A value for each variant, the first the baseline, compared level by level: each
    /// level's change from the baseline should have the published sign (changes under 2 %
    /// of the baseline count as none) and its value be within 2× of the published one.
    Levels {
        values: &'static [(&'static str, f64)],
        higher_is_better: bool,
    },
    /// Values of the first variant (before) and the second (after); compared as a change in %,
    /// since the seed's machine and run length differ from the simulated ones.
    Change { before: f64, after: f64 },
    /// Values of some variants, by label. The seed's claim is that each listed variant does
    /// better than the one before it (higher or lower is better); compared as values.
    Values {
        values: &'static [(&'static str, f64)],
        higher_is_better: bool,
    },
}

/// Every reproduction, by name.
pub const REPRODUCTIONS: &[Reproduction] = &[
    MIGRC, TPP, SWAP_BENCH, SWAP_YOUNG, PCP_KBUILD, PCP_SCTP, PCP_UNIX,
];

/// Reproductions run together under one name: `tierlab reproduce pcp` prints seed 002's
/// tables.
pub const GROUPS: &[(&str, &[&str])] = &[("pcp", &["pcp-kbuild", "pcp-sctp", "pcp-unix"])];

/// The registered reproduction of that name.
pub fn lookup(name: &str) -> Result<&'static Reproduction, String> {
    REPRODUCTIONS
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| {
            format!(
                "no experiment named '{name}' (available: {})",
                names_and_groups().join(", ")
            )
        })
}

/// The registered names, in table order, then the groups'.
pub fn names() -> Vec<&'static str> {
    REPRODUCTIONS.iter().map(|r| r.name).collect()
}

/// Every name `tierlab reproduce` takes: the reproductions', then the groups'.
pub fn names_and_groups() -> Vec<&'static str> {
    let mut all = names();
    all.extend(GROUPS.iter().map(|g| g.0));
    all
}

/// A before → after figure measured by the comparison-table metric of the same name.
const fn change(metric: &'static str, before: f64, after: f64, source: &'static str) -> Figure {
    Figure {
        metric,
        prose: metric,
        measure: Measure::Metric(metric),
        published: Published::Change { before, after },
        source,
    }
}

/// The seed lists shootdowns per CPU; the comparison table reports their mean.
const fn mean(v: &[u64]) -> f64 {
    let mut sum = 0;
    let mut i = 0;
    while i < v.len() {
        sum += v[i];
        i += 1;
    }
    sum as f64 / v.len() as f64
}

const V9_PERF: &str = "seed 000 v9 cover letter, perf stat -a BEFORE/AFTER (message-id 20240417071847.29584-1-byungchul@sk.com)";
const V9_IRQ: &str = "seed 000 v9 cover letter, /proc/interrupts TLB shootdowns, mean of 16 CPUs (message-id 20240417071847.29584-1-byungchul@sk.com)";
const V9_TIME: &str = "seed 000 v9 cover letter, time XSBench -t 16 -p 50000000 (message-id 20240417071847.29584-1-byungchul@sk.com)";

// /proc/interrupts "TLB shootdowns" per CPU, before and after, as the v9 cover letter lists them.
const MIGRC_TLB_BEFORE: [u64; 16] = [
    1364803, 1303670, 1333921, 1349607, 1356934, 1354216, 1332972, 1342842, 1350265, 1316443,
    1355928, 1360793, 1298239, 1326358, 1343006, 1340971,
];
const MIGRC_TLB_AFTER: [u64; 16] = [
    117257, 119219, 117178, 115737, 117967, 118948, 117508, 116079, 116962, 117266, 117320, 117215,
    105808, 103934, 115672, 117610,
];

/// Seed 000 (MIGRC v9, XSBench -t 16 -p 50000000 on QEMU, 1 GB DRAM + 99 GB CPU-less node).
const MIGRC: Reproduction = Reproduction {
    name: "migrc",
    seed: "000",
    title: "seed 000 (MIGRC v9): XSBench -t 16, 1 GiB DRAM + CPU-less node, numa_balancing=2, demotion on",
    what_it_runs: "XSBench on 1 GiB DRAM + CXL, MIGRC off vs on",
    scenario: "xsbench-tiered.toml",
    scenario_toml: include_str!("../../../scenarios/xsbench-tiered.toml"),
    variants: &[
        Variant {
            label: "before",
            title: "MIGRC off",
            sets: &[],
        },
        Variant {
            label: "after",
            title: "MIGRC on",
            sets: &["kernel.migrc=on"],
        },
    ],
    figures: &[
        change("itlb.itlb_flush", 40417078.0, 3316495.0, V9_PERF),
        change("tlb_flush.dtlb_thread", 234852566.0, 138912511.0, V9_PERF),
        change("tlb_flush.stlb_any", 153192357.0, 115199341.0, V9_PERF),
        change("dTLB-load-misses", 119001107892.0, 117610390021.0, V9_PERF),
        change("dTLB-store-misses", 307921167.0, 198042233.0, V9_PERF),
        change("iTLB-load-misses", 1355272118.0, 840066984.0, V9_PERF),
        change(
            "TLB shootdowns per CPU",
            mean(&MIGRC_TLB_BEFORE),
            mean(&MIGRC_TLB_AFTER),
            V9_IRQ,
        ),
        change("runtime (s)", 968.783, 913.210, V9_TIME),
        change("work per second", 1754778.0, 1861565.0, V9_TIME),
        change(
            "pgpromote_success",
            8190027.0,
            8791934.0,
            "numa_pages_migrated, v4 thread Nov 2023 (vanilla vs migrc)",
        ),
        change(
            "pgdemote_kswapd",
            17098994.0 - 8190027.0,
            18276174.0 - 8791934.0,
            "pgmigrate_success − numa_pages_migrated, v4 thread Nov 2023 [derived]",
        ),
    ],
};

const TPP_CASE_STUDY: &str = "seed 003 cover letter, \"Case Study of a Meta cache application\" (message-id cover.1637778851.git.hasanalmaruf@fb.com)";

/// Seed 003 (TPP, Meta's cache application on 1:4 DRAM:CXL). After an all-DRAM machine of the
/// same total size (1600 MiB) come the variants `tierlab compare --policies` runs: default
/// Linux, upstream NUMA-balancing tiering and TPP.
const TPP: Reproduction = Reproduction {
    name: "tpp",
    seed: "003",
    title: "seed 003 (TPP): cache application, 1:4 DRAM:CXL, against all memory in DRAM",
    what_it_runs: "cache application on 1:4 DRAM:CXL, all-DRAM vs Linux vs tiering vs TPP",
    scenario: "cache-1to4.toml",
    scenario_toml: include_str!("../../../scenarios/cache-1to4.toml"),
    variants: &[
        Variant {
            label: "all-DRAM",
            title: "all-DRAM",
            sets: &["machine.nodes=[{ name = \"dram0\", capacity_mib = 1600, read_latency_ns = 106, write_latency_ns = 106, read_bandwidth_gbps = 270, write_bandwidth_gbps = 272, cpus = \"0-7\" }]"],
        },
        Variant {
            label: "linux",
            title: "Linux",
            sets: &["kernel.numa_balancing=0", "vm.demotion_enabled=false"],
        },
        Variant {
            label: "tiering",
            title: "NUMA-balancing tiering (upstream mode 2)",
            sets: &[
                "kernel.numa_balancing=2",
                "vm.demotion_enabled=true",
                "kernel.tiering_policy=linux",
            ],
        },
        Variant {
            label: "tpp",
            title: "TPP",
            sets: &[
                "kernel.numa_balancing=2",
                "vm.demotion_enabled=true",
                "kernel.tiering_policy=tpp",
            ],
        },
    ],
    figures: &[
        Figure {
            metric: "anon pages on the top tier (%)",
            prose: "anon on top tier",
            measure: Measure::Metric("top-tier anon share (%)"),
            published: Published::Values {
                values: &[("linux", 14.0), ("tpp", 80.0)],
                higher_is_better: true,
            },
            source: TPP_CASE_STUDY,
        },
        Figure {
            metric: "throughput loss vs all-DRAM (%)",
            prose: "throughput loss",
            measure: Measure::LossVsBaseline("work per second"),
            published: Published::Values {
                values: &[("linux", 18.0), ("tpp", 5.0)],
                higher_is_better: false,
            },
            source: TPP_CASE_STUDY,
        },
    ],
};

const SWAP_BENCH_SRC: &str = "seed 001: arm64: support batched/deferred tlb shootdown during page reclamation, v3 4/4 commit message (message-id 20220822082120.8347-5-yangyicong@huawei.com)";

/// Snapdragon 888 (Barry Song's phone): 8 CPUs (4 × Cortex-A55, 3 × A78 at 2.42 GHz, one X1);
/// the benchmark ran with `taskset -c 4`, an A78 (Qualcomm's specification). LPDDR5-3200,
/// 51.2 GB/s; the latency and MLP are estimates. zram as in the seed. 1 GiB of memory per
/// node here: the 1 MiB benchmark never presses on memory, and the checker's periodic walk
/// of every frame grows with it.
const SNAPDRAGON_888: &[&str] = &[
    "machine.name=\"snapdragon-888\"",
    "machine.arch=\"arm64\"",
    "machine.cpu_ghz=2.42",
    "machine.cpus=8",
    "machine.mlp=4",
    "machine.nodes=[{ name = \"lpddr5\", capacity_mib = 1024, read_latency_ns = 110, write_latency_ns = 110, read_bandwidth_gbps = 51.2, write_bandwidth_gbps = 51.2, cpus = \"0-7\" }]",
    "workload.placement=[4]",
    "vm.demotion_enabled=false",
    "kernel.numa_balancing=0",
];

/// Kunpeng 920 (Yicong Yang's server): two sockets of the 48-core 920-4826 at 2.6 GHz (the
/// seed names no model; 96 CPUs is an estimate), 8 × DDR4-2933 per socket (187.7 GB/s);
/// latency and MLP estimates; the seed did not pin the benchmark, tierlab runs it on CPU 0.
const KUNPENG_920: &[&str] = &[
    "machine.name=\"kunpeng-920\"",
    "machine.arch=\"arm64\"",
    "machine.cpu_ghz=2.6",
    "machine.cpus=96",
    "machine.mlp=4",
    "machine.nodes=[{ name = \"socket0\", capacity_mib = 1024, read_latency_ns = 100, write_latency_ns = 100, read_bandwidth_gbps = 187.7, write_bandwidth_gbps = 187.7, cpus = \"0-47\" }, { name = \"socket1\", capacity_mib = 1024, read_latency_ns = 160, write_latency_ns = 160, read_bandwidth_gbps = 187.7, write_bandwidth_gbps = 187.7, cpus = \"48-95\" }]",
    "workload.placement=[0]",
    "vm.demotion_enabled=false",
    "kernel.numa_balancing=0",
];
const BATCH_OFF: &[&str] = &["arch.batched_unmap_flush=false"];
const BATCH_ON: &[&str] = &["arch.batched_unmap_flush=true"];
const SD888_OFF: [&str; 10] = sets(SNAPDRAGON_888, BATCH_OFF);
const SD888_ON: [&str; 10] = sets(SNAPDRAGON_888, BATCH_ON);
const KP920_OFF: [&str; 10] = sets(KUNPENG_920, BATCH_OFF);
const KP920_ON: [&str; 10] = sets(KUNPENG_920, BATCH_ON);

/// A value figure, lower is better.
const fn lower(
    metric: &'static str,
    measure: Measure,
    values: &'static [(&'static str, f64)],
    source: &'static str,
) -> Figure {
    Figure {
        metric,
        prose: metric,
        measure,
        published: Published::Values {
            values,
            higher_is_better: false,
        },
        source,
    }
}

/// Seed 001 (arm64 batched unmap flush): swap_bench, 1 MiB read and paged out 10,000 times
/// through zram, on the two published arm64 machines with the batched flush off and on, and
/// on x86 beside them.
const SWAP_BENCH: Reproduction = Reproduction {
    name: "swap-bench",
    seed: "001",
    title: "seed 001 (arm64 batched TLB flush): swap_bench, 1 MiB read and paged out to zram 10,000 times",
    what_it_runs: "swap_bench on Snapdragon 888 and Kunpeng 920, batched flush off vs on, x86 beside",
    scenario: "swap_bench.toml",
    scenario_toml: include_str!("../../../scenarios/swap_bench.toml"),
    variants: &[
        Variant {
            label: "sd888-off",
            title: "sd888-off",
            sets: &SD888_OFF,
        },
        Variant {
            label: "sd888-on",
            title: "sd888-on",
            sets: &SD888_ON,
        },
        Variant {
            label: "kp920-off",
            title: "kp920-off",
            sets: &KP920_OFF,
        },
        Variant {
            label: "kp920-on",
            title: "kp920-on",
            sets: &KP920_ON,
        },
        Variant {
            label: "x86",
            title: "x86 (the scenario's machine, IPI shootdowns)",
            sets: &[],
        },
    ],
    figures: &[
        lower(
            "Snapdragon 888 runtime (s)",
            Measure::Metric("runtime (s)"),
            &[("sd888-off", 14.69), ("sd888-on", 13.80)],
            SWAP_BENCH_SRC,
        ),
        lower(
            "Kunpeng 920 runtime (s)",
            Measure::Metric("runtime (s)"),
            &[("kp920-off", 13.460), ("kp920-on", 11.771)],
            SWAP_BENCH_SRC,
        ),
        lower(
            "Snapdragon 888 ptep_clear_flush (%)",
            Measure::TlbFlushSharePct,
            &[("sd888-off", 5.36)],
            SWAP_BENCH_SRC,
        ),
        lower(
            "Kunpeng 920 ptep_clear_flush (%)",
            Measure::TlbFlushSharePct,
            &[("kp920-off", 16.99)],
            SWAP_BENCH_SRC,
        ),
    ],
};

const SWAP_YOUNG_V4: &str = "seed 004: Peter Xu, [PATCH v4 0/7] mm: Remember a/d bits for migration entries, linux-mm 2022-08-11, Tests (Xeon E5-2630 v4 @ 2.20GHz)";
const SWAP_YOUNG_MILAN: &str = "seed 004: Raghavendra K T's reply to v4 (linux-mm, 2022-11-21): swap-young on AMD EPYC Milan, 2 nodes, 3.72 GHz, base 6.0 vs patched";

/// A two-socket Intel Xeon E5-2630 v4 (Broadwell-EP), Peter Xu's machine. Intel ARK: 2.2 GHz
/// base, 46-bit physical addresses, 68.3 GB/s per socket (4 × DDR4-2133); affected by L1TF
/// (Intel's L1TF processor list), so its swap offsets are capped at 2^36, exactly
/// SWP_MIG_TOTAL_BITS. MLP 10: Haswell/Broadwell's 10 L1D fill buffers (Intel optimization
/// manual). Latencies are estimates: ~90 ns local, ~140 ns across QPI.
const BROADWELL_EP: &[&str] = &[
    "machine.name=\"broadwell-ep-2s\"",
    "machine.cpu_ghz=2.2",
    "machine.cpus=4",
    "machine.mlp=10",
    "machine.phys_bits=46",
    "machine.l1tf=true",
    "machine.nodes=[{ name = \"socket0\", capacity_mib = 2048, read_latency_ns = 90, write_latency_ns = 90, read_bandwidth_gbps = 68.3, write_bandwidth_gbps = 68.3, cpus = \"0-1\" }, { name = \"socket1\", capacity_mib = 2048, read_latency_ns = 140, write_latency_ns = 140, read_bandwidth_gbps = 38.4, write_bandwidth_gbps = 38.4, cpus = \"2-3\" }]",
];

/// A two-socket AMD EPYC Milan (64 cores per socket) at the 3.72 GHz its tester reported;
/// 48-bit physical addresses, no L1TF; 204.8 GB/s per socket (8 × DDR4-3200, AMD's
/// specification). MLP 24 and the latencies (~110 ns local, ~200 ns remote) are estimates.
const MILAN: &[&str] = &[
    "machine.name=\"milan-2s\"",
    "machine.cpu_ghz=3.72",
    "machine.cpus=4",
    "machine.mlp=24",
    "machine.phys_bits=48",
    "machine.l1tf=false",
    "machine.nodes=[{ name = \"socket0\", capacity_mib = 2048, read_latency_ns = 110, write_latency_ns = 110, read_bandwidth_gbps = 204.8, write_bandwidth_gbps = 204.8, cpus = \"0-1\" }, { name = \"socket1\", capacity_mib = 2048, read_latency_ns = 200, write_latency_ns = 200, read_bandwidth_gbps = 100, write_bandwidth_gbps = 100, cpus = \"2-3\" }]",
];

/// A variant's sets: a machine preset's sets, then the variant's own (N is their total).
const fn sets<const N: usize>(
    machine: &'static [&'static str],
    own: &'static [&'static str],
) -> [&'static str; N] {
    assert!(machine.len() + own.len() == N, "N is the number of sets");
    let mut out = [""; N];
    let mut i = 0;
    while i < machine.len() {
        out[i] = machine[i];
        i += 1;
    }
    while i < N {
        out[i] = own[i - machine.len()];
        i += 1;
    }
    out
}
const AD_OFF: &[&str] = &["kernel.migration_entry_ad=false"];
const AD_ON: &[&str] = &["kernel.migration_entry_ad=true"];
const BDW_OLD: [&str; 8] = sets(BROADWELL_EP, AD_OFF);
const BDW_AD: [&str; 8] = sets(BROADWELL_EP, AD_ON);
const MILAN_OLD: [&str; 8] = sets(MILAN, AD_OFF);
const MILAN_AD: [&str; 8] = sets(MILAN, AD_ON);

/// Seed 004 (A/D bits in migration entries): Peter Xu's swap-young on 1 GiB, moved to node
/// 1 and back, then read and written a byte per page; kernels without and with the series on
/// the two published machines.
const SWAP_YOUNG: Reproduction = Reproduction {
    name: "swap-young",
    seed: "004",
    title: "seed 004 (A/D bits in migration entries): swap-young, 1 GiB moved to node 1 and back, then read and written a byte per page",
    what_it_runs: "swap-young on Broadwell-EP and Milan, migration entries without and with A/D",
    scenario: "swap_young.toml",
    scenario_toml: include_str!("../../../scenarios/swap_young.toml"),
    variants: &[
        Variant {
            label: "bdw-6.0",
            title: "bdw-6.0",
            sets: &BDW_OLD,
        },
        Variant {
            label: "bdw-6.1",
            title: "bdw-6.1",
            sets: &BDW_AD,
        },
        Variant {
            label: "milan-6.0",
            title: "milan-6.0",
            sets: &MILAN_OLD,
        },
        Variant {
            label: "milan-6.1",
            title: "milan-6.1",
            sets: &MILAN_AD,
        },
    ],
    figures: &[
        lower(
            "Broadwell read after moves (ms)",
            Measure::PhaseMs("read after moves"),
            &[("bdw-6.0", 99.0), ("bdw-6.1", 4.0)],
            SWAP_YOUNG_V4,
        ),
        lower(
            "Milan read after moves (ms)",
            Measure::PhaseMs("read after moves"),
            &[("milan-6.0", 81.364), ("milan-6.1", 2.966)],
            SWAP_YOUNG_MILAN,
        ),
        lower(
            "Milan write after moves (ms)",
            Measure::PhaseMs("write after moves"),
            &[("milan-6.0", 12.887), ("milan-6.1", 2.720)],
            SWAP_YOUNG_MILAN,
        ),
        // Means of the four later passes each kernel printed.
        lower(
            "Milan steady read (ms)",
            Measure::PhaseMs("steady read"),
            &[("milan-6.0", 5.212), ("milan-6.1", 2.894)],
            SWAP_YOUNG_MILAN,
        ),
        lower(
            "Milan steady write (ms)",
            Measure::PhaseMs("steady write"),
            &[("milan-6.0", 4.544), ("milan-6.1", 2.565)],
            SWAP_YOUNG_MILAN,
        ),
    ],
};

/// The levels of seed 002's tables, one run each.
const PCP_LEVELS: &[Variant] = &[
    Variant {
        label: "base",
        title: "base",
        sets: &["vm.pcp_series=\"base\""],
    },
    Variant {
        label: "patch1",
        title: "patch1",
        sets: &["vm.pcp_series=\"patch1\""],
    },
    Variant {
        label: "patch3",
        title: "patch3",
        sets: &["vm.pcp_series=\"patch3\""],
    },
    Variant {
        label: "patch5",
        title: "patch5",
        sets: &["vm.pcp_series=\"patch5\""],
    },
    Variant {
        label: "patch7",
        title: "patch7",
        sets: &["vm.pcp_series=\"patch7\""],
    },
    Variant {
        label: "patch9",
        title: "patch9",
        sets: &["vm.pcp_series=\"patch9\""],
    },
    Variant {
        label: "patch10",
        title: "patch10",
        sets: &["vm.pcp_series=\"patch10\""],
    },
];

const PCP_SRC: &str = "seed 002 v2 cover letter, mm: PCP high auto-tuning (message-id 20230926060911.266511-1-ying.huang@intel.com)";

/// A row of a seed 002 table: one value per level, compared level by level.
const fn pcp_row(
    metric: &'static str,
    measure: Measure,
    values: &'static [(&'static str, f64)],
    higher_is_better: bool,
) -> Figure {
    Figure {
        metric,
        prose: metric,
        measure,
        published: Published::Levels {
            values,
            higher_is_better,
        },
        source: PCP_SRC,
    }
}

pub const PCP_KBUILD: Reproduction = Reproduction {
    name: "pcp-kbuild",
    seed: "002",
    title: "seed 002 (PCP high auto-tuning): kbuild, 8 × make -j28 on 224 CPUs, at each level of the series",
    what_it_runs: "8 kernel builds of make -j28 (fork, exec, fault in, exit), at base and patch levels 1, 3, 5, 7, 9, 10",
    scenario: "pcp_kbuild.toml",
    scenario_toml: include_str!("../../../scenarios/pcp_kbuild.toml"),
    variants: PCP_LEVELS,
    figures: &[
        pcp_row(
            "build time (% of base)",
            Measure::PercentOfBaseline("runtime (s)"),
            &[("base", 100.0), ("patch1", 99.2), ("patch3", 99.2), ("patch5", 98.4), ("patch7", 94.9), ("patch9", 94.9), ("patch10", 94.9)],
            false,
        ),
        pcp_row(
            "lock contend (%)",
            Measure::Metric("zone lock contention (%)"),
            &[("base", 13.5), ("patch1", 10.6), ("patch3", 11.7), ("patch5", 10.0), ("patch7", 0.7), ("patch9", 0.6), ("patch10", 0.9)],
            false,
        ),
        pcp_row(
            "free_high (% of base)",
            Measure::PercentOfBaseline("free_high"),
            &[("base", 100.0), ("patch1", 19.2), ("patch3", 7.1), ("patch5", 8.2), ("patch7", 3.0), ("patch9", 2.7), ("patch10", 8.8)],
            false,
        ),
        pcp_row(
            "alloc_zone (% of base)",
            Measure::PercentOfBaseline("alloc_zone"),
            &[("base", 100.0), ("patch1", 95.6), ("patch3", 95.6), ("patch5", 97.1), ("patch7", 19.0), ("patch9", 15.0), ("patch10", 18.6)],
            false,
        ),
    ],
};

pub const PCP_UNIX: Reproduction = Reproduction {
    name: "pcp-unix",
    seed: "002",
    title: "seed 002 (PCP high auto-tuning): lmbench3 UNIX (AF_UNIX) bandwidth, 16 pairs on 128 CPUs, at each level of the series",
    what_it_runs: "16 AF_UNIX writer/reader pairs, 64 KiB writes, at base and patch levels 1, 3, 5, 7, 9, 10",
    scenario: "pcp_unix.toml",
    scenario_toml: include_str!("../../../scenarios/pcp_unix.toml"),
    variants: PCP_LEVELS,
    figures: &[
        pcp_row(
            "score (% of base)",
            Measure::PercentOfBaseline("work per second"),
            &[("base", 100.0), ("patch1", 117.1), ("patch3", 201.6), ("patch5", 201.9), ("patch7", 194.2), ("patch9", 193.1), ("patch10", 196.8)],
            true,
        ),
        pcp_row(
            "lock contend (%)",
            Measure::Metric("zone lock contention (%)"),
            &[("base", 50.0), ("patch1", 45.8), ("patch3", 21.2), ("patch5", 20.9), ("patch7", 19.3), ("patch9", 19.2), ("patch10", 21.0)],
            false,
        ),
        pcp_row(
            "free_high (% of base)",
            Measure::PercentOfBaseline("free_high"),
            &[("base", 100.0), ("patch1", 72.6), ("patch3", 7.4), ("patch5", 7.5), ("patch7", 7.3), ("patch9", 7.2), ("patch10", 7.4)],
            false,
        ),
        pcp_row(
            "alloc_zone (% of base)",
            Measure::PercentOfBaseline("alloc_zone"),
            &[("base", 100.0), ("patch1", 108.9), ("patch3", 111.5), ("patch5", 112.7), ("patch7", 111.5), ("patch9", 110.4), ("patch10", 111.2)],
            false,
        ),
    ],
};

pub const PCP_SCTP: Reproduction = Reproduction {
    name: "pcp-sctp",
    seed: "002",
    title: "seed 002 (PCP high auto-tuning): netperf SCTP_STREAM_MANY, 64 pairs on 128 CPUs, at each level of the series",
    what_it_runs: "64 sender/receiver pairs of 10 KiB linear messages, at base and patch levels 1, 3, 5, 7, 9, 10",
    scenario: "pcp_sctp.toml",
    scenario_toml: include_str!("../../../scenarios/pcp_sctp.toml"),
    variants: PCP_LEVELS,
    figures: &[
        pcp_row(
            "score (% of base)",
            Measure::PercentOfBaseline("work per second"),
            &[("base", 100.0), ("patch1", 99.7), ("patch3", 105.5), ("patch5", 106.9), ("patch7", 103.5), ("patch9", 103.7), ("patch10", 106.9)],
            true,
        ),
        pcp_row(
            "lock contend (%)",
            Measure::Metric("zone lock contention (%)"),
            &[("base", 2.0), ("patch1", 2.0), ("patch3", 1.2), ("patch5", 1.2), ("patch7", 1.8), ("patch9", 1.8), ("patch10", 1.2)],
            false,
        ),
        pcp_row(
            "free_high (% of base)",
            Measure::PercentOfBaseline("free_high"),
            &[("base", 100.0), ("patch1", 99.7), ("patch3", 13.2), ("patch5", 13.4), ("patch7", 6.8), ("patch9", 6.6), ("patch10", 13.5)],
            false,
        ),
        pcp_row(
            "alloc_zone (% of base)",
            Measure::PercentOfBaseline("alloc_zone"),
            &[("base", 100.0), ("patch1", 99.7), ("patch3", 105.4), ("patch5", 106.9), ("patch7", 90.8), ("patch9", 89.8), ("patch10", 106.9)],
            false,
        ),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    #[test]
    fn every_reproduction_has_sourced_figures_and_variants_that_load() {
        for r in REPRODUCTIONS {
            assert!(!r.figures.is_empty(), "{}: no figures", r.name);
            assert!(!r.variants.is_empty(), "{}: no variants", r.name);
            for f in r.figures {
                assert!(
                    !f.source.trim().is_empty(),
                    "{} {}: no source",
                    r.name,
                    f.metric
                );
                match f.published {
                    Published::Change { .. } => {
                        assert_eq!(r.variants.len(), 2, "{}: a change needs two runs", r.name)
                    }
                    Published::Values { values, .. } | Published::Levels { values, .. } => {
                        assert!(!values.is_empty(), "{} {}: no values", r.name, f.metric);
                        for (label, _) in values {
                            assert!(
                                r.variants.iter().any(|v| v.label == *label),
                                "{} {}: no variant '{label}'",
                                r.name,
                                f.metric
                            );
                        }
                    }
                }
            }
            for v in r.variants {
                let sets: Vec<String> = v.sets.iter().map(|s| s.to_string()).collect();
                let origin = format!("built-in {}", r.scenario);
                if let Err(e) = Config::from_str_with(r.scenario_toml, &origin, None, &sets) {
                    panic!("{} variant {}: {e}", r.name, v.label);
                }
            }
        }
    }

    #[test]
    fn names_are_unique_and_lookup_lists_them() {
        let names = names();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{n} registered twice");
            assert_eq!(lookup(n).unwrap().name, *n);
        }
        let err = lookup("nope").unwrap_err();
        assert!(names.iter().all(|n| err.contains(n)), "{err}");
    }
}
