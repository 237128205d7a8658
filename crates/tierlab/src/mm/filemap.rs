//! The page cache (mm/filemap.c): per file, which frame holds each page, and which address
//! spaces map the file (the i_mmap set the file rmap walk visits). A shmem file's page cache
//! also holds the swap entries of its swapped-out pages (xarray value entries).

use std::collections::BTreeMap;

use crate::mm::page::NIL;

pub struct PageCacheFile {
    pub name: String,
    /// pfn per page index, NIL when not cached.
    pub pages: Vec<u32>,
    pub nr_cached: u64,
    /// mm ids with at least one VMA of this file (address_space->i_mmap, per mm).
    pub mappers: Vec<u32>,
    /// A shmem (tmpfs) file: its pages are swap-backed and a hole reads as zeroes.
    pub shmem: bool,
    /// shmem: the swap entry (area, slot) of each swapped-out page, by index; each holds one
    /// reference to its slot (swap_shmem_alloc).
    pub swapped: BTreeMap<u32, (usize, u32)>,
}

impl PageCacheFile {
    pub fn new(name: &str, pages: u64, shmem: bool) -> Self {
        PageCacheFile {
            name: name.to_string(),
            pages: vec![NIL; pages as usize],
            nr_cached: 0,
            mappers: Vec::new(),
            shmem,
            swapped: BTreeMap::new(),
        }
    }

    /// filemap_get_folio
    pub fn lookup(&self, index: u64) -> Option<u32> {
        match self.pages.get(index as usize) {
            Some(&p) if p != NIL => Some(p),
            _ => None,
        }
    }
}
