//! `tierlab report RUN.json [MORE.json ...] -o OUT.html`: one self-contained HTML page with
//! the runs' timelines plotted (Plotly, inlined) and, for several runs, a compare table.
//! A `tierlab compare --json` file counts as its runs.

mod html;
mod load;
mod plots;
mod table;

use plotly::Configuration;
use std::path::{Path, PathBuf};

/// Build the report from these run JSONs and write it to `out`.
pub fn run(inputs: &[PathBuf], out: &Path) -> Result<(), String> {
    if inputs.is_empty() {
        return Err("report: give at least one run JSON (from `tierlab run --json FILE`)".into());
    }
    let mut runs = Vec::new();
    for path in inputs {
        runs.extend(load::load(path)?);
    }
    load::distinct_labels(&mut runs);
    let mut figures = plots::all(&runs);
    for f in &mut figures {
        // No Plotly logo link, so the page links nowhere.
        f.plot
            .set_configuration(Configuration::new().display_logo(false));
    }
    let table = (runs.len() > 1).then(|| {
        let docs: Vec<(&str, &serde_json::Value)> =
            runs.iter().map(|r| (r.label.as_str(), &r.doc)).collect();
        table::html(&docs)
    });
    let page = html::page(&runs, &figures, table);
    std::fs::write(out, page).map_err(|e| format!("{}: cannot write: {e}", out.display()))
}
