//! `tierlab knobs`: every config knob with its default, the range it accepts, the kernel file
//! it mirrors and a one-line doc, from the declarations in tierlab's `config/`. `--markdown`
//! prints the table README.md carries (a test keeps the two equal).

use tierlab::config::{all_knobs, knob::TIERLAB};

pub fn run(markdown: bool) -> Result<(), String> {
    if markdown {
        print!("{}", markdown_table());
    } else {
        print!("{}", listing());
    }
    Ok(())
}

/// One knob per row: key, default, range, mirrored path, summary.
pub fn markdown_table() -> String {
    let mut out =
        String::from("| Key | Default | Range | Mirrors | What it does |\n|---|---|---|---|---|\n");
    for (key, knob) in all_knobs() {
        let path = if knob.path == TIERLAB {
            TIERLAB.to_string()
        } else {
            format!("`{}`", knob.path)
        };
        let cells = [
            format!("`{key}`"),
            if knob.required {
                "required".to_string()
            } else {
                format!("`{}`", knob.default_text())
            },
            knob.range_text(),
            path,
            knob.summary(),
        ];
        let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
        out += &format!("| {} |\n", cells.join(" | "));
    }
    out
}

/// `key = default` and the mirrored path, then the doc, then the range and where it comes from.
fn listing() -> String {
    let knobs = all_knobs();
    let lhs: Vec<String> = knobs
        .iter()
        .map(|(key, knob)| format!("{key} = {}", knob.default_text()))
        .collect();
    let width = lhs.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for ((_, knob), lhs) in knobs.iter().zip(&lhs) {
        out += &format!(
            "{lhs}{}  {}\n    {}\n    {}, range {} ({})\n",
            pad(lhs, width),
            knob.path,
            knob.summary(),
            knob.ty,
            knob.range_text(),
            knob.source
        );
    }
    out
}

/// Spaces that bring `s` to `width` characters.
fn pad(s: &str, width: usize) -> String {
    " ".repeat(width.saturating_sub(s.chars().count()))
}
