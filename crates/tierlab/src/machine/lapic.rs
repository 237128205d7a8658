//! The local APIC timer as the guest kernel programs it and QEMU 7.2 emulates it, for
//! `machine.vcpu_turns`: which CPU's timer fires first decides which vCPU holds the one
//! instruction clock, and that comes down to the timer's 16 ns rounding.

/// The kernel runs the LAPIC timer divided by 16 (arch/x86/kernel/apic/apic.c APIC_DIVISOR).
const APIC_DIVISOR: u64 = 16;

/// QEMU's count_shift for divide-by-16: one count per 16 ns of the virtual clock.
const COUNT_SHIFT: u32 = 4;

/// The clockevent's `mult` for shift 32 (lapic_init_clockevent: div_sc(lapic_timer_period /
/// APIC_DIVISOR, TICK_NSEC, 32)), from the calibrated timer ticks per jiffy.
pub fn clockevent_mult(lapic_timer_period: u32, hz: u64) -> u64 {
    let tick_nsec = 1_000_000_000 / hz;
    ((lapic_timer_period as u64 / APIC_DIVISOR) << 32) / tick_nsec
}

/// When a one-shot LAPIC timer programmed at `write_ns` to fire at `target_ns` fires, in
/// virtual ns: the kernel writes count = (delta × mult) >> 32 to TMICT
/// (clockevents_program_event → lapic_next_event), and QEMU expires it at the write time
/// plus (count + 1) << count_shift (hw/intc/apic_common.c apic_next_timer).
pub fn expiry_ns(write_ns: u64, target_ns: u64, mult: u64) -> u64 {
    let delta = target_ns.saturating_sub(write_ns);
    let count = ((delta as u128 * mult as u128) >> 32) as u64;
    write_ns + ((count + 1) << COUNT_SHIFT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guests_calibration_makes_a_4_ms_timer_fire_32_ns_early() {
        // lapic_timer_period 3,999,971 (measured in the guest): 249,998 counts per 4 ms tick,
        // mult = floor(249,998 × 2^32 / 4,000,000) = 268,433,308, so a 4 ms delta becomes
        // floor(249,997.9998) = 249,997 counts, and QEMU fires at (249,997 + 1) × 16 ns.
        let mult = clockevent_mult(3_999_971, 250);
        assert_eq!(mult, 268_433_308);
        assert_eq!(expiry_ns(0, 4_000_000, mult), 3_999_968);
        assert_eq!(expiry_ns(1_000, 4_001_000, mult), 4_000_968);
    }

    #[test]
    fn with_an_exact_calibration_a_timer_fires_within_16_ns_after_its_target() {
        // 4,000,000 ticks per jiffy: mult is exactly 2^32 / 16, count = floor(delta / 16),
        // so the expiry is the target plus 16 less delta mod 16: in (target, target + 16].
        let mult = clockevent_mult(4_000_000, 250);
        assert_eq!(mult, 1 << 28);
        assert_eq!(expiry_ns(0, 4_000_000, mult), 4_000_016);
        assert_eq!(expiry_ns(5, 4_000_000, mult), 4_000_005);
        assert_eq!(expiry_ns(3_500, 4_000_000, mult), 4_000_012);
        // Writes 16 ns apart tie: the later one is no earlier, so it does not kick.
        assert_eq!(expiry_ns(3_516, 4_000_000, mult), 4_000_012);
    }
}
