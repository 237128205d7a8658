//! ftrace in the guest: /init turns on kprobes and tracepoints before the program runs
//! (Documentation/trace/kprobetrace.rst, ftrace.rst), with `trace_clock` mono so that the
//! timestamps are the program's CLOCK_MONOTONIC, and copies the trace after it, each line
//! behind `TIERLAB-TRACE `, to the program's serial port. The program writes its t0 and its
//! threads' names to `trace_marker`, so a trace line's time and thread can be matched to the
//! samples and to tierlab's threads.

use std::collections::HashMap;

/// The tracing directory (debugfs is mounted by /init).
const TRACING: &str = "/sys/kernel/debug/tracing";

/// What the guest traces.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ftrace {
    /// Lines for `kprobe_events` (`p:GROUP/NAME SYMBOL ARGS`, `r:GROUP/NAME SYMBOL ARGS`).
    pub kprobes: Vec<String>,
    /// Events to enable, as `SUBSYSTEM/EVENT` under events/ (a kprobe's `GROUP/NAME` too).
    pub events: Vec<String>,
    /// (`SUBSYSTEM/EVENT`, filter expression) for the event's `filter` file.
    pub filters: Vec<(String, String)>,
    /// (`SUBSYSTEM/EVENT`, trigger command) for the event's `trigger` file; the event itself
    /// stays off unless enabled too (a trigger puts it in soft mode).
    pub triggers: Vec<(String, String)>,
    /// Per-CPU ring buffer, KiB.
    pub buffer_kib: u32,
}

/// Prefix of a copied trace line on the program's serial port.
pub const LINE_PREFIX: &str = "TIERLAB-TRACE ";

impl Ftrace {
    /// Shell for /init before the program: a failed probe or event is reported on the
    /// console (`TIERLAB-FTRACE … failed`), never fatal.
    pub fn setup_script(&self) -> String {
        let mut s = format!(
            "T={TRACING}\n\
             echo 0 > $T/tracing_on\n\
             echo mono > $T/trace_clock\n\
             echo {} > $T/buffer_size_kb\n\
             tl_trace() {{ printf '%s\\n' \"$2\" >> \"$T/$1\" 2>/tmp/.tl_err || \
             echo \"TIERLAB-FTRACE $1 $2 failed: $(tr '\\n' ' ' < /tmp/.tl_err)\"; }}\n",
            self.buffer_kib.max(64)
        );
        for k in &self.kprobes {
            s += &format!("tl_trace kprobe_events {}\n", super::guest::sh_quote(k));
        }
        for (e, f) in &self.filters {
            s += &format!("tl_trace events/{e}/filter {}\n", super::guest::sh_quote(f));
        }
        for (e, t) in &self.triggers {
            s += &format!(
                "tl_trace events/{e}/trigger {}\n",
                super::guest::sh_quote(t)
            );
        }
        for e in &self.events {
            s += &format!("tl_trace events/{e}/enable 1\n");
        }
        s += "echo 1 > $T/tracing_on\nexport TIERLAB_TRACE_MARKER=$T/trace_marker\n";
        s
    }

    /// Shell for /init after the program: stop tracing and copy the trace to the program's
    /// serial port.
    pub fn dump_script() -> String {
        format!(
            "echo 0 > {TRACING}/tracing_on\n\
             sed 's/^/{LINE_PREFIX}/' {TRACING}/trace > /dev/ttyS1\n"
        )
    }
}

/// The probes `validate --trace SPEC` adds: a tracepoint as `SUBSYSTEM/EVENT` (a name under
/// tracing/events/), optionally `SUBSYSTEM/EVENT if FILTER` (the event's filter file) or
/// `SUBSYSTEM/EVENT trigger COMMAND` (its trigger file, Documentation/trace/events.rst; the
/// event is not enabled by this form), or a kprobe line as kprobe_events takes it
/// (`p:[GROUP/]NAME SYMBOL [ARGS]`, `r:` for the return), whose event is enabled too (GROUP
/// defaults to `kprobes`).
pub fn user_probes(specs: &[String]) -> Result<Ftrace, String> {
    let mut f = Ftrace {
        buffer_kib: 4096,
        ..Ftrace::default()
    };
    for spec in specs {
        let bad = |why: &str| format!("--trace {spec:?}: {why}");
        let spec = spec.trim();
        if let Some(rest) = spec.strip_prefix("p:").or_else(|| spec.strip_prefix("r:")) {
            let name = rest.split_whitespace().next().unwrap_or("");
            if rest.split_whitespace().nth(1).is_none() {
                return Err(bad(
                    "a kprobe needs a name and a symbol: p:NAME SYMBOL [ARGS]",
                ));
            }
            let event = match name.split_once('/') {
                Some((g, n)) if is_name(g) && is_name(n) => format!("{g}/{n}"),
                None if is_name(name) => format!("kprobes/{name}"),
                _ => return Err(bad("the probe's [GROUP/]NAME must be letters, digits or _")),
            };
            f.kprobes.push(spec.to_string());
            f.events.push(event);
        } else {
            let (event, rest) = spec.split_once(' ').unwrap_or((spec, ""));
            let rest = rest.trim();
            match event.split_once('/') {
                Some((s, e)) if is_name(s) && is_name(e) => {
                    if rest.is_empty() {
                        f.events.push(event.to_string());
                    } else if let Some(filter) = rest.strip_prefix("if ") {
                        f.filters
                            .push((event.to_string(), filter.trim().to_string()));
                        f.events.push(event.to_string());
                    } else if let Some(cmd) = rest.strip_prefix("trigger ") {
                        f.triggers.push((event.to_string(), cmd.trim().to_string()));
                    } else {
                        return Err(bad(
                            "after the event, expected `if FILTER` or `trigger COMMAND`",
                        ));
                    }
                }
                _ => return Err(bad(
                    "expected a tracepoint SUBSYSTEM/EVENT (e.g. vmscan/mm_vmscan_kswapd_wake) \
                         or a kprobe p:NAME SYMBOL [ARGS]",
                )),
            }
        }
    }
    Ok(f)
}

/// A name ftrace accepts for a group, event or tracepoint (no path tricks, no spaces).
fn is_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Ftrace {
    /// Both sets of probes, each once; the larger ring buffer.
    pub fn merged(mut self, other: &Ftrace) -> Ftrace {
        union(&mut self.kprobes, &other.kprobes);
        union(&mut self.events, &other.events);
        union(&mut self.filters, &other.filters);
        union(&mut self.triggers, &other.triggers);
        self.buffer_kib = self.buffer_kib.max(other.buffer_kib);
        self
    }
}

/// Append what `into` lacks of `from`, in order.
fn union<T: PartialEq + Clone>(into: &mut Vec<T>, from: &[T]) {
    for x in from {
        if !into.contains(x) {
            into.push(x.clone());
        }
    }
}

/// One line of the `trace` file.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceLine {
    pub comm: String,
    pub pid: u32,
    pub cpu: u32,
    /// Seconds of the trace clock (CLOCK_MONOTONIC with `mono`).
    pub t_s: f64,
    /// The event's name (the kprobe's NAME, the tracepoint's name, `tracing_mark_write`).
    pub event: String,
    /// What follows the event's name.
    pub body: String,
}

impl TraceLine {
    /// `key=value` fields of the body; numbers are parsed by the caller.
    pub fn fields(&self) -> HashMap<&str, &str> {
        self.body
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect()
    }

    /// A field as an integer: decimal, or hex with 0x (kprobe `:x64`) or bare hex (the
    /// `%lX` of sched_skip_vma_numa).
    pub fn hex_or_dec(&self, key: &str) -> Option<u64> {
        let v = *self.fields().get(key)?;
        if let Some(h) = v.strip_prefix("0x") {
            u64::from_str_radix(h, 16).ok()
        } else {
            v.parse().ok()
        }
    }

    pub fn hex(&self, key: &str) -> Option<u64> {
        let v = *self.fields().get(key)?;
        u64::from_str_radix(v.trim_start_matches("0x"), 16).ok()
    }
}

/// A whole copied trace: its lines and how many events the ring buffer dropped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    pub lines: Vec<TraceLine>,
    /// entries-written minus entries-in-buffer of the trace's header.
    pub lost: u64,
}

/// Parse the trace file's lines (the prefix already removed). Comment lines give the
/// entry counts; lines that are not events are skipped.
pub fn parse(lines: &[String]) -> Trace {
    let mut t = Trace::default();
    for l in lines {
        if let Some(rest) = l.strip_prefix("# entries-in-buffer/entries-written:") {
            let counts: Vec<u64> = rest
                .split_whitespace()
                .next()
                .unwrap_or("")
                .split('/')
                .filter_map(|n| n.parse().ok())
                .collect();
            if let [kept, written] = counts[..] {
                t.lost = written.saturating_sub(kept);
            }
            continue;
        }
        if l.starts_with('#') {
            continue;
        }
        if let Some(line) = parse_line(l) {
            t.lines.push(line);
        }
    }
    t
}

/// `          <comm>-<pid>     [<cpu>] <flags> <secs>.<usecs>: <event>: <body>`; the comm
/// may hold spaces and dashes, so the pid is the number after the last dash before `[`.
fn parse_line(l: &str) -> Option<TraceLine> {
    let open = l.find(" [")?;
    let (task, rest) = l.split_at(open);
    let task = task.trim();
    let dash = task.rfind('-')?;
    let (comm, pid) = (&task[..dash], task[dash + 1..].parse().ok()?);
    let close = rest.find(']')?;
    let cpu = rest[2..close].trim().parse().ok()?;
    let after = &rest[close + 1..];
    let colon = after.find(": ")?;
    let t_s = after[..colon].split_whitespace().last()?.parse().ok()?;
    let ev_and_body = &after[colon + 2..];
    let (event, body) = match ev_and_body.find(": ") {
        Some(i) => (&ev_and_body[..i], &ev_and_body[i + 2..]),
        None => (ev_and_body.trim_end_matches(':'), ""),
    };
    Some(TraceLine {
        comm: comm.to_string(),
        pid,
        cpu,
        t_s,
        event: event.to_string(),
        body: body.trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_trace_lines_with_dashes_and_spaces_in_the_comm() {
        let lines: Vec<String> = [
            "# tracer: nop",
            "# entries-in-buffer/entries-written: 3/5   #P:3",
            "        workload-71      [001] d..1.   12.345678: tierlab_cpn: (change_prot_numa+0x0/0x90) start=0x10000000 end=0x20000000",
            "     my-thr ead-2-99     [002] .....   12.400001: sched_skip_vma_numa: numa_scan_offset=0 vm_start=400000 vm_end=401000 reason=shared_ro",
            "        workload-71      [000] .....   12.000100: tracing_mark_write: tierlab main t0",
            "garbage",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let t = parse(&lines);
        assert_eq!(t.lost, 2);
        assert_eq!(t.lines.len(), 3);
        let a = &t.lines[0];
        assert_eq!((a.comm.as_str(), a.pid, a.cpu), ("workload", 71, 1));
        assert!((a.t_s - 12.345678).abs() < 1e-9);
        assert_eq!(a.event, "tierlab_cpn");
        assert_eq!(a.hex_or_dec("start"), Some(0x1000_0000));
        let b = &t.lines[1];
        assert_eq!((b.comm.as_str(), b.pid), ("my-thr ead-2", 99));
        assert_eq!(b.hex("vm_start"), Some(0x40_0000));
        assert_eq!(b.fields()["reason"], "shared_ro");
        assert_eq!(t.lines[2].body, "tierlab main t0");
    }

    #[test]
    fn user_probes_enable_tracepoints_and_kprobes_and_refuse_the_rest() {
        let specs: Vec<String> = [
            "vmscan/mm_vmscan_kswapd_wake",
            "r:tierlab/prep migrate_misplaced_folio_prepare rc=$retval:s32",
            "p:bal balance_pgdat",
            "sched/sched_switch if prev_comm == \"exe\" && prev_state != 1",
            "vmscan/mm_vmscan_kswapd_wake trigger enable_event:sched:sched_switch:1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let f = user_probes(&specs).unwrap();
        assert_eq!(f.kprobes.len(), 2);
        assert_eq!(
            f.events,
            [
                "vmscan/mm_vmscan_kswapd_wake",
                "tierlab/prep",
                "kprobes/bal",
                "sched/sched_switch"
            ]
        );
        assert_eq!(f.filters[0].1, "prev_comm == \"exe\" && prev_state != 1");
        assert_eq!(
            f.triggers,
            [(
                "vmscan/mm_vmscan_kswapd_wake".to_string(),
                "enable_event:sched:sched_switch:1".to_string()
            )]
        );
        let script = f.setup_script();
        assert!(script.contains(
            "tl_trace events/vmscan/mm_vmscan_kswapd_wake/trigger 'enable_event:sched:sched_switch:1'"
        ));
        let only = user_probes(&specs[4..]).unwrap();
        assert!(only.events.is_empty() && only.triggers.len() == 1);
        for bad in [
            "vmscan",
            "../x/enable",
            "p:balance_pgdat",
            "p:a/b/c sym",
            "vm scan/x",
            "sched/sched_switch when x",
        ] {
            assert!(user_probes(&[bad.to_string()]).is_err(), "{bad}");
        }
        let both = f.clone().merged(&f);
        assert_eq!(both, f);
    }

    #[test]
    fn setup_quotes_probes_and_reports_failures() {
        let f = Ftrace {
            kprobes: vec!["p:tierlab/x change_prot_numa start=%si:x64".into()],
            events: vec!["sched/sched_skip_vma_numa".into()],
            filters: vec![],
            triggers: vec![],
            buffer_kib: 4096,
        };
        let s = f.setup_script();
        assert!(s.contains("tl_trace kprobe_events 'p:tierlab/x change_prot_numa start=%si:x64'"));
        assert!(s.contains("tl_trace events/sched/sched_skip_vma_numa/enable 1"));
        assert!(s.contains("echo mono > $T/trace_clock"));
        assert!(s.contains("TIERLAB-FTRACE"));
    }
}
