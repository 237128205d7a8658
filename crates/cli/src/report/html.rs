//! The page: one self-contained HTML file with plotly.js inlined, so it opens offline and
//! can be mailed or attached as it is.

use super::load::Run;
use super::plots::Figure;
use plotly::Plot;

/// Forbid every fetch: a page that tried one would show it as a console error (and the
/// Chromium test fails on any).
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; \
style-src 'unsafe-inline'; img-src data: blob:; font-src data:";

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1150px;\
color:#222}h1{font-size:1.5em}h2{font-size:1.15em;margin:1.6em 0 .3em}\
table{border-collapse:collapse;font-size:.9em;white-space:nowrap}td,th{border:1px solid #ccc;padding:.2em .6em;\
text-align:right}td:first-child,th:first-child{text-align:left}\
thead th{background:#eef}tbody tr:nth-child(even){background:#f7f7f7}\
.note{color:#555;font-size:.9em}nav a{margin-right:1em;font-size:.9em}.top{display:flex;flex-wrap:wrap;gap:0 2.5em;align-items:flex-start}\
.top>div:first-child{max-width:520px}.figs{display:flex;flex-wrap:wrap}.figs>section{width:100%}.figs>section.half{width:50%}";

/// Escape text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// plotly.js itself: the crate embeds it (feature plotly_embed_js) followed by MathJax,
/// which the report does not use, so only the first script element is kept.
fn plotly_js() -> String {
    let all = Plot::offline_js_sources();
    match all.find("</script>") {
        Some(end) => all[..end + "</script>".len()].to_string(),
        None => all,
    }
}

/// The whole page for these runs, their figures and the compare table (for two or more).
pub fn page(runs: &[Run], figures: &[Figure], table: Option<String>) -> String {
    let labels: Vec<&str> = runs.iter().map(|r| r.label.as_str()).collect();
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <title>tierlab report: {}</title>\n<style>{STYLE}</style>\n{}\n</head><body>\n",
        escape(&labels.join(" vs ")),
        plotly_js()
    );
    out += "<h1>tierlab report</h1>\n<div class=\"top\"><div><h2>Runs</h2><table><thead><tr><th>run</th><th>scenario</th>\
            <th>seed</th><th>simulated s</th><th>timeline samples</th></tr></thead><tbody>";
    for run in runs {
        out += &format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{}</td></tr>",
            escape(&run.label),
            escape(&run.scenario),
            run.doc["seed"],
            run.doc["sim_seconds"].as_f64().unwrap_or(0.0),
            run.t_s.len()
        );
    }
    out += "</tbody></table>\n";
    if runs.len() > 1 {
        out += "<p class=\"note\">Runs overlaid: each run has its own dash (solid, dashed, \
                dotted, dash-dot in the order above).</p>\n";
    }
    out += "<nav>";
    for f in figures {
        out += &format!("<a href=\"#{}\">{}</a><br>", f.id, escape(&f.heading));
    }
    out += "</nav></div>\n";
    if let Some(table) = table {
        out += "<div><h2 id=\"compare\">Headline metrics (change against the first run)</h2>\n";
        out += &table;
        out += "</div>\n";
    }
    out += "</div>\n";
    out += "<div class=\"figs\">\n";
    for f in figures {
        let class = if f.half { " class=\"half\"" } else { "" };
        out += &format!(
            "<section{class}><h2 id=\"{}\">{}</h2>\n{}</section>\n",
            f.id,
            escape(&f.heading),
            f.plot.to_inline_html(Some(&format!("plot-{}", f.id)))
        );
    }
    out += "</div>\n";
    if runs.iter().any(|r| r.tlb_per_cpu.is_none()) {
        out += "<p class=\"note\">A run without <code>tlb_per_cpu</code> in its timeline \
                (written by an older tierlab) has no shootdown heatmap.</p>\n";
    }
    out + "</body></html>\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn inlines_plotly_without_mathjax() {
        let js = plotly_js();
        assert!(js.contains("plotly.js v"), "plotly.js is embedded");
        // plotly.js names MathJax itself; MathJax's own SVG font code is what must be absent.
        assert!(!js.contains("SVGFontData"), "MathJax is left out");
        assert_eq!(js.matches("<script").count(), 1, "one script element");
        assert!(
            !js.contains("<script src"),
            "nothing is loaded from elsewhere"
        );
    }
}
