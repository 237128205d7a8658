//! Processes that come and go: fork (kernel/fork.c `copy_process`, `wake_up_new_task`),
//! execve (fs/exec.c `exec_mmap`), exit (kernel/exit.c `do_exit`, `exit_mm`,
//! `forget_original_parent`) and wait (`do_wait`). The address-space work is in
//! `mm/fork.rs` (dup_mmap) and `mm/mmap.rs` (exit_mmap).
//!
//! A process here is an mm and its threads; a forked process has one thread, whose parent is
//! the thread that forked it.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::page::NIL;
use crate::sched::{Thread, ThreadState};
use crate::workload::{OpBuf, OpList, ThreadStream};

impl Kernel {
    /// fork(2) by thread `tid` on CPU `c`: copy_process with a copy of its mm (dup_mm) and
    /// one thread running `stream`, which wake_up_new_task puts on the idlest CPU. Returns
    /// the child thread's id.
    pub(crate) fn sys_fork(
        &mut self,
        m: &mut Machine,
        c: usize,
        tid: usize,
        stream: Box<dyn ThreadStream>,
    ) -> Result<u32, String> {
        m.charge_sys(c, (m.cost.syscall_cycles + m.cost.fork_cycles) as u64);
        let parent_mm = self.sched.threads[tid].mm as usize;
        let child_mm = self.dup_mm(m, c, parent_mm)?;
        let child = self.sched.threads.len() as u32;
        let mut thread = Thread::new(child, child_mm as u32, stream);
        // init_numa_balancing without CLONE_VM: node_stamp 0, the period starts at scan_delay.
        thread.numa_scan_period_ms = self.cfg.kernel.numa_balancing_scan_delay_ms;
        thread.parent = tid as u32;
        self.sched.threads.push(thread);
        self.sched.threads[tid].children.push(child);
        self.sched.live_threads += 1;
        let cpu = self.idlest_cpu();
        self.sched.threads[child as usize].cpu = cpu as u32;
        self.mms[child_mm].nr_threads += 1;
        let now = m.cpus[c].clock;
        self.make_runnable(m, child, now);
        Ok(child)
    }

    /// execve(2) by thread `tid` on CPU `c`: exec_mmap gives it a new, empty mm (a fork
    /// family of its own) and activates it; the old mm goes with its last user (mmput).
    pub(crate) fn sys_exec(&mut self, m: &mut Machine, c: usize, tid: usize) -> Result<(), String> {
        let old = self.sched.threads[tid].mm as usize;
        let users = self.mms[old].nr_threads;
        if users > 1 {
            return Err(format!(
                "execve from a process with {users} threads: de_thread (killing the others) \
                 is not modelled"
            ));
        }
        m.charge_sys(c, (m.cost.syscall_cycles + m.cost.exec_cycles) as u64);
        let new = self.mm_alloc(m, c)?;
        self.sched.threads[tid].mm = new as u32;
        self.mms[old].nr_threads -= 1;
        self.mms[new].nr_threads += 1;
        self.switch_mm(m, c, new);
        self.exit_mmap(m, c, old);
        Ok(())
    }

    /// do_exit's process part, once thread `tid` on CPU `c` has left: its program is
    /// dropped; the last thread of an mm takes it down (exit_mm leaves the CPU lazy on it,
    /// then mmput → exit_mmap), unless the run ends with it, so that the last sample still
    /// shows the workload's memory; its children go to init (forget_original_parent); and
    /// its parent gets a zombie to reap, or is woken from wait(2) with it.
    pub(crate) fn exit_process(&mut self, m: &mut Machine, c: usize, tid: usize) {
        let t = &mut self.sched.threads[tid];
        t.buf = OpBuf::new();
        t.stream = Box::new(OpList::new(Vec::new()));
        let mm = t.mm as usize;
        let children = std::mem::take(&mut t.children);
        let parent = t.parent;
        if self.mms[mm].nr_threads == 0 && self.sched.live_threads > 0 {
            m.charge_sys(c, m.cost.exit_cycles as u64);
            self.enter_lazy_tlb(c);
            self.exit_mmap(m, c, mm);
        }
        for child in children {
            self.sched.threads[child as usize].parent = NIL;
        }
        if parent == NIL {
            return;
        }
        let p = &mut self.sched.threads[parent as usize];
        p.children.retain(|&x| x != tid as u32);
        if p.state == ThreadState::Waiting {
            // do_notify_parent wakes the waiter, which reaps this child.
            let now = m.cpus[c].clock;
            self.make_runnable(m, parent, now);
        } else {
            p.zombies += 1;
        }
    }

    /// wait(2) by thread `tid`: reap an exited child, or return at once with no child left
    /// (ECHILD). False: a child is still running; `wait_sleep` puts the thread to sleep.
    pub(crate) fn wait_reaps(&mut self, m: &mut Machine, c: usize, tid: usize) -> bool {
        m.charge_sys(c, m.cost.syscall_cycles as u64);
        let t = &mut self.sched.threads[tid];
        if t.zombies > 0 {
            t.zombies -= 1;
            return true;
        }
        t.children.is_empty()
    }

    /// do_wait's sleep: thread `tid` leaves CPU `c` until a child exits.
    pub(crate) fn wait_sleep(&mut self, m: &mut Machine, c: usize, tid: usize) {
        self.sched.threads[tid].state = ThreadState::Waiting;
        self.pick_next(m, c);
    }
}
