//! The report's figures as Plotly plots. Several runs share each figure: a series keeps its
//! colour across runs and each run has its own dash, so before/after lines sit side by side.

use super::load::{Run, RATES};
use plotly::common::{Anchor, DashType, Line, Mode, Orientation, Title};
use plotly::layout::{Axis, BarMode, Layout, Legend, Margin};
use plotly::{Bar, HeatMap, Plot, Scatter};

/// Plotly's default colours, fixed so that a series has one colour in every figure.
const COLORS: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];
const DASHES: [DashType; 4] = [
    DashType::Solid,
    DashType::Dash,
    DashType::Dot,
    DashType::DashDot,
];
/// 4 KiB pages per MiB.
const PAGES_PER_MIB: f64 = 256.0;

/// A figure: its anchor id, its heading, and the plot.
pub struct Figure {
    pub id: String,
    pub heading: String,
    pub plot: Plot,
    /// Half the page's width (the rate plots sit two abreast).
    pub half: bool,
}

fn layout(y_title: &str, height: usize) -> Layout {
    // The legend above the plot, so half-width plots keep their width for the data.
    let legend = Legend::new()
        .orientation(Orientation::Horizontal)
        .x(0.0)
        .y(1.02)
        .y_anchor(Anchor::Bottom);
    Layout::new()
        .height(height)
        .legend(legend)
        .margin(Margin::new().top(30).bottom(50).left(70).right(20))
        .x_axis(Axis::new().title(Title::with_text("simulated time (s)")))
        .y_axis(Axis::new().title(Title::with_text(y_title)))
}

fn line(color: usize, run: usize) -> Line {
    Line::new()
        .color(COLORS[color % COLORS.len()])
        .dash(DASHES[run % DASHES.len()].clone())
}

fn figure(id: &str, heading: &str, plot: Plot) -> Figure {
    Figure {
        id: id.into(),
        heading: heading.into(),
        plot,
        half: false,
    }
}

fn half(f: Figure) -> Figure {
    Figure { half: true, ..f }
}

/// Every figure for these runs, in page order.
pub fn all(runs: &[Run]) -> Vec<Figure> {
    let mut figs = vec![half(node_residency(runs)), shootdown_rate(runs)];
    figs.extend(shootdown_heatmaps(runs));
    figs.extend(region_residency(runs).into_iter().map(half));
    figs.extend(rates(runs));
    figs.push(half(phases(runs)));
    figs
}

fn node_residency(runs: &[Run]) -> Figure {
    let mut plot = Plot::new();
    for (r, run) in runs.iter().enumerate() {
        for (n, (name, _)) in run.nodes.iter().enumerate() {
            let mib = run.node_pages[n]
                .iter()
                .map(|p| p / PAGES_PER_MIB)
                .collect();
            plot.add_trace(
                Scatter::new(run.t_s.clone(), mib)
                    .name(format!("{} · {name}", run.label))
                    .mode(Mode::Lines)
                    .line(line(n, r)),
            );
        }
    }
    plot.set_layout(layout("resident anon + file (MiB)", 380));
    figure("nodes", "Residency per node", plot)
}

/// One figure per node of the first run: each watched region's pages on that node.
fn region_residency(runs: &[Run]) -> Vec<Figure> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    if runs.iter().all(|r| r.regions.is_empty()) {
        return Vec::new();
    }
    let mut figs = Vec::new();
    for (n, (node, top)) in first.nodes.iter().enumerate() {
        let mut plot = Plot::new();
        for (r, run) in runs.iter().enumerate() {
            for (g, (region, per_node)) in run.regions.iter().enumerate() {
                let Some(pages) = per_node.get(n) else {
                    continue;
                };
                let mib = pages.iter().map(|p| p / PAGES_PER_MIB).collect();
                plot.add_trace(
                    Scatter::new(run.t_s.clone(), mib)
                        .name(format!("{} · {region}", run.label))
                        .mode(Mode::Lines)
                        .line(line(g, r)),
                );
            }
        }
        plot.set_layout(layout(&format!("resident on {node} (MiB)"), 380));
        let tier = if *top { "top tier" } else { "lower tier" };
        figs.push(figure(
            &format!("regions-{n}"),
            &format!("Residency per region on {node} ({tier})"),
            plot,
        ));
    }
    figs
}

/// Per interval: (end time, increase per second) of a cumulative series.
fn per_second(t: &[f64], v: &[f64]) -> (Vec<f64>, Vec<f64>) {
    t.windows(2)
        .zip(v.windows(2))
        .filter(|(t, _)| t[1] > t[0])
        .map(|(t, v)| (t[1], (v[1] - v[0]).max(0.0) / (t[1] - t[0])))
        .unzip()
}

fn rates(runs: &[Run]) -> Vec<Figure> {
    RATES
        .iter()
        .enumerate()
        .map(|(c, (key, what))| {
            let mut plot = Plot::new();
            for (r, run) in runs.iter().enumerate() {
                let (t, rate) = per_second(&run.t_s, &run.counters[c]);
                plot.add_trace(
                    Scatter::new(t, rate)
                        .name(run.label.clone())
                        .mode(Mode::Lines)
                        .line(line(r, r)),
                );
            }
            plot.set_layout(layout(&format!("{key} per second"), 320));
            half(figure(
                &format!("rate-{key}"),
                &format!("Rate: {what}"),
                plot,
            ))
        })
        .collect()
}

fn shootdown_rate(runs: &[Run]) -> Figure {
    let mut plot = Plot::new();
    for (r, run) in runs.iter().enumerate() {
        let total: Vec<f64> = match &run.tlb_per_cpu {
            Some(rows) => rows.iter().map(|cpus| cpus.iter().sum()).collect(),
            None => continue,
        };
        let (t, rate) = per_second(&run.t_s, &total);
        plot.add_trace(
            Scatter::new(t, rate)
                .name(run.label.clone())
                .mode(Mode::Lines)
                .line(line(r, r)),
        );
    }
    plot.set_layout(layout("TLB interrupts per second", 320));
    half(figure("rate-tlb", "Rate: TLB shootdowns, all CPUs", plot))
}

/// A heatmap's interval end times and, per CPU, per interval, the interrupts taken.
type Grid = (Vec<f64>, Vec<Vec<f64>>);

/// One heatmap per run (CPU × interval, shootdowns received), on one colour scale.
fn shootdown_heatmaps(runs: &[Run]) -> Vec<Figure> {
    let grids: Vec<Option<Grid>> = runs
        .iter()
        .map(|run| {
            let rows = run.tlb_per_cpu.as_ref()?;
            let cpus = rows.first()?.len();
            let t: Vec<f64> = run.t_s.iter().skip(1).copied().collect();
            // z[cpu][interval]: interrupts the CPU took in that interval.
            let z = (0..cpus)
                .map(|c| {
                    rows.windows(2)
                        .map(|w| {
                            let get = |row: &Vec<f64>| row.get(c).copied().unwrap_or(0.0);
                            (get(&w[1]) - get(&w[0])).max(0.0)
                        })
                        .collect()
                })
                .collect();
            Some((t, z))
        })
        .collect();
    let zmax = grids
        .iter()
        .flatten()
        .flat_map(|(_, z)| z.iter().flatten())
        .fold(0.0f64, |a, &b| a.max(b))
        .max(1.0);
    runs.iter()
        .zip(grids)
        .enumerate()
        .filter_map(|(r, (run, grid))| {
            let (t, z) = grid?;
            let cpus: Vec<String> = (0..z.len()).map(|c| format!("CPU{c}")).collect();
            let height = (160 + 18 * cpus.len()).min(700);
            let mut plot = Plot::new();
            plot.add_trace(
                HeatMap::new(t, cpus, z)
                    .name(run.label.clone())
                    .zmin(0.0)
                    .zmax(zmax)
                    .color_scale(plotly::common::ColorScale::Palette(
                        plotly::common::ColorScalePalette::Viridis,
                    )),
            );
            plot.set_layout(layout("CPU", height));
            Some(figure(
                &format!("heatmap-{r}"),
                &format!("TLB shootdowns per CPU per sample interval: {}", run.label),
                plot,
            ))
        })
        .collect()
}

fn phases(runs: &[Run]) -> Figure {
    let mut plot = Plot::new();
    for (r, run) in runs.iter().enumerate() {
        let names = run.phases.iter().map(|p| p.name.clone()).collect();
        let ms = run.phases.iter().map(|p| p.duration_ms).collect();
        plot.add_trace(
            Bar::new(names, ms)
                .name(run.label.clone())
                .marker(plotly::common::Marker::new().color(COLORS[r % COLORS.len()])),
        );
    }
    let layout = layout("simulated time (ms)", 360)
        .bar_mode(BarMode::Group)
        .x_axis(Axis::new());
    plot.set_layout(layout);
    figure("phases", "Phase timings", plot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_per_second_at_the_interval_end() {
        let (t, r) = per_second(&[0.0, 0.5, 0.5, 1.0], &[0.0, 10.0, 10.0, 40.0]);
        assert_eq!(t, vec![0.5, 1.0]);
        assert_eq!(r, vec![20.0, 60.0]);
    }
}
