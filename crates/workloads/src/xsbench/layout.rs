//! Where XSBench's data lives in the address space: text, the brk heap and the three big
//! mmapped arrays, placed the way glibc malloc and the kernel's top-down mmap would.

use super::config::XsbenchConfig;
use super::materials::num_nucs;
use super::PAGE;

/// `sizeof(NuclideGridPoint)`: 6 doubles.
pub(super) const NGP_BYTES: u64 = 48;

/// Fixed virtual layout. Text where a non-PIE x86-64 binary links; the brk heap (small mallocs)
/// a little above it; big mallocs (above glibc's 128 KiB mmap threshold) are mmapped top-down from
/// `MMAP_BASE` like the kernel's top-down mmap allocator does, rebased below 2^44 because the
/// simulator requires addresses < 2^44.
pub const TEXT_BASE: u64 = 0x40_0000;
/// Pages of the XSBench binary's text (file 0).
pub const TEXT_PAGES: u64 = 16;
pub const HEAP_BASE: u64 = 0x100_0000;
pub const MMAP_BASE: u64 = 0x0f00_0000_0000;

/// A virtual address range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub len: u64,
}

impl Region {
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.end()
    }
    pub fn pages(&self) -> u64 {
        self.len / PAGE
    }
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// glibc chunk size for a request (`request2size`): request + 8-byte size field, 16-aligned,
/// at least 32.
fn chunk_size(req: u64) -> u64 {
    align_up(req + 8, 16).max(32)
}

/// Where everything lives. The arrays start 16 bytes into their chunk (glibc's chunk header);
/// mmapped chunks have mapping length `align_up(chunk_size + 8, 4096)` (`sysmalloc_mmap`).
#[derive(Clone, Debug)]
pub struct XsbenchLayout {
    pub n_isotopes: u64,
    pub n_gridpoints: u64,
    /// `n_isotopes * n_gridpoints`: length of the unionized energy array.
    pub n_unionized: u64,
    pub max_num_nucs: u64,
    pub text: Region,
    /// The mappings of the three big arrays (mapping = chunk header + array + tail).
    pub nuclide_grid: Region,
    pub energy: Region,
    pub index_grid: Region,
    /// brk heap holding `num_nucs`, `mats`, `concs`.
    pub heap: Region,
    /// Array base addresses (what `malloc` returned).
    pub nuclide_grid_addr: u64,
    pub energy_addr: u64,
    pub index_grid_addr: u64,
    pub num_nucs_addr: u64,
    pub mats_addr: u64,
    pub concs_addr: u64,
}

impl XsbenchLayout {
    pub fn new(cfg: &XsbenchConfig) -> Self {
        let n_iso = cfg.size.n_isotopes();
        let n_grid = cfg.n_gridpoints();
        let n_u = n_iso * n_grid;
        let max_num_nucs = *num_nucs(n_iso).iter().max().unwrap() as u64;

        let mmap_len = |bytes: u64| align_up(chunk_size(bytes) + 8, PAGE);
        // Top-down: each new mapping ends where the previous one starts.
        let ng_len = mmap_len(n_u * NGP_BYTES);
        let nuclide_grid = Region {
            start: MMAP_BASE - ng_len,
            len: ng_len,
        };
        let e_len = mmap_len(n_u * 8);
        let energy = Region {
            start: nuclide_grid.start - e_len,
            len: e_len,
        };
        let ig_len = mmap_len(n_u * n_iso * 4);
        let index_grid = Region {
            start: energy.start - ig_len,
            len: ig_len,
        };

        // brk heap: consecutive chunks.
        let num_nucs_addr = HEAP_BASE + 16;
        let mats_chunk = HEAP_BASE + chunk_size(12 * 4);
        let mats_addr = mats_chunk + 16;
        let concs_chunk = mats_chunk + chunk_size(12 * max_num_nucs * 4);
        let concs_addr = concs_chunk + 16;
        let heap_end = concs_chunk + chunk_size(12 * max_num_nucs * 8);
        let heap = Region {
            start: HEAP_BASE,
            len: align_up(heap_end - HEAP_BASE, PAGE),
        };

        XsbenchLayout {
            n_isotopes: n_iso,
            n_gridpoints: n_grid,
            n_unionized: n_u,
            max_num_nucs,
            text: Region {
                start: TEXT_BASE,
                len: TEXT_PAGES * PAGE,
            },
            nuclide_grid,
            energy,
            index_grid,
            heap,
            nuclide_grid_addr: nuclide_grid.start + 16,
            energy_addr: energy.start + 16,
            index_grid_addr: index_grid.start + 16,
            num_nucs_addr,
            mats_addr,
            concs_addr,
        }
    }
}

/// Bytes of XSBench's three big arrays (what `estimate_mem_usage` counts for the unionized grid:
/// nuclide grids + unionized energy array + index grid).
pub fn estimate_mem_bytes(cfg: &XsbenchConfig) -> u64 {
    let n_iso = cfg.size.n_isotopes();
    let n_u = n_iso * cfg.n_gridpoints();
    n_u * NGP_BYTES + n_u * 8 + n_u * n_iso * 4
}
