//! The cache application of TPP (Maruf et al., ASPLOS 2023: Meta's Cache1/Cache2 and Web1).
//!
//! A large file-backed data set read through the page cache plus an anonymous heap of cached
//! objects, each with its own size and Zipf popularity. The allocation order is the one that
//! makes TPP's problem appear: thread 0 first reads every page of the file (the page cache fills
//! the fast tier), then writes every page of the anonymous heap (which therefore lands on the
//! slow tier). After a barrier, every thread serves `requests` requests; each request reads (or
//! sometimes updates) Zipf-chosen heap objects, reads Zipf-chosen file pages and computes.
//!
//! ```toml
//! [workload]
//! type = "cache"
//! variant = "cache"          # or "web"; explicit keys override the variant's defaults
//! threads = 8
//! file_mib = 1024
//! anon_mib = 256
//! file_zipf_s = 0.8
//! anon_zipf_s = 0.99
//! anon_reads_per_request = 8
//! file_reads_per_request = 2
//! anon_write_fraction = 0.1
//! compute_cycles_per_request = 20000
//! requests = 200000          # per thread
//! placement = "spread"       # or "pinned" (thread i on CPU i)
//! ```
//!
//! Defaults per variant:
//!
//! | key | `cache` | `web` |
//! |---|---|---|
//! | threads | 8 | 8 |
//! | file_mib | 1024 | 256 |
//! | anon_mib | 256 | 1024 |
//! | file_zipf_s | 0.8 | 0.8 |
//! | anon_zipf_s | 0.99 | 0.99 |
//! | anon_reads_per_request | 8 | 12 |
//! | file_reads_per_request | 2 | 1 |
//! | anon_write_fraction | 0.1 | 0.1 |
//! | compute_cycles_per_request | 20000 | 20000 |
//! | requests | 200000 | 200000 |
//! | placement | spread | spread |
//!
//! Popularity ranks are scattered over each region by a fixed random permutation (one per
//! region, shared by all threads, derived from the seed), so hot pages are not contiguous.

use std::sync::Arc;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use tierlab::config::{typed, ConfigError};
use tierlab::workload::{
    prot, Backing, Expected, FileSpec, Mark, Op, OpBuf, Placement, RegionSpec, ThreadSpec,
    ThreadStream, Workload,
};

const PAGE: u64 = 4096;
const PAGES_PER_MIB: u64 = 256;
/// Start of the file mapping (page-aligned, below 2^44).
pub const FILE_BASE: u64 = 0x100_0000_0000;
/// Start of the anonymous heap (page-aligned, below 2^44).
pub const HEAP_BASE: u64 = 0x200_0000_0000;
/// Largest accepted region: 1 TiB, so the file mapping cannot reach the heap.
const MAX_MIB: u64 = (HEAP_BASE - FILE_BASE) >> 20;
/// Ops appended per `refill` (at least; a request is never split).
const CHUNK: usize = 1024;

/// RNG stream ids (ChaCha8 `set_stream`): permutations and per-thread request streams.
const STREAM_FILE_PERM: u64 = 1;
const STREAM_HEAP_PERM: u64 = 2;
const STREAM_THREAD_BASE: u64 = 0x100;

#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
enum Variant {
    #[default]
    Cache,
    Web,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Cache => "cache",
            Variant::Web => "web",
        }
    }
}

#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
enum PlacementKind {
    #[default]
    Spread,
    Pinned,
}

/// The `[workload]` table as written (every key optional except `type`).
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    variant: Variant,
    threads: Option<u32>,
    file_mib: Option<u64>,
    anon_mib: Option<u64>,
    file_zipf_s: Option<f64>,
    anon_zipf_s: Option<f64>,
    anon_reads_per_request: Option<u32>,
    file_reads_per_request: Option<u32>,
    anon_write_fraction: Option<f64>,
    compute_cycles_per_request: Option<u32>,
    requests: Option<u64>,
    #[serde(default)]
    placement: PlacementKind,
}

/// The resolved configuration (variant defaults applied).
#[derive(Clone, Debug, PartialEq)]
struct Config {
    variant: Variant,
    threads: u32,
    file_mib: u64,
    anon_mib: u64,
    file_zipf_s: f64,
    anon_zipf_s: f64,
    anon_reads: u32,
    file_reads: u32,
    anon_write_fraction: f64,
    compute_cycles: u32,
    requests: u64,
    placement: PlacementKind,
}

impl Config {
    fn defaults(variant: Variant) -> Config {
        let (file_mib, anon_mib, anon_reads, file_reads) = match variant {
            Variant::Cache => (1024, 256, 8, 2),
            Variant::Web => (256, 1024, 12, 1),
        };
        Config {
            variant,
            threads: 8,
            file_mib,
            anon_mib,
            file_zipf_s: 0.8,
            anon_zipf_s: 0.99,
            anon_reads,
            file_reads,
            anon_write_fraction: 0.1,
            compute_cycles: 20000,
            requests: 200_000,
            placement: PlacementKind::Spread,
        }
    }

    fn from_table(table: &toml::Table, origin: &str, cpus: u32) -> Result<Config, ConfigError> {
        let raw: RawConfig = typed(toml::Value::Table(table.clone()), origin, "workload")?;
        let err = |key: &str, msg: String| ConfigError::key(origin, format!("workload.{key}"), msg);
        if raw.kind != "cache" {
            return Err(err(
                "type",
                format!("expected \"cache\", found {:?}", raw.kind),
            ));
        }
        let d = Config::defaults(raw.variant);
        let c = Config {
            variant: raw.variant,
            threads: raw.threads.unwrap_or(d.threads),
            file_mib: raw.file_mib.unwrap_or(d.file_mib),
            anon_mib: raw.anon_mib.unwrap_or(d.anon_mib),
            file_zipf_s: raw.file_zipf_s.unwrap_or(d.file_zipf_s),
            anon_zipf_s: raw.anon_zipf_s.unwrap_or(d.anon_zipf_s),
            anon_reads: raw.anon_reads_per_request.unwrap_or(d.anon_reads),
            file_reads: raw.file_reads_per_request.unwrap_or(d.file_reads),
            anon_write_fraction: raw.anon_write_fraction.unwrap_or(d.anon_write_fraction),
            compute_cycles: raw.compute_cycles_per_request.unwrap_or(d.compute_cycles),
            requests: raw.requests.unwrap_or(d.requests),
            placement: raw.placement,
        };
        crate::limits::check_threads(c.threads).map_err(|m| err("threads", m))?;
        if c.placement == PlacementKind::Pinned && c.threads > cpus {
            return Err(err(
                "threads",
                format!(
                    "{} threads cannot be pinned to distinct CPUs: the machine has {cpus}",
                    c.threads
                ),
            ));
        }
        for (key, mib) in [("file_mib", c.file_mib), ("anon_mib", c.anon_mib)] {
            if mib == 0 || mib > MAX_MIB {
                return Err(err(
                    key,
                    format!("must be between 1 and {MAX_MIB}, found {mib}"),
                ));
            }
        }
        for (key, s) in [
            ("file_zipf_s", c.file_zipf_s),
            ("anon_zipf_s", c.anon_zipf_s),
        ] {
            if !(s.is_finite() && s > 0.0) {
                return Err(err(key, format!("must be a finite number > 0, found {s}")));
            }
        }
        if !(0.0..=1.0).contains(&c.anon_write_fraction) {
            return Err(err(
                "anon_write_fraction",
                format!("must be in [0, 1], found {}", c.anon_write_fraction),
            ));
        }
        if c.anon_reads == 0 && c.file_reads == 0 {
            return Err(err(
                "anon_reads_per_request",
                "a request must access memory: anon_reads_per_request and \
                 file_reads_per_request are both 0"
                    .into(),
            ));
        }
        if c.requests == 0 {
            return Err(err("requests", "must be at least 1".into()));
        }
        Ok(c)
    }
}

/// A region's popularity model: Zipf CDF over ranks and a rank → page permutation.
struct Popularity {
    base: u64,
    /// cdf[r] = P(rank <= r), cdf[n-1] == 1.
    cdf: Vec<f64>,
    /// perm[rank] = page index within the region.
    perm: Vec<u32>,
}

impl Popularity {
    fn new(base: u64, pages: u64, s: f64, seed: u64, stream: u64) -> Popularity {
        let n = pages as usize;
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0f64;
        for k in 1..=n {
            sum += (k as f64).powf(-s);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        let mut perm: Vec<u32> = (0..pages as u32).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        perm.shuffle(&mut rng);
        Popularity { base, cdf, perm }
    }

    fn rank(&self, u: f64) -> usize {
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> u64 {
        let page = self.perm[self.rank(rng.gen::<f64>())];
        self.base + page as u64 * PAGE
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    MmapFile,
    ReadFile(u64),
    MmapHeap,
    WriteHeap(u64),
    Barrier,
    RoiBegin,
    Requests(u64),
    RoiEnd,
    Done,
}

struct CacheStream {
    stage: Stage,
    file_pages: u64,
    heap_pages: u64,
    file: Arc<Popularity>,
    heap: Arc<Popularity>,
    anon_reads: u32,
    file_reads: u32,
    write_fraction: f64,
    compute: u32,
    requests: u64,
    rng: ChaCha8Rng,
}

impl CacheStream {
    fn request(&mut self, out: &mut OpBuf) {
        for _ in 0..self.anon_reads {
            let addr = self.heap.sample(&mut self.rng);
            let store = self.rng.gen::<f64>() < self.write_fraction;
            out.push(if store {
                Op::Store(addr)
            } else {
                Op::Load(addr)
            });
        }
        for _ in 0..self.file_reads {
            out.push(Op::Load(self.file.sample(&mut self.rng)));
        }
        out.push(Op::Compute(self.compute));
        out.push(Op::Mark(Mark::Work(1)));
    }
}

impl ThreadStream for CacheStream {
    fn refill(&mut self, out: &mut OpBuf) {
        let start = out.len();
        while out.len() - start < CHUNK {
            self.stage = match self.stage {
                Stage::MmapFile => {
                    out.push(Op::Mmap {
                        addr: FILE_BASE,
                        len: self.file_pages * PAGE,
                        prot: prot::READ,
                        backing: Backing::File { file: 0, pgoff: 0 },
                    });
                    Stage::ReadFile(0)
                }
                Stage::ReadFile(i) => {
                    let end = (i + (CHUNK - (out.len() - start)) as u64).min(self.file_pages);
                    out.extend((i..end).map(|p| Op::Load(FILE_BASE + p * PAGE)));
                    if end == self.file_pages {
                        Stage::MmapHeap
                    } else {
                        Stage::ReadFile(end)
                    }
                }
                Stage::MmapHeap => {
                    out.push(Op::Mmap {
                        addr: HEAP_BASE,
                        len: self.heap_pages * PAGE,
                        prot: prot::READ | prot::WRITE,
                        backing: Backing::Anon,
                    });
                    Stage::WriteHeap(0)
                }
                Stage::WriteHeap(i) => {
                    let end = (i + (CHUNK - (out.len() - start)) as u64).min(self.heap_pages);
                    out.extend((i..end).map(|p| Op::Store(HEAP_BASE + p * PAGE)));
                    if end == self.heap_pages {
                        Stage::Barrier
                    } else {
                        Stage::WriteHeap(end)
                    }
                }
                Stage::Barrier => {
                    out.push(Op::Barrier);
                    Stage::RoiBegin
                }
                Stage::RoiBegin => {
                    out.push(Op::Mark(Mark::RoiBegin));
                    Stage::Requests(0)
                }
                Stage::Requests(i) => {
                    self.request(out);
                    if i + 1 == self.requests {
                        Stage::RoiEnd
                    } else {
                        Stage::Requests(i + 1)
                    }
                }
                Stage::RoiEnd => {
                    out.push(Op::Mark(Mark::RoiEnd));
                    Stage::Done
                }
                Stage::Done => return,
            };
        }
    }
}

/// Build from the scenario's [workload] table (type = "cache").
///
/// Thread 0 maps and reads the whole file (`dataset`, file 0) at [`FILE_BASE`], then maps and
/// writes the whole anonymous heap at [`HEAP_BASE`]; then all threads meet at a barrier and
/// serve requests between `RoiBegin` and `RoiEnd`, one `Work(1)` per request.
pub fn build(
    table: &toml::Table,
    origin: &str,
    seed: u64,
    cpus: u32,
) -> Result<Workload, ConfigError> {
    let c = Config::from_table(table, origin, cpus)?;
    let file_pages = c.file_mib * PAGES_PER_MIB;
    let heap_pages = c.anon_mib * PAGES_PER_MIB;
    let file = Arc::new(Popularity::new(
        FILE_BASE,
        file_pages,
        c.file_zipf_s,
        seed,
        STREAM_FILE_PERM,
    ));
    let heap = Arc::new(Popularity::new(
        HEAP_BASE,
        heap_pages,
        c.anon_zipf_s,
        seed,
        STREAM_HEAP_PERM,
    ));
    let threads = (0..c.threads)
        .map(|t| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(STREAM_THREAD_BASE + t as u64);
            let stream = CacheStream {
                stage: if t == 0 {
                    Stage::MmapFile
                } else {
                    Stage::Barrier
                },
                file_pages,
                heap_pages,
                file: Arc::clone(&file),
                heap: Arc::clone(&heap),
                anon_reads: c.anon_reads,
                file_reads: c.file_reads,
                write_fraction: c.anon_write_fraction,
                compute: c.compute_cycles,
                requests: c.requests,
                rng,
            };
            ThreadSpec {
                process: 0,
                placement: match c.placement {
                    PlacementKind::Spread => Placement::Spread,
                    PlacementKind::Pinned => Placement::Pinned(t),
                },
                stream: Box::new(stream) as Box<dyn ThreadStream>,
            }
        })
        .collect();
    let name = c.variant.name().to_string();
    let info = vec![
        ("variant".to_string(), name.clone()),
        ("threads".to_string(), c.threads.to_string()),
        (
            "file (page cache)".to_string(),
            format!("{} MiB, zipf s = {}", c.file_mib, c.file_zipf_s),
        ),
        (
            "anon heap".to_string(),
            format!("{} MiB, zipf s = {}", c.anon_mib, c.anon_zipf_s),
        ),
        (
            "per request".to_string(),
            format!(
                "{} anon accesses ({}% stores), {} file reads, {} compute cycles",
                c.anon_reads,
                c.anon_write_fraction * 100.0,
                c.file_reads,
                c.compute_cycles
            ),
        ),
        ("requests per thread".to_string(), c.requests.to_string()),
        (
            "init order".to_string(),
            "file read first (fills fast tier), then anon heap written".to_string(),
        ),
    ];
    Ok(Workload {
        expected: Some(Expected::Work(c.requests.saturating_mul(c.threads as u64))),
        name,
        work_unit: "requests".to_string(),
        processes: 1,
        files: vec![FileSpec {
            name: "dataset".to_string(),
            pages: file_pages,
            shmem: false,
        }],
        threads,
        info,
        phases: vec![],
        regions: vec![
            RegionSpec {
                name: "file cache".to_string(),
                process: 0,
                start: FILE_BASE,
                len: file_pages * PAGE,
            },
            RegionSpec {
                name: "anon heap".to_string(),
                process: 0,
                start: HEAP_BASE,
                len: heap_pages * PAGE,
            },
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(extra: &str) -> toml::Table {
        toml::from_str(&format!("type = \"cache\"\n{extra}")).unwrap()
    }

    fn drain(stream: &mut dyn ThreadStream) -> Vec<Op> {
        let mut all = OpBuf::new();
        loop {
            let before = all.len();
            stream.refill(&mut all);
            if all.len() == before {
                return all.to_vec();
            }
        }
    }

    fn small(extra: &str) -> Workload {
        small_n(500, extra)
    }

    fn small_n(requests: u64, extra: &str) -> Workload {
        let t = table(&format!(
            "threads = 2\nfile_mib = 2\nanon_mib = 1\nrequests = {requests}\n{extra}"
        ));
        build(&t, "test.toml", 7, 4).unwrap()
    }

    fn is_heap(a: u64) -> bool {
        (HEAP_BASE..HEAP_BASE + (MAX_MIB << 20)).contains(&a)
    }

    /// Ops between RoiBegin and RoiEnd, split into requests (each ends with Work(1)).
    fn requests(ops: &[Op]) -> Vec<&[Op]> {
        let b = ops
            .iter()
            .position(|o| *o == Op::Mark(Mark::RoiBegin))
            .unwrap();
        let e = ops
            .iter()
            .position(|o| *o == Op::Mark(Mark::RoiEnd))
            .unwrap();
        assert_eq!(e + 1, ops.len(), "RoiEnd is the last op");
        ops[b + 1..e]
            .split_inclusive(|o| *o == Op::Mark(Mark::Work(1)))
            .collect()
    }

    #[test]
    fn init_order() {
        let mut w = small("");
        let ops = drain(w.threads[0].stream.as_mut());
        let file_pages = 2 * 256;
        let heap_pages = 256;
        assert!(matches!(
            ops[0],
            Op::Mmap { addr: FILE_BASE, prot: prot::READ, backing: Backing::File { file: 0, pgoff: 0 }, len }
                if len == file_pages * PAGE
        ));
        for p in 0..file_pages {
            assert_eq!(ops[1 + p as usize], Op::Load(FILE_BASE + p * PAGE));
        }
        let m = 1 + file_pages as usize;
        assert!(matches!(
            ops[m],
            Op::Mmap { addr: HEAP_BASE, backing: Backing::Anon, len, prot: p }
                if len == heap_pages * PAGE && p == prot::READ | prot::WRITE
        ));
        for p in 0..heap_pages {
            assert_eq!(ops[m + 1 + p as usize], Op::Store(HEAP_BASE + p * PAGE));
        }
        let b = m + 1 + heap_pages as usize;
        assert_eq!(ops[b], Op::Barrier);
        assert_eq!(ops[b + 1], Op::Mark(Mark::RoiBegin));
        // No heap access at all before the first heap store follows the last file load.
        let first_heap = ops
            .iter()
            .position(|o| matches!(o, Op::Store(a) | Op::Load(a) if is_heap(*a)));
        let last_init_file = ops[..b]
            .iter()
            .rposition(|o| matches!(o, Op::Load(a) if !is_heap(*a)))
            .unwrap();
        assert!(last_init_file < first_heap.unwrap());
        // Other threads: barrier, then requests only.
        let ops1 = drain(w.threads[1].stream.as_mut());
        assert_eq!(ops1[0], Op::Barrier);
        assert_eq!(ops1[1], Op::Mark(Mark::RoiBegin));
        assert!(!ops1
            .iter()
            .any(|o| matches!(o, Op::Mmap { .. } | Op::Barrier if o != &ops1[0])));
        assert_eq!(w.files[0].pages, file_pages);
        assert_eq!(w.regions.len(), 2);
        assert_eq!(w.regions[0].start, FILE_BASE);
        assert_eq!(w.regions[1].len, heap_pages * PAGE);
    }

    #[test]
    fn request_mix() {
        let mut w = small_n(4000, "anon_reads_per_request = 5\nfile_reads_per_request = 3\nanon_write_fraction = 0.25\ncompute_cycles_per_request = 777");
        for t in &mut w.threads {
            let ops = drain(t.stream.as_mut());
            let reqs = requests(&ops);
            assert_eq!(reqs.len(), 4000);
            let (mut stores, mut anon) = (0u64, 0u64);
            for r in reqs {
                assert_eq!(r.len(), 5 + 3 + 2);
                assert_eq!(r[8], Op::Compute(777));
                assert_eq!(r[9], Op::Mark(Mark::Work(1)));
                for o in &r[..5] {
                    match o {
                        Op::Load(a) | Op::Store(a) if is_heap(*a) => {
                            anon += 1;
                            stores += matches!(o, Op::Store(_)) as u64;
                        }
                        _ => panic!("expected heap access, got {o:?}"),
                    }
                }
                for o in &r[5..8] {
                    assert!(
                        matches!(o, Op::Load(a) if (FILE_BASE..FILE_BASE + 512 * PAGE).contains(a))
                    );
                }
            }
            let frac = stores as f64 / anon as f64;
            assert!((frac - 0.25).abs() < 0.02, "store fraction {frac}");
        }
    }

    #[test]
    fn zipf_skew_and_scatter() {
        let n = 256usize;
        let mut hottest = Vec::new();
        for seed in 0..4u64 {
            let t = table("threads = 1\nfile_mib = 1\nanon_mib = 1\nanon_zipf_s = 1.0\nanon_write_fraction = 0\nfile_reads_per_request = 0\nanon_reads_per_request = 10\nrequests = 20000");
            let mut w = build(&t, "t", seed, 1).unwrap();
            let ops = drain(w.threads[0].stream.as_mut());
            let mut counts = vec![0u64; n];
            let mut total = 0u64;
            for r in requests(&ops) {
                for o in r {
                    if let Op::Load(a) = o {
                        counts[((a - HEAP_BASE) / PAGE) as usize] += 1;
                        total += 1;
                    }
                }
            }
            assert_eq!(total, 200_000);
            let (page, &max) = counts.iter().enumerate().max_by_key(|(_, c)| **c).unwrap();
            let h: f64 = (1..=n).map(|k| 1.0 / k as f64).sum();
            let frac = max as f64 / total as f64;
            assert!(
                ((frac * h) - 1.0).abs() < 0.1,
                "top page share {frac}, expected {}",
                1.0 / h
            );
            hottest.push(page);
        }
        // Popularity is scattered: the hottest page differs between seeds and isn't always 0.
        assert!(hottest.iter().any(|&p| p != 0), "{hottest:?}");
        assert!(hottest.iter().any(|&p| p != hottest[0]), "{hottest:?}");
        let pop = Popularity::new(HEAP_BASE, n as u64, 1.0, 3, STREAM_HEAP_PERM);
        assert!(pop.perm.iter().enumerate().any(|(i, &p)| i as u32 != p));
        let mut sorted = pop.perm.clone();
        sorted.sort_unstable();
        assert!(
            sorted.iter().enumerate().all(|(i, &p)| i as u32 == p),
            "a permutation"
        );
    }

    #[test]
    fn web_has_more_anon() {
        let w = build(&table("variant = \"web\""), "t", 1, 8).unwrap();
        assert_eq!(w.name, "web");
        assert!(w.regions[1].len > w.regions[0].len);
        let c = Config::from_table(&table("variant = \"web\""), "t", 8).unwrap();
        let d = Config::from_table(&table(""), "t", 8).unwrap();
        assert_eq!(d, Config::defaults(Variant::Cache));
        assert!(c.anon_mib > c.file_mib && d.anon_mib < d.file_mib);
        assert!(c.anon_reads > d.anon_reads && c.file_reads < d.file_reads);
        // Explicit keys override the variant's defaults.
        let o = Config::from_table(&table("variant = \"web\"\nanon_mib = 3"), "t", 8).unwrap();
        assert_eq!((o.anon_mib, o.file_mib), (3, 256));
    }

    #[test]
    fn errors_name_keys() {
        let cases = [
            ("file_mib = 0", "workload.file_mib"),
            ("anon_mib = 0", "workload.anon_mib"),
            ("file_zipf_s = 0.0", "workload.file_zipf_s"),
            ("anon_zipf_s = -1.0", "workload.anon_zipf_s"),
            ("threads = 0", "workload.threads"),
            ("variant = \"db\"", "workload.variant"),
            ("placement = \"pinned\"\nthreads = 5", "workload.threads"),
            ("anon_write_fraction = 1.5", "workload.anon_write_fraction"),
            ("requests = 0", "workload.requests"),
            ("bogus = 1", "bogus"),
            ("threads = \"x\"", "workload.threads"),
        ];
        for (extra, key) in cases {
            let e = match build(&table(extra), "s.toml", 1, 4) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{extra} accepted"),
            };
            assert!(e.starts_with("s.toml: key `workload"), "{e}");
            assert!(e.contains(key), "{extra}: {e}");
        }
        let w = build(
            &table("placement = \"pinned\"\nthreads = 4\nfile_mib = 1\nanon_mib = 1"),
            "s",
            1,
            4,
        )
        .unwrap();
        assert_eq!(w.threads[3].placement, Placement::Pinned(3));
    }

    #[test]
    fn deterministic() {
        let run = |seed| {
            let t = table("threads = 3\nfile_mib = 1\nanon_mib = 1\nrequests = 300");
            let mut w = build(&t, "t", seed, 4).unwrap();
            w.threads
                .iter_mut()
                .map(|t| drain(t.stream.as_mut()))
                .collect::<Vec<_>>()
        };
        let a = run(11);
        assert_eq!(a, run(11));
        assert_ne!(a, run(12));
        assert_ne!(requests(&a[1]), requests(&a[2]), "threads differ");
    }
}
