//! The order phases run in: `[[workload.loop]]` groups resolved into steps. A group runs at the
//! position of its earliest member; its members do not also run on their own. Nor do the
//! phases a `fork` phase's `child` lists: they are the children's (a loop may still list them).

use std::collections::HashMap;

use tierlab::config::ConfigError;

use super::config::LoopCfg;
use super::phases::Phases;
use super::plan::{Body, Step};
use super::Keyed;

/// The steps of one pass over the phases; `ids` maps phase names to indices, `in_child` marks
/// the phases children run.
pub(super) fn steps(
    groups: &[LoopCfg],
    ids: &HashMap<String, usize>,
    in_child: &[bool],
    origin: &str,
) -> Result<Vec<Step>, ConfigError> {
    let e = Keyed(origin);
    let mut owner: Vec<Option<usize>> = vec![None; in_child.len()];
    let mut members: Vec<Vec<usize>> = Vec::new();
    for (g, l) in groups.iter().enumerate() {
        if l.times == 0 {
            return Err(e.at(format!("workload.loop[{g}].times"), "must be at least 1"));
        }
        if l.phases.is_empty() {
            return Err(e.at(
                format!("workload.loop[{g}].phases"),
                "needs at least one phase",
            ));
        }
        let mut m = Vec::new();
        for (j, n) in l.phases.iter().enumerate() {
            let k = format!("workload.loop[{g}].phases[{j}]");
            let &pi = ids
                .get(n)
                .ok_or_else(|| e.at(&k, format!("unknown phase name {n:?}")))?;
            match owner[pi] {
                Some(o) if o != g => {
                    return Err(e.at(&k, format!("phase {n:?} is already in workload.loop[{o}]")))
                }
                _ => owner[pi] = Some(g),
            }
            m.push(pi);
        }
        members.push(m);
    }
    let mut steps = Vec::new();
    let mut emitted = vec![false; groups.len()];
    for (i, o) in owner.iter().enumerate() {
        match *o {
            None if in_child[i] => {}
            None => steps.push(Step {
                members: vec![i],
                times: 1,
            }),
            Some(g) if !emitted[g] => {
                emitted[g] = true;
                steps.push(Step {
                    members: members[g].clone(),
                    times: groups[g].times,
                });
            }
            Some(_) => {}
        }
    }
    Ok(steps)
}

/// The report line of the program: `name, 3 × [a, b], f (child: c, d), ...`, wrapped in
/// `loops × (...)`.
pub(super) fn describe(steps: &[Step], phases: &Phases, loops: u64) -> String {
    let step_list: Vec<String> = steps
        .iter()
        .map(|s| {
            let n: Vec<String> = s
                .members
                .iter()
                .map(|&m| describe_phase(phases, m))
                .collect();
            if s.times == 1 && n.len() == 1 {
                n[0].clone()
            } else {
                format!("{} × [{}]", s.times, n.join(", "))
            }
        })
        .collect();
    let mut program = step_list.join(", ");
    if loops > 1 {
        program = format!("{} × ({program})", loops);
    }
    program
}

/// A phase's name; a fork's with what its children run.
fn describe_phase(phases: &Phases, m: usize) -> String {
    let name = &phases.names[m];
    match &phases.plans[m].body {
        Body::Fork { child, .. } => {
            let c: Vec<&str> = child.iter().map(|&c| phases.names[c].as_str()).collect();
            format!("{name} (child: {})", c.join(", "))
        }
        _ => name.clone(),
    }
}
