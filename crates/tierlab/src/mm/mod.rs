//! The kernel memory manager, one file per Linux file it models.

pub mod alloc_pages;
pub mod filemap;
pub mod lru_gen;
pub mod madvise;
pub mod memory;
pub mod memory_tiers;
pub mod migrate;
pub mod migrc;
pub mod mm_init;
pub mod mm_types;
pub mod mmap;
pub mod mmzone;
pub mod numa_balancing;
pub mod numa_placement;
pub mod numa_scan;
pub mod numa_scan_trace;
pub mod page;
pub mod page_alloc;
pub mod page_io;
pub mod pgtable;
pub mod rmap;
pub mod shmem;
pub mod swap;
pub mod swapfile;
pub mod vmscan;
pub mod vmstat;
