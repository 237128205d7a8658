//! Per-phase accounting for scripted workloads (`Mark::Phase`): simulated time inside each
//! phase, its accesses, and the counters that moved, as the C micro-benchmarks print
//! "Read (node 0) took N us".
//!
//! An instance of a phase starts when its first thread enters and ends when its last thread
//! leaves (by entering another phase, reaching a barrier, or exiting); a phase inside a loop
//! accumulates over its instances.

use crate::sim::Sim;
use crate::stats::VmCounters;

#[derive(Clone, Debug, Default)]
pub struct PhaseStat {
    pub name: String,
    active: u32,
    inst_begin: u64,
    vm_at_begin: VmCounters,
    acc_at_begin: u64,
    pub instances: u64,
    /// Summed duration of the instances, in cycles.
    pub cycles: u64,
    /// Summed run time (sum_exec_runtime) of the threads while in the phase, in cycles.
    pub run_cycles: u64,
    pub accesses: u64,
    pub vm_delta: VmCounters,
    pub first_begin: Option<u64>,
}

impl PhaseStat {
    pub fn named(name: &str) -> Self {
        PhaseStat {
            name: name.to_string(),
            ..Default::default()
        }
    }
}

impl Sim {
    fn total_accesses(&self, in_flight: u64) -> u64 {
        self.k.sched.threads.iter().map(|t| t.accesses).sum::<u64>() + in_flight
    }

    /// Thread `tid` leaves its phase (if any) and enters `new` (if any) at `now`; `in_flight`
    /// and `run_in_flight` are the accesses and run time of its quantum so far.
    pub(crate) fn enter_phase(
        &mut self,
        tid: usize,
        new: Option<u32>,
        now: u64,
        in_flight: u64,
        run_in_flight: u64,
    ) {
        let total = self.total_accesses(in_flight);
        let run_now = self.k.sched.threads[tid].runtime + run_in_flight;
        if let Some(old) = self.k.sched.threads[tid].phase.take() {
            let vm_now = self.k.vm.clone();
            let st = &mut self.phase_stats[old as usize];
            st.run_cycles += run_now - self.k.sched.threads[tid].phase_runtime_begin;
            st.active -= 1;
            if st.active == 0 {
                st.instances += 1;
                st.cycles += now.saturating_sub(st.inst_begin);
                st.accesses += total - st.acc_at_begin;
                for (d, (a, b)) in st
                    .vm_delta
                    .v
                    .iter_mut()
                    .zip(vm_now.v.iter().zip(st.vm_at_begin.v.iter()))
                {
                    *d += a - b;
                }
            }
        }
        let Some(id) = new else {
            return;
        };
        let id = id as usize;
        if id >= self.phase_stats.len() {
            self.phase_stats
                .resize_with(id + 1, || PhaseStat::named("unnamed"));
        }
        let vm_now = self.k.vm.clone();
        let st = &mut self.phase_stats[id];
        if st.active == 0 {
            st.inst_begin = now;
            st.vm_at_begin = vm_now;
            st.acc_at_begin = total;
            st.first_begin.get_or_insert(now);
        }
        st.active += 1;
        self.k.sched.threads[tid].phase = Some(id as u32);
        self.k.sched.threads[tid].phase_runtime_begin = run_now;
    }
}
