//! The invariant checker: frame conservation, rmap consistency, LRU
//! membership and TLB coherence. A violation names the CPU, address and frame involved.

use crate::config::CheckLevel;
use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::mmzone::{lru_index, NR_LRU_LISTS};
use crate::mm::page::pg;
use crate::mm::pgtable::{pte, PAGE_SHIFT};
use crate::mm::sparse::PerFrame;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    FrameConservation,
    Rmap,
    LruMembership,
    TlbCoherence,
    FrameReuse,
    /// A CPU can still translate an address that munmap removed.
    StaleAfterUnmap,
    /// A PTE became writable while another CPU can still read an older copy of the page.
    StaleAfterUpgrade,
    /// A swap slot's reference count disagrees with the swap PTEs that hold its entry.
    SwapMap,
}

/// What the checker found wrong, with the CPU, address and frames involved.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    /// Free lists, per-CPU lists and in-use frames do not add up on a node.
    FrameConservation {
        when: String,
        node: usize,
        detail: String,
    },
    /// A PTE and the frame's owner record (or mapcount) disagree.
    Rmap { when: String, detail: String },
    /// A frame is on the wrong LRU list, or on none or several.
    LruMembership { when: String, detail: String },
    /// A swap PTE names a free slot, or a slot's count is not the number of its PTEs.
    SwapMap { when: String, detail: String },
    /// A usable TLB entry disagrees with its PTE and no pending flush covers it.
    StaleTlb {
        when: String,
        cpu: usize,
        mm: usize,
        vaddr: u64,
        pfn: u32,
        writable: bool,
        pte: u64,
    },
    /// A frame left the allocator while a CPU could still use a TLB entry for it.
    FrameReuse {
        pfn: u32,
        alloc_cpu: usize,
        cpu: usize,
        mm: usize,
        vaddr: u64,
    },
    /// A CPU can still translate an address that munmap removed.
    StaleAfterUnmap {
        cpu: usize,
        mm: usize,
        vaddr: u64,
        pfn: u32,
    },
    /// A PTE became writable while another CPU can still read an older copy of the page.
    StaleAfterUpgrade {
        cpu: usize,
        mm: usize,
        vaddr: u64,
        pfn: u32,
        old_pfn: u32,
    },
}

impl Violation {
    pub fn kind(&self) -> ViolationKind {
        match self {
            Violation::FrameConservation { .. } => ViolationKind::FrameConservation,
            Violation::Rmap { .. } => ViolationKind::Rmap,
            Violation::LruMembership { .. } => ViolationKind::LruMembership,
            Violation::SwapMap { .. } => ViolationKind::SwapMap,
            Violation::StaleTlb { .. } => ViolationKind::TlbCoherence,
            Violation::FrameReuse { .. } => ViolationKind::FrameReuse,
            Violation::StaleAfterUnmap { .. } => ViolationKind::StaleAfterUnmap,
            Violation::StaleAfterUpgrade { .. } => ViolationKind::StaleAfterUpgrade,
        }
    }

    /// When the checker saw it: a periodic check, the end of the run, or the event checked.
    pub fn when(&self) -> &str {
        match self {
            Violation::FrameConservation { when, .. }
            | Violation::Rmap { when, .. }
            | Violation::LruMembership { when, .. }
            | Violation::SwapMap { when, .. }
            | Violation::StaleTlb { when, .. } => when,
            Violation::FrameReuse { .. } => "allocation",
            Violation::StaleAfterUnmap { .. } => "munmap",
            Violation::StaleAfterUpgrade { .. } => "write upgrade",
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::FrameConservation { node, detail, .. } => write!(f, "node {node}: {detail}"),
            Violation::Rmap { detail, .. }
            | Violation::LruMembership { detail, .. }
            | Violation::SwapMap { detail, .. } => f.write_str(detail),
            Violation::StaleTlb { cpu, mm, vaddr, pfn, writable, pte, .. } => write!(
                f,
                "CPU {cpu} caches mm {mm} address {vaddr:#x} → frame {pfn}{} but the PTE is {pte:#x}, and no flush is pending",
                if *writable { " (writable)" } else { "" }
            ),
            Violation::FrameReuse { pfn, alloc_cpu, cpu, mm, vaddr } => write!(
                f,
                "frame {pfn} handed out by CPU {alloc_cpu} while CPU {cpu} can still use a TLB entry for mm {mm} address {vaddr:#x}"
            ),
            Violation::StaleAfterUnmap { cpu, mm, vaddr, pfn } => write!(
                f,
                "CPU {cpu} still translates mm {mm} address {vaddr:#x} → frame {pfn} after munmap"
            ),
            Violation::StaleAfterUpgrade { cpu, mm, vaddr, pfn, old_pfn } => write!(
                f,
                "mm {mm} address {vaddr:#x} became writable on frame {pfn} while CPU {cpu} still reads frame {old_pfn}"
            ),
        }
    }
}

pub struct Checker {
    pub level: CheckLevel,
    pub violations: Vec<Violation>,
    /// Total violations seen (the list keeps the first 100).
    pub count: u64,
    /// Checks run (the TLB check at every sample, and the full ones).
    pub checks_run: u64,
    /// Of those, checks of every invariant (bookkeeping too).
    pub full_checks: u64,
}

impl Checker {
    pub fn new(level: CheckLevel) -> Self {
        Checker {
            level,
            violations: Vec::new(),
            count: 0,
            checks_run: 0,
            full_checks: 0,
        }
    }

    fn report(&mut self, v: Violation) {
        self.count += 1;
        if self.violations.len() < 100 {
            self.violations.push(v);
        }
    }

    pub fn count_of(&self, kind: ViolationKind) -> usize {
        self.violations.iter().filter(|v| v.kind() == kind).count()
    }
}

impl Kernel {
    /// Run every invariant now.
    pub fn check_invariants(&mut self, m: &Machine, when: &str) {
        self.checker.checks_run += 1;
        self.checker.full_checks += 1;
        self.check_frame_conservation(m, when);
        self.check_rmap(when);
        self.check_lru(when);
        self.check_tlb_coherence(m, when);
        self.check_swap_map(when);
    }

    /// The safety invariant alone: every usable TLB entry matches its PTE (or is a stale
    /// entry a pending flush covers). Its cost follows the TLBs' size, not the machine's.
    pub fn check_tlb_invariants(&mut self, m: &Machine, when: &str) {
        self.checker.checks_run += 1;
        self.check_tlb_coherence(m, when);
    }

    /// How many frames and page-table entries a full check walks: the size its cost follows.
    /// The frames counted are the machine's (as before sections were initialised lazily),
    /// so the check schedule does not change; the walk itself covers present sections only.
    pub fn check_items(&self) -> u64 {
        self.frames.len() as u64
            + (self.mms.iter())
                .map(|mm| mm.rss_anon + mm.rss_file + mm.rss_shmem)
                .sum::<u64>()
    }

    /// Every swap slot's count (swap_map) equals the swap PTEs and shmem page-cache entries
    /// holding it: an entry left on a freed slot would read another page's data on swap-in.
    fn check_swap_map(&mut self, when: &str) {
        if self.swap.devices.is_empty() {
            return;
        }
        let mut refs: Vec<Vec<u8>> = self
            .swap
            .devices
            .iter()
            .map(|d| vec![0; d.swap_map.len()])
            .collect();
        let mut bad = Vec::new();
        for (mm, space) in self.mms.iter().enumerate() {
            for (vpn, p) in space.pgtable.iter() {
                if !pte::is_swap(p) {
                    continue;
                }
                let (ty, offset) = pte::swap_entry(p);
                match refs.get_mut(ty).and_then(|r| r.get_mut(offset as usize)) {
                    Some(r) => *r = r.saturating_add(1),
                    None => bad.push(format!(
                        "mm {mm} vpn {vpn:#x}: swap entry ({ty}, {offset}) beyond every area"
                    )),
                }
            }
        }
        for (f, file) in self.files.iter().enumerate() {
            for (&index, &(ty, offset)) in &file.swapped {
                if file.pages[index as usize] != crate::mm::page::NIL {
                    bad.push(format!(
                        "shmem file {f} page {index}: both a frame and swap entry ({ty}, {offset})"
                    ));
                }
                match refs.get_mut(ty).and_then(|r| r.get_mut(offset as usize)) {
                    Some(r) => *r = r.saturating_add(1),
                    None => bad.push(format!(
                        "shmem file {f} page {index}: swap entry ({ty}, {offset}) beyond every area"
                    )),
                }
            }
        }
        for (ty, (d, r)) in self.swap.devices.iter().zip(&refs).enumerate() {
            for (offset, (&count, &held)) in d.swap_map.iter().zip(r).enumerate() {
                if count != held {
                    bad.push(format!(
                        "swap area {ty} slot {offset}: swap_map {count}, held by {held} PTEs \
                         and shmem entries"
                    ));
                }
            }
            // The swap cache: SWAP_HAS_CACHE exactly where a folio is cached, and that folio
            // an in-use swap-backed frame that knows its slot.
            for (offset, (&has, &pfn)) in d.has_cache.iter().zip(&d.cache).enumerate() {
                let cached = pfn != crate::mm::page::NIL;
                let knows = cached
                    && self.swap.folio_entry.get(&pfn) == Some(&(ty, offset as u32))
                    && self.frames.get(pfn).has(pg::USED)
                    && self.frames.get(pfn).has(pg::SWAPBACKED);
                if has != cached || (cached && !knows) {
                    bad.push(format!(
                        "swap area {ty} slot {offset}: SWAP_HAS_CACHE {has}, cached frame {pfn}"
                    ));
                }
            }
        }
        for detail in bad.into_iter().take(100) {
            self.checker.report(Violation::SwapMap {
                when: when.into(),
                detail,
            });
        }
    }

    /// Per node: buddy free + per-CPU lists + in use = total; every frame in exactly one state.
    fn check_frame_conservation(&mut self, m: &Machine, when: &str) {
        for n in 0..self.nodes.len() {
            let start = if n == 0 { 0 } else { m.node_end_pfn[n - 1] };
            let end = m.node_end_pfn[n];
            let total = (end - start) as u64;
            let zone = &self.nodes[n].zone;
            let mut buddy = 0u64;
            for (order, list) in zone.free_area.iter().enumerate() {
                for pfn in self.frames.list_iter(list) {
                    let p = self.frames.get(pfn);
                    if !p.has(pg::BUDDY) || p.order as usize != order {
                        self.checker.report(Violation::FrameConservation {
                            when: when.into(),
                            node: n,
                            detail: format!("frame {pfn} on the order-{order} free list without PageBuddy of that order"),
                        });
                    }
                    buddy += 1 << order;
                }
            }
            // The deferred max-order blocks are free pages no list holds yet.
            buddy += zone.nr_deferred_pages();
            let pcp = zone.pcp_pages();
            let used = (self.frames.iter_range(start, end))
                .filter(|(_, p)| p.has(pg::USED))
                .count() as u64;
            if buddy != zone.nr_free || buddy + pcp + used != total {
                self.checker.report(Violation::FrameConservation {
                    when: when.into(),
                    node: n,
                    detail: format!(
                        "buddy {buddy} (nr_free {}) + pcp {pcp} + in use {used} != {total} frames",
                        zone.nr_free
                    ),
                });
            }
        }
    }

    /// A present PTE maps an in-use frame whose owner record points back; mapcounts agree.
    fn check_rmap(&mut self, when: &str) {
        let mut mapcount = PerFrame::new(&self.frames, 0u32);
        for mm in 0..self.mms.len() {
            let ptes: Vec<(u32, u64)> = self.mms[mm].pgtable.iter().collect();
            for (vpn, p) in ptes {
                if !pte::maps_frame(p) {
                    continue;
                }
                let pfn = pte::pfn(p);
                if self.is_zero_pfn(pfn) {
                    continue;
                }
                if !self.frames.initialised(pfn) {
                    self.checker.report(Violation::Rmap {
                        when: when.into(),
                        detail: format!(
                            "mm {mm} address {:#x} maps frame {pfn}, in a section never initialised",
                            (vpn as u64) << PAGE_SHIFT
                        ),
                    });
                    continue;
                }
                let page = *self.frames.get(pfn);
                mapcount[pfn] += 1;
                let ok = page.has(pg::USED)
                    && if page.has(pg::ANON) {
                        page.index == vpn
                            && (self.anon_vmas.members.get(page.owner as usize))
                                .is_some_and(|members| members.contains(&(mm as u32)))
                    } else {
                        self.mms[mm]
                            .find_vma((vpn as u64) << PAGE_SHIFT)
                            .and_then(|v| v.file_index(vpn))
                            .is_some_and(|(f, idx)| f == page.owner && idx == page.index as u64)
                    };
                if !ok {
                    self.checker.report(Violation::Rmap {
                        when: when.into(),
                        detail: format!(
                            "mm {mm} address {:#x} maps frame {pfn}, whose owner is {} index {} (flags {:#x})",
                            (vpn as u64) << PAGE_SHIFT,
                            page.owner,
                            page.index,
                            page.flags
                        ),
                    });
                }
            }
        }
        let wrong: Vec<String> = (self.frames.iter())
            .filter(|&(pfn, page)| {
                !self.is_zero_pfn(pfn)
                    && page.has(pg::USED)
                    && page.mapcount as u32 != mapcount[pfn]
            })
            .map(|(pfn, page)| {
                format!(
                    "frame {pfn}: mapcount {} but {} PTEs map it",
                    page.mapcount, mapcount[pfn]
                )
            })
            .collect();
        for d in wrong {
            self.checker.report(Violation::Rmap {
                when: when.into(),
                detail: d,
            });
        }
        // NR_ANON_THPS counts the THPs huge PMDs map.
        for n in 0..self.nodes.len() {
            let (counted, mapped) = (self.anon_thps_on(n), self.anon_thps_mapped_on(n));
            if counted != mapped {
                self.checker.report(Violation::Rmap {
                    when: when.into(),
                    detail: format!("node {n}: NR_ANON_THPS {counted}, huge PMDs map {mapped}"),
                });
            }
        }
    }

    /// Every in-use user frame is on exactly the LRU list its flags name, unless isolated.
    /// With MGLRU: on exactly one generation list, with the generation accounting of
    /// `lru_gen_check`.
    fn check_lru(&mut self, when: &str) {
        let mut seen = PerFrame::new(&self.frames, 0u8);
        for n in 0..self.nodes.len() {
            if self.lru_gen_on(n) {
                for d in self.lru_gen_check(n) {
                    self.checker.report(Violation::LruMembership {
                        when: when.into(),
                        detail: d,
                    });
                }
                for lists in self.nodes[n].lrugen.folios {
                    for list in lists {
                        for pfn in self.frames.list_iter(&list) {
                            seen[pfn] += 1;
                            let p = self.frames.get(pfn);
                            if !p.has(pg::LRU) || p.node as usize != n {
                                self.checker.report(Violation::LruMembership {
                                    when: when.into(),
                                    detail: format!(
                                        "frame {pfn} on node {n}'s generations but its flags are {:#x}",
                                        p.flags
                                    ),
                                });
                            }
                        }
                    }
                }
                continue;
            }
            for lru in 0..NR_LRU_LISTS {
                let list = self.nodes[n].lru[lru];
                for pfn in self.frames.list_iter(&list) {
                    seen[pfn] += 1;
                    let p = self.frames.get(pfn);
                    if !p.has(pg::LRU)
                        || lru_index(p.has(pg::SWAPBACKED), p.has(pg::ACTIVE)) != lru
                        || p.node as usize != n
                    {
                        self.checker.report(Violation::LruMembership {
                            when: when.into(),
                            detail: format!(
                                "frame {pfn} on node {n} list {lru} but its flags are {:#x}",
                                p.flags
                            ),
                        });
                    }
                }
            }
        }
        let wrong: Vec<String> = (self.frames.iter())
            .filter(|&(pfn, p)| !self.is_zero_pfn(pfn) && p.has(pg::USED) && !p.has(pg::RESERVED))
            .filter_map(|(pfn, p)| {
                let expected = u8::from(!p.has(pg::ISOLATED));
                (seen[pfn] != expected).then(|| {
                    format!(
                        "in-use frame {pfn} is on {} LRU lists (expected {expected})",
                        seen[pfn]
                    )
                })
            })
            .collect();
        for d in wrong {
            self.checker.report(Violation::LruMembership {
                when: when.into(),
                detail: d,
            });
        }
    }

    /// A stale entry is covered by a pending flush: the reclaim batch still to be flushed, or
    /// a MIGRC deferral (read-only, clean, old frame still waiting for its flush).
    fn stale_entry_covered(&self, c: usize, pfn: u32, data: u32) -> bool {
        if self.tlb_ubc.flush_required && self.tlb_ubc.arch.cpumask.test(c) {
            return true;
        }
        let p = self.frames.get(pfn);
        self.migrc.pending.test(c)
            && data & (crate::machine::tlb::TLB_WRITE | crate::machine::tlb::TLB_DIRTY) == 0
            && p.has(pg::NEED_FLUSH)
            && p.flush_gen > self.migrc.done
    }

    /// A TLB entry matches its PTE (frame and write permission) or a flush covers it.
    fn check_tlb_coherence(&mut self, m: &Machine, when: &str) {
        let mut bad = Vec::new();
        for c in 0..m.cpus.len() {
            let cpu = &m.cpus[c];
            for tlb in [&cpu.dtlb, &cpu.dtlb_2m, &cpu.itlb, &cpu.stlb] {
                for (vpn, asid, data, pages) in tlb.valid_entries() {
                    let Some(mm) = self.arch_entry_usable(m, c, asid) else {
                        continue;
                    };
                    let p = self.mms[mm].pgtable.get(vpn);
                    let pfn = crate::machine::tlb::tlb_pfn(data);
                    let writable = data & crate::machine::tlb::TLB_WRITE != 0;
                    // A 2 MiB entry needs a huge PMD (a split flushes it), a 4 KiB one a PTE.
                    let size_ok = (pages > 1) == (p & pte::HUGE != 0);
                    let ok = size_ok
                        && pte::present(p)
                        && pte::pfn(p) == pfn
                        && (!writable || p & pte::WRITE != 0);
                    if !ok && !self.stale_entry_covered(c, pfn, data) {
                        bad.push(Violation::StaleTlb {
                            when: when.into(),
                            cpu: c,
                            mm,
                            vaddr: (vpn as u64) << PAGE_SHIFT,
                            pfn,
                            writable,
                            pte: p,
                        });
                    }
                }
            }
        }
        for v in bad {
            self.checker.report(v);
        }
    }

    /// Usable TLB entries of `mm` on any CPU whose address is in [s, e), as (cpu, vpn, pfn).
    fn usable_entries_in(&self, m: &Machine, mm: usize, s: u32, e: u32) -> Vec<(usize, u32, u32)> {
        let mut out = Vec::new();
        for c in 0..m.cpus.len() {
            let cpu = &m.cpus[c];
            for tlb in [&cpu.dtlb, &cpu.dtlb_2m, &cpu.itlb, &cpu.stlb] {
                for (vpn, asid, data, pages) in tlb.valid_entries() {
                    // The first address of [s, e) the entry translates, if any.
                    let first = vpn.max(s);
                    if first < e
                        && (first - vpn) < pages
                        && self.arch_entry_usable(m, c, asid) == Some(mm)
                    {
                        let pfn = crate::machine::tlb::tlb_pfn(data) + (first - vpn);
                        out.push((c, first, pfn));
                    }
                }
            }
        }
        out
    }

    /// Strict mode, after munmap: no CPU may still translate the removed range.
    pub(crate) fn check_stale_after_unmap(&mut self, m: &Machine, mm: usize, s: u32, e: u32) {
        if self.checker.level != CheckLevel::Strict {
            return;
        }
        for (c, vpn, pfn) in self.usable_entries_in(m, mm, s, e) {
            self.checker.report(Violation::StaleAfterUnmap {
                cpu: c,
                mm,
                vaddr: (vpn as u64) << PAGE_SHIFT,
                pfn,
            });
        }
    }

    /// Strict mode, after a huge PMD became a PTE table: no CPU may keep the 2 MiB
    /// translation (pmdp_invalidate flushed it), whose permissions the PTEs no longer share.
    pub(crate) fn check_stale_after_split(&mut self, m: &Machine, mm: usize, base: u32) {
        if self.checker.level != CheckLevel::Strict {
            return;
        }
        let mut bad = Vec::new();
        for c in 0..m.cpus.len() {
            let cpu = &m.cpus[c];
            for tlb in [&cpu.dtlb_2m, &cpu.stlb] {
                for (vpn, asid, data, pages) in tlb.valid_entries() {
                    if pages > 1 && vpn == base && self.arch_entry_usable(m, c, asid) == Some(mm) {
                        bad.push(Violation::StaleTlb {
                            when: "huge PMD split".into(),
                            cpu: c,
                            mm,
                            vaddr: (vpn as u64) << PAGE_SHIFT,
                            pfn: crate::machine::tlb::tlb_pfn(data),
                            writable: data & crate::machine::tlb::TLB_WRITE != 0,
                            pte: self.mms[mm].pgtable.get(vpn),
                        });
                    }
                }
            }
        }
        for v in bad {
            self.checker.report(v);
        }
    }

    /// Strict mode, after a PTE became writable: no CPU may read another copy of the page.
    pub(crate) fn check_stale_after_upgrade(&mut self, m: &Machine, mm: usize, vpn: u32, pfn: u32) {
        if self.checker.level != CheckLevel::Strict {
            return;
        }
        for (c, _, old) in self.usable_entries_in(m, mm, vpn, vpn + 1) {
            if old != pfn {
                self.checker.report(Violation::StaleAfterUpgrade {
                    cpu: c,
                    mm,
                    vaddr: (vpn as u64) << PAGE_SHIFT,
                    pfn,
                    old_pfn: old,
                });
            }
        }
    }

    /// Strict mode: a frame leaving the allocator must not be reachable through any usable
    /// TLB entry (the MIGRC reviewers' concern).
    pub(crate) fn check_frame_reuse(&mut self, m: &Machine, pfn: u32, alloc_cpu: usize) {
        if self.checker.level != CheckLevel::Strict {
            return;
        }
        let mut bad = Vec::new();
        for c in 0..m.cpus.len() {
            let cpu = &m.cpus[c];
            for tlb in [&cpu.dtlb, &cpu.dtlb_2m, &cpu.itlb, &cpu.stlb] {
                for (vpn, asid, data, pages) in tlb.valid_entries() {
                    let first = crate::machine::tlb::tlb_pfn(data);
                    if pfn < first || pfn - first >= pages {
                        continue;
                    }
                    let vpn = vpn + (pfn - first);
                    if let Some(mm) = self.arch_entry_usable(m, c, asid) {
                        bad.push(Violation::FrameReuse {
                            pfn,
                            alloc_cpu,
                            cpu: c,
                            mm,
                            vaddr: (vpn as u64) << PAGE_SHIFT,
                        });
                    }
                }
            }
        }
        for v in bad {
            self.checker.report(v);
        }
    }
}
