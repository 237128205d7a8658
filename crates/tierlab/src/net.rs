//! Socket buffers between processes: the sender's CPU allocates the pages, the receiver's
//! frees them (net/unix/af_unix.c `unix_stream_sendmsg`, `unix_stream_read_generic`;
//! net/core/skbuff.c `alloc_skb_with_frags`; net/sctp/sm_make_chunk.c `_sctp_make_chunk`).
//! What matters to the page allocator: the orders, and that allocations and frees land on
//! different CPUs (the workload seed 002's networking tables measure).

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::page::NIL;
use crate::workload::SockKind;
use std::collections::VecDeque;

/// sk_sndbuf: sysctl_wmem_default, 212,992 bytes on 64-bit (net/core/sock.c SK_WMEM_MAX).
const SK_SNDBUF: u64 = 212_992;
/// SKB_MAX_HEAD(0) with 4 KiB pages: a page less the aligned skb_shared_info (320 bytes).
const SKB_MAX_HEAD: u64 = 4096 - 320;
/// UNIX_SKB_FRAGS_SZ: PAGE_SIZE << get_order(32768).
const UNIX_SKB_FRAGS_SZ: u64 = 32_768;
/// The page allocator serves kmalloc above KMALLOC_MAX_CACHE_SIZE (8 KiB, SLUB).
const KMALLOC_MAX_CACHE_SIZE: u64 = 8192;
/// alloc_skb_with_frags starts at order get_order(UNIX_SKB_FRAGS_SZ).
const UNIX_FRAG_ORDER: usize = 3;

/// One socket's receive queue: page blocks (pfn, order) and the bytes each carries.
#[derive(Default)]
pub struct Socket {
    queue: VecDeque<(u32, u8, u32)>,
    queued: u64,
    /// The thread asleep in recv, or in send for room (NIL: none).
    reader: u32,
    writer: u32,
}

/// Every socket the workload has used, by id.
#[derive(Default)]
pub struct Sockets {
    socks: Vec<Socket>,
}

impl Sockets {
    fn get(&mut self, sock: u32) -> &mut Socket {
        let i = sock as usize;
        if i >= self.socks.len() {
            self.socks.resize_with(i + 1, || Socket {
                reader: NIL,
                writer: NIL,
                ..Default::default()
            });
        }
        &mut self.socks[i]
    }
}

/// What a send or recv did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockOp {
    Done,
    /// The thread must sleep until the other side makes progress (sock_wait_for_wmem,
    /// unix_stream_data_wait).
    Sleep,
}

impl Kernel {
    /// Thread `tid` sleeps in send or recv on CPU `c` until the other side wakes it.
    pub(crate) fn sock_sleep(&mut self, m: &mut Machine, c: usize, tid: usize) {
        self.sched.threads[tid].state = crate::sched::ThreadState::SockWait;
        self.pick_next(m, c);
    }

    /// send(2) of `bytes` by thread `tid` on CPU `c`. Err: no memory for the buffers.
    pub(crate) fn sock_send(
        &mut self,
        m: &mut Machine,
        c: usize,
        tid: usize,
        sock: u32,
        bytes: u32,
        kind: SockKind,
    ) -> Result<SockOp, String> {
        let s = self.sockets.get(sock);
        if s.queued > 0 && s.queued + bytes as u64 > SK_SNDBUF {
            s.writer = tid as u32;
            return Ok(SockOp::Sleep);
        }
        m.charge_sys(
            c,
            m.cost.syscall_cycles as u64 + copy_cycles(m, bytes as u64),
        );
        let mut blocks = Vec::new();
        match kind {
            SockKind::UnixStream => {
                // unix_stream_sendmsg: skbs of at most half the send buffer and a head plus
                // UNIX_SKB_FRAGS_SZ; the part beyond the head goes in page fragments, each the
                // highest order its rest fills (alloc_skb_with_frags), one order lower on failure.
                let mut left = bytes as u64;
                while left > 0 {
                    let size = left
                        .min((SK_SNDBUF >> 1) - 64)
                        .min(SKB_MAX_HEAD + UNIX_SKB_FRAGS_SZ);
                    left -= size;
                    let mut data = page_align(size.saturating_sub(SKB_MAX_HEAD)).min(size);
                    // The head (from the slab) carries the rest: one entry without pages,
                    // so that the queue's entries add up to the bytes sent.
                    blocks.push((NIL, 0, (size - data) as u32));
                    let mut order = UNIX_FRAG_ORDER;
                    while data > 0 {
                        while order > 0 && data < 4096 << order {
                            order -= 1;
                        }
                        let pfn = loop {
                            match self.alloc_pages_kernel(m, c, order) {
                                Some(pfn) => break pfn,
                                None if order > 0 => order -= 1,
                                None => return Err(self.oom_message()),
                            }
                        };
                        let carried = data.min(4096 << order);
                        blocks.push((pfn, order as u8, carried as u32));
                        data -= carried;
                    }
                }
            }
            SockKind::Linear => {
                // kmalloc_large(size + the skb's shared info): one block of get_order(size).
                let size = bytes as u64 + 320;
                if size > KMALLOC_MAX_CACHE_SIZE {
                    let order = (size.div_ceil(4096)).next_power_of_two().trailing_zeros() as usize;
                    let pfn = self
                        .alloc_pages_kernel(m, c, order)
                        .ok_or_else(|| self.oom_message())?;
                    blocks.push((pfn, order as u8, bytes));
                } else {
                    blocks.push((NIL, 0, bytes));
                }
            }
        }
        let s = self.sockets.get(sock);
        s.queue.extend(blocks);
        s.queued += bytes as u64;
        let reader = std::mem::replace(&mut s.reader, NIL);
        if reader != NIL {
            let now = m.cpus[c].clock;
            self.make_runnable(m, reader, now);
        }
        Ok(SockOp::Done)
    }

    /// recv(2) of `bytes` by thread `tid` on CPU `c`: when that much is queued, copy it out
    /// and free the blocks it used up here (consume_skb on the reader's CPU).
    pub(crate) fn sock_recv(
        &mut self,
        m: &mut Machine,
        c: usize,
        tid: usize,
        sock: u32,
        bytes: u32,
    ) -> SockOp {
        let s = self.sockets.get(sock);
        if s.queued < bytes as u64 {
            s.reader = tid as u32;
            return SockOp::Sleep;
        }
        s.queued -= bytes as u64;
        let mut want = bytes as u64;
        let mut freed = Vec::new();
        while want > 0 {
            let Some(front) = s.queue.front_mut() else {
                break;
            };
            let take = want.min(front.2 as u64);
            front.2 -= take as u32;
            want -= take;
            if front.2 == 0 {
                let (pfn, order, _) = s.queue.pop_front().expect("front exists");
                freed.push((pfn, order));
            } else {
                break;
            }
        }
        let writer = std::mem::replace(&mut s.writer, NIL);
        m.charge_sys(
            c,
            m.cost.syscall_cycles as u64 + copy_cycles(m, bytes as u64),
        );
        for (pfn, order) in freed.into_iter().filter(|b| b.0 != NIL) {
            self.free_pages_kernel(m, c, pfn, order as usize);
        }
        if writer != NIL {
            let now = m.cpus[c].clock;
            self.make_runnable(m, writer, now);
        }
        SockOp::Done
    }
}

fn page_align(bytes: u64) -> u64 {
    bytes.div_ceil(4096) * 4096
}

/// copy_from_user / copy_to_user of `bytes` at the machine's copy bandwidth.
fn copy_cycles(m: &Machine, bytes: u64) -> u64 {
    m.ns_to_cycles(bytes as f64 / m.cost.migrate_copy_gbps)
}
