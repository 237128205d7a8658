//! The phases as C: one `struct phase` per `[[workload.phases]]` entry (from its resolved plan)
//! and the loop steps.

use std::fmt::Write;

use tierlab::config::ConfigError;
use tierlab::workload::{Backing, Op};

use super::super::plan::{Access, Body, Pattern, PhasePlan, Writes};
use super::super::{mix, Resolved};
use super::{file_index, json_c_str, table};

/// `PHASES` (with each phase's participant flags) and `STEPS`.
pub(super) fn tables(out: &mut String, r: &Resolved, seed: u64) -> Result<(), ConfigError> {
    let mut rows = Vec::new();
    for (i, p) in r.phases.plans.iter().enumerate() {
        let flags: Vec<&str> = p
            .participants
            .iter()
            .map(|&x| if x { "1" } else { "0" })
            .collect();
        let _ = writeln!(
            out,
            "static const unsigned char PART_{i}[] = {{{}}};",
            flags.join(", ")
        );
        if let Body::Fork { child, .. } = &p.body {
            let list: Vec<String> = child.iter().map(|c| c.to_string()).collect();
            let _ = writeln!(
                out,
                "static const int CHILD_{i}[] = {{{}}};",
                list.join(", ")
            );
        }
        if let Body::Access(a) = &p.body {
            if !a.gap.is_empty() {
                let gaps: Vec<String> = a.gap.iter().map(|g| format!("{g}U")).collect();
                let _ = writeln!(
                    out,
                    "static const uint32_t GAP_{i}[] = {{{}}};",
                    gaps.join(", ")
                );
            }
        }
        let duration = r.phase_cfgs[i].duration_ms();
        rows.push(row(i, p, &r.phases.names[i], duration, seed)?);
    }
    table(out, "const struct phase PHASES[]", &rows);
    let _ = writeln!(out, "const int NPHASES = {};\n", rows.len());

    let mut steps = Vec::new();
    for (s, step) in r.steps.iter().enumerate() {
        let members: Vec<String> = step.members.iter().map(|m| m.to_string()).collect();
        let _ = writeln!(
            out,
            "static const int STEP_{s}[] = {{{}}};",
            members.join(", ")
        );
        steps.push(format!(
            "\t{{.members = STEP_{s}, .nmembers = {}, .times = {}ULL}},",
            members.len(),
            step.times
        ));
    }
    table(out, "const struct step STEPS[]", &steps);
    let _ = writeln!(out, "const int NSTEPS = {};", steps.len());
    Ok(())
}

/// Phase `i`'s initialiser.
fn row(
    i: usize,
    p: &PhasePlan,
    name: &str,
    duration_ms: Option<f64>,
    seed: u64,
) -> Result<String, ConfigError> {
    let mut f: Vec<String> = vec![
        format!(".name = {}", json_c_str(name)),
        format!(".participants = PART_{i}"),
        format!(".lead = {}", p.lead),
    ];
    match &p.body {
        Body::Nothing => f.push(".kind = K_NOTHING".into()),
        Body::Op(op) => op_fields(op, name, &mut f)?,
        Body::Access(a) => access_fields(a, i, duration_ms, seed, &mut f),
        Body::Fork { count, child } => f.extend([
            ".kind = K_FORK".into(),
            format!(".count = {count}ULL"),
            format!(".child = CHILD_{i}"),
            format!(".nchild = {}", child.len()),
        ]),
        Body::Wait => f.push(".kind = K_WAIT".into()),
    }
    match p.after {
        Some(Op::MovePages { addr, len, node }) => f.extend([
            format!(".bind_node = {node}"),
            format!(".bind_addr = {addr:#x}ULL"),
            format!(".bind_len = {len}ULL"),
        ]),
        None => f.push(".bind_node = -1".into()),
        Some(other) => return Err(unexpected(name, &other)),
    }
    if !matches!(p.body, Body::Access(_)) {
        f.push(".duration_ms = -1.0".into());
    }
    Ok(format!("\t{{{}}},", f.join(", ")))
}

/// The fields of a one-syscall phase.
fn op_fields(op: &Op, name: &str, f: &mut Vec<String>) -> Result<(), ConfigError> {
    let range = |f: &mut Vec<String>, addr: u64, len: u64| {
        f.push(format!(".addr = {addr:#x}ULL"));
        f.push(format!(".len = {len}ULL"));
    };
    match *op {
        Op::Mmap {
            addr,
            len,
            prot,
            backing,
        } => {
            f.push(".kind = K_MMAP".into());
            range(f, addr, len);
            f.push(format!(".prot = {prot}"));
            f.push(format!(".file = {}", file_index(backing)));
            if let Backing::File { pgoff, .. } = backing {
                f.push(format!(".pgoff = {pgoff}ULL"));
            }
        }
        Op::Munmap { addr, len } => {
            f.push(".kind = K_MUNMAP".into());
            range(f, addr, len);
        }
        Op::Mprotect { addr, len, prot } => {
            f.push(".kind = K_MPROTECT".into());
            range(f, addr, len);
            f.push(format!(".prot = {prot}"));
        }
        Op::Madvise { addr, len, advice } => {
            // tierlab's advice values are Linux's (mman-common.h).
            f.push(".kind = K_MADVISE".into());
            range(f, addr, len);
            f.push(format!(".advice = {advice}"));
        }
        Op::MovePages { addr, len, node } => {
            f.push(".kind = K_MOVE".into());
            range(f, addr, len);
            f.push(format!(".node = {node}"));
        }
        Op::Sleep(ns) => {
            f.push(".kind = K_SLEEP".into());
            f.push(format!(".sleep_ns = {ns}ULL"));
        }
        other => return Err(unexpected(name, &other)),
    }
    Ok(())
}

/// The fields of an access phase; `i` seeds a random touch order as `phases::plan` does.
fn access_fields(a: &Access, i: usize, duration_ms: Option<f64>, seed: u64, f: &mut Vec<String>) {
    f.push(".kind = K_ACCESS".into());
    f.push(format!(".addr = {:#x}ULL", a.start));
    f.push(format!(".pages = {}ULL", a.pages));
    f.push(format!(".count = {}ULL", a.count()));
    match &a.pattern {
        Pattern::Seq => f.push(".pattern = P_SEQ".into()),
        Pattern::Rev => f.push(".pattern = P_REV".into()),
        Pattern::Perm(_) => {
            f.push(".pattern = P_PERM".into());
            f.push(format!(
                ".perm_seed = {}ULL",
                mix(seed, 0x7065_726d, i as u64)
            ));
        }
        Pattern::Stride { bytes, .. } => {
            f.push(".pattern = P_STRIDE".into());
            f.push(format!(".stride = {bytes}ULL"));
        }
        Pattern::Uniform { .. } => f.push(".pattern = P_UNIFORM".into()),
        Pattern::Zipf { s, hot_last, .. } => {
            f.push(".pattern = P_ZIPF".into());
            f.push(format!(".zipf_s = {s:?}"));
            f.push(format!(".hot_last = {}", u8::from(*hot_last)));
        }
    }
    match a.writes {
        Writes::Never => f.push(".writes = W_NEVER".into()),
        Writes::Always => f.push(".writes = W_ALWAYS".into()),
        Writes::Fraction(x) => {
            f.push(".writes = W_FRACTION".into());
            f.push(format!(".write_fraction = {x:?}"));
        }
    }
    if let Some(ns) = a.pace {
        f.push(format!(".pace_ns = {ns}ULL"));
    }
    if !a.gap.is_empty() {
        f.push(format!(".gap = GAP_{i}"));
    }
    f.push(format!(".duration_ms = {:?}", duration_ms.unwrap_or(-1.0)));
}

/// An op the phase planner does not produce for a phase body.
fn unexpected(name: &str, op: &Op) -> ConfigError {
    ConfigError::msg(format!(
        "C program: phase {name:?} has an op the generator does not know: {op:?}"
    ))
}
