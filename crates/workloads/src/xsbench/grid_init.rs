//! Thread 0's initialization (`GridInit.c` `grid_init_do_not_profile`, then `Materials.c`):
//! every array mmapped and filled page by page, the sorts as compute.

use tierlab::workload::{prot, Backing, Op};

use super::config::XsbenchConfig;
use super::layout::XsbenchLayout;
use super::stream::Seg;
use super::PAGE;

/// Cycles per comparison charged for the `qsort`s of the init phase (per-nuclide sort of the
/// nuclide grid, sort of the unionized energy array), `n*log2(n)` comparisons each. glibc's qsort
/// calls the comparator through a function pointer (`NGP_compare` / `double_compare`) and, on
/// random keys, mispredicts about half of the branches: ~15-20 cycles per comparison. The sorts do
/// not re-touch pages for the first time (every page is already faulted by the fill), so they are
/// emitted as pure `Compute`. Large: ~0.9 G cycles (nuclide grid) + ~1.4 G (energy array).
pub const QSORT_CYCLES_PER_COMPARE: u32 = 16;

/// `n*log2(n)` comparisons at `QSORT_CYCLES_PER_COMPARE`, as (count, cycles) Compute ops with no
/// single op above 2^26 cycles.
fn qsort_compute(n: u64) -> Seg {
    let total = (n as f64 * (n.max(2) as f64).log2() * QSORT_CYCLES_PER_COMPARE as f64) as u64;
    const MAX: u64 = 1 << 26;
    let count = total.div_ceil(MAX).max(1);
    Seg::Compute {
        count,
        cycles: (total / count) as u32,
    }
}

/// Thread 0's initialization (`grid_init_do_not_profile`), page-granular.
pub(super) fn init_segments(cfg: &XsbenchConfig, l: &XsbenchLayout) -> Vec<Seg> {
    let rw = prot::READ | prot::WRITE;
    let c = cfg.init_cycles_per_page;
    let mut s = vec![
        Seg::Op(Op::Mmap {
            addr: l.text.start,
            len: l.text.len,
            prot: prot::READ | prot::EXEC,
            backing: Backing::File { file: 0, pgoff: 0 },
        }),
        Seg::Op(Op::IFetch(l.text.start)),
        // 1. nuclide_grid: malloc (mmap) and sequential LCG fill.
        Seg::Op(Op::Mmap {
            addr: l.nuclide_grid.start,
            len: l.nuclide_grid.len,
            prot: rw,
            backing: Backing::Anon,
        }),
        Seg::Touch {
            start: l.nuclide_grid.start,
            pages: l.nuclide_grid.pages(),
            cycles: c,
        },
    ];
    // Per-nuclide qsort: only compute; its pages were all faulted by the fill, so the sort's
    // re-touching is not emitted.
    let per_nuc = qsort_compute(l.n_gridpoints);
    if let Seg::Compute { count, cycles } = per_nuc {
        s.push(Seg::Compute {
            count: count * l.n_isotopes,
            cycles,
        });
    }
    // 2. unionized energy array: malloc, copy of the energies (the reads of the nuclide grid are
    //    not emitted), qsort (compute only, pages already faulted).
    s.push(Seg::Op(Op::Mmap {
        addr: l.energy.start,
        len: l.energy.len,
        prot: rw,
        backing: Backing::Anon,
    }));
    s.push(Seg::Touch {
        start: l.energy.start,
        pages: l.energy.pages(),
        cycles: c,
    });
    s.push(qsort_compute(l.n_unionized));
    // 3. index_grid: malloc and fill row by row, sequentially, single threaded.
    s.push(Seg::Op(Op::Mmap {
        addr: l.index_grid.start,
        len: l.index_grid.len,
        prot: rw,
        backing: Backing::Anon,
    }));
    s.push(Seg::Touch {
        start: l.index_grid.start,
        pages: l.index_grid.pages(),
        cycles: c,
    });
    // 4. num_nucs, mats, concs: small mallocs from the brk heap, written in that order.
    s.push(Seg::Op(Op::Mmap {
        addr: l.heap.start,
        len: l.heap.len,
        prot: rw,
        backing: Backing::Anon,
    }));
    let mut last_page = u64::MAX;
    let arrays = [
        (l.num_nucs_addr, 12 * 4),
        (l.mats_addr, 12 * l.max_num_nucs * 4),
        (l.concs_addr, 12 * l.max_num_nucs * 8),
    ];
    for (addr, bytes) in arrays {
        let first = addr / PAGE;
        let last = (addr + bytes - 1) / PAGE;
        for p in first..=last {
            if p != last_page {
                s.push(Seg::Op(Op::Store(p * PAGE)));
                s.push(Seg::Op(Op::Compute(c)));
                last_page = p;
            }
        }
    }
    s
}
