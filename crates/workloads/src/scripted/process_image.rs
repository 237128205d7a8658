//! The mappings a scripted workload's process has besides its regions: those of the C program
//! it stands for (`c_program`, built with `cc -O2 -static -pthread`), as `/proc/self/maps`
//! shows them on Debian 12 (glibc 2.36) with address randomisation off:
//!
//! ```text
//! 00400000-00401000 r--p  program     ELF header
//! 00401000-004a5000 r-xp  program     text
//! 004a5000-004d1000 r--p  program     rodata
//! 004d1000-004d5000 r--p  program     RELRO
//! 004d5000-004d8000 rw-p  program     data
//! 004d8000-004e6000 rw-p              bss
//! 004e6000-00529000 rw-p              [heap]
//! 10000000-...      rw-p              the regions (regions.rs)
//! ...               rw-p              malloc'd per-page sample buffers (untouched here)
//! per worker        ---p + rw-p 8 MiB guard page and pthread stack (first worker highest)
//! 7ffff7ff7000-...                    [vvar], [vdso]
//! 7ffffffde000-7ffffffff000 rw-p      [stack]
//! ```
//!
//! They matter to NUMA balancing: task_numa_work walks every VMA in address order, and the
//! forced retry (`vma_pids_forced`) scans the first VMA this task has not faulted in, which
//! is the data segment, not a region. Read-only file mappings are skipped by the scanner;
//! `[vvar]` is VM_PFNMAP (not migratable) and `[vdso]` holds kernel pages, so neither is
//! modelled. The simulator's user space ends at 2^44, so the top of the address space (stacks)
//! is moved down from 2^47 by the same offset for every mapping, keeping their order.

use tierlab::workload::{prot, Backing, FileSpec, Op};

use super::PAGE;

/// The top of the simulated user address space (the real one is 2^47).
const TOP: u64 = tierlab::mm::pgtable::USER_VA_END;
/// Regions must end below this: the stacks and the mmap area live above it.
pub(super) const REGIONS_END: u64 = TOP - (64 << 30);

/// The program file's size in pages (0x4d8000 bytes: header, text, rodata, RELRO, data).
const PROGRAM_PAGES: u64 = 0xd8;
/// The main thread's stack VMA: 0x21000 bytes ending one page below the top.
const STACK_PAGES: u64 = 0x21;
/// The mmap area starts below [vvar]/[vdso] (0x7ffff7ff7000, 0x8009000 below 2^47).
const MMAP_BASE: u64 = TOP - 0x800_9000;
/// glibc's default pthread stack: RLIMIT_STACK (8 MiB) plus a guard page.
const THREAD_STACK: u64 = 8 << 20;

/// (start, pages, prot, backing page offset in the program file or None for anon).
const IMAGE: [(u64, u64, u8, Option<u64>); 7] = [
    (0x40_0000, 0x1, prot::READ, Some(0x0)),
    (0x40_1000, 0xa4, prot::READ | prot::EXEC, Some(0x1)),
    (0x4a_5000, 0x2c, prot::READ, Some(0xa5)),
    (0x4d_1000, 0x4, prot::READ, Some(0xd1)),
    // Data: a private file mapping whose written pages are anonymous copies.
    (0x4d_5000, 0x3, prot::READ | prot::WRITE, None),
    (0x4d_8000, 0xe, prot::READ | prot::WRITE, None),
    (0x4e_6000, 0x43, prot::READ | prot::WRITE, None),
];

/// The process image for `workers` threads and regions of `region_pages` pages in all.
pub(super) struct ProcessImage {
    /// The program file (its id is `file`).
    pub file: FileSpec,
    file_id: u32,
    workers: u32,
    /// The malloc'd sample buffers: 4 bytes per region page (`region_status`).
    buffers_pages: u64,
}

impl ProcessImage {
    pub fn new(file_id: u32, workers: u32, region_pages: u64) -> Self {
        ProcessImage {
            file: FileSpec {
                name: "program".into(),
                pages: PROGRAM_PAGES,
                shmem: false,
            },
            file_id,
            workers,
            buffers_pages: (region_pages * 4).div_ceil(PAGE) + 1,
        }
    }

    fn buffers_start(&self) -> u64 {
        MMAP_BASE - self.buffers_pages * PAGE
    }

    /// Worker `t`'s stack mapping (below its guard page), first worker highest.
    fn stack_of(&self, t: u32) -> (u64, u64) {
        let top = self.buffers_start() - t as u64 * (THREAD_STACK + PAGE);
        (top - THREAD_STACK, top)
    }

    /// What exec and the C runtime map and touch before `main` maps the regions, then the
    /// sample buffers and the workers' stacks (pthread_create). Which pages the runtime
    /// touches is an estimate: all of data and bss, the first heap pages, the top of the
    /// stack; they live in DRAM, which tiering-mode scans skip.
    pub fn main_ops(&self) -> Vec<Op> {
        let mut ops = Vec::new();
        for &(start, pages, prot, pgoff) in &IMAGE {
            let backing = match pgoff {
                Some(pgoff) => Backing::File {
                    file: self.file_id,
                    pgoff,
                },
                None => Backing::Anon,
            };
            ops.push(Op::Mmap {
                addr: start,
                len: pages * PAGE,
                prot,
                backing,
            });
        }
        let stack = TOP - PAGE - STACK_PAGES * PAGE;
        ops.push(anon(stack, STACK_PAGES, prot::READ | prot::WRITE));
        // data, bss, 4 heap pages, 4 stack pages.
        let touched = [(0x4d_5000, 0x3 + 0xe), (0x4e_6000, 4), (TOP - 5 * PAGE, 4)];
        for (start, pages) in touched {
            ops.extend((0..pages).map(|i| Op::Store(start + i * PAGE)));
        }
        ops
    }

    /// pthread_create's mappings, after main has mapped the regions: the sample buffers,
    /// then per worker a guard page and its stack.
    pub fn thread_ops(&self) -> Vec<Op> {
        let mut ops = vec![anon(
            self.buffers_start(),
            self.buffers_pages,
            prot::READ | prot::WRITE,
        )];
        for t in 0..self.workers {
            let (lo, _) = self.stack_of(t);
            ops.push(anon(lo - PAGE, 1, 0));
            ops.push(anon(lo, THREAD_STACK / PAGE, prot::READ | prot::WRITE));
        }
        ops
    }

    /// Worker `t` starts on its stack: `struct pthread` and the TLS at the top, then its
    /// frames (two pages; an estimate).
    pub fn worker_ops(&self, t: u32) -> Vec<Op> {
        let (_, top) = self.stack_of(t);
        vec![Op::Store(top - PAGE), Op::Store(top - 2 * PAGE)]
    }
}

fn anon(addr: u64, pages: u64, prot: u8) -> Op {
    Op::Mmap {
        addr,
        len: pages * PAGE,
        prot,
        backing: Backing::Anon,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(ops: &[Op]) -> Vec<(u64, u64, u8)> {
        ops.iter()
            .filter_map(|o| match o {
                Op::Mmap {
                    addr, len, prot, ..
                } => Some((*addr, addr + len, *prot)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_mappings_are_disjoint_above_the_regions_or_below_them_and_touches_land_inside() {
        let img = ProcessImage::new(3, 4, 155_648);
        let main = img.main_ops();
        let threads = img.thread_ops();
        let mut all = ranges(&main);
        all.extend(ranges(&threads));
        // 7 image mappings and the stack; the buffers; a guard page and a stack per worker.
        assert_eq!(all.len(), 8 + 1 + 2 * 4);
        all.sort();
        for w in all.windows(2) {
            assert!(w[0].1 <= w[1].0, "overlap: {w:?}");
        }
        for &(s, e, _) in &all {
            assert!(
                e <= super::super::regions::BASE || s >= REGIONS_END,
                "{s:#x}..{e:#x}"
            );
            assert!(e <= TOP);
        }
        // 4 bytes of status for each of 155,648 pages (152 pages), plus a page.
        assert_eq!(img.buffers_pages, 153);
        // Guard pages are inaccessible; the first worker's stack is the highest.
        let guards = all.iter().filter(|r| r.2 == 0).count();
        assert_eq!(guards, 4);
        assert!(img.stack_of(0).0 > img.stack_of(1).1);
        let inside = |a: u64| {
            all.iter()
                .any(|&(s, e, p)| s <= a && a < e && p & prot::WRITE != 0)
        };
        let mut stores: Vec<u64> = main
            .iter()
            .filter_map(|o| match o {
                Op::Store(a) => Some(*a),
                _ => None,
            })
            .collect();
        for t in 0..4 {
            stores.extend(img.worker_ops(t).iter().filter_map(|o| match o {
                Op::Store(a) => Some(*a),
                _ => None,
            }));
        }
        assert_eq!(stores.len(), 17 + 4 + 4 + 4 * 2);
        assert!(
            stores.iter().all(|&a| inside(a)),
            "a store outside a writable mapping"
        );
    }
}
