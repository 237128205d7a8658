//! `tierlab report` in a real browser: two small runs, one report, loaded in headless Chromium
//! (Debian's package). Fails on any console message (errors, uncaught exceptions and CSP
//! violations, i.e. a fetch, all land there), on a plot that did not render, and on a blank
//! screenshot. Skips, saying why, when no Chromium is installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::tierlab;

/// Chromium from $CHROMIUM, else the first of Debian's and other usual names on the PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// Run headless Chromium on a page with `mode` (screenshot or DOM dump); returns its
/// (stdout, stderr). A fresh profile each time, so parallel tests do not share one.
fn browse(chrome: &Path, page: &Path, dir: &Path, mode: &[String]) -> (String, String) {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let profile = dir.join(format!("profile-{}", RUNS.fetch_add(1, Ordering::Relaxed)));
    let mut child = Command::new(chrome)
        .args([
            "--headless=new",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--window-size=1200,2400",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(mode)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    // Read both pipes on threads so a chatty Chromium cannot block on a full pipe.
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).ok();
        s
    });
    let start = Instant::now();
    while child.try_wait().expect("wait for chromium").is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish within 120 s on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (out.join().unwrap(), err.join().unwrap())
}

/// The page's console messages, as Chromium logs them (`...:CONSOLE...] "text", source: ...`).
fn console_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// (share of non-white pixels, distinct colours, share of coloured pixels) of a PNG.
fn pixel_stats(png_path: &Path) -> (f64, usize, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).expect("open screenshot"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("PNG size")];
    let info = reader.next_frame(&mut buf).expect("decode PNG");
    let channels = info.color_type.samples();
    assert!(channels >= 3, "expected an RGB(A) screenshot");
    let px = &buf[..info.buffer_size()];
    let (mut non_white, mut colored, mut colors) =
        (0usize, 0usize, std::collections::HashSet::new());
    let n = px.len() / channels;
    for p in px.chunks(channels) {
        let (r, g, b) = (p[0], p[1], p[2]);
        if r < 245 || g < 245 || b < 245 {
            non_white += 1;
        }
        // Plot lines and the heatmap are coloured; text and table rules are grey.
        if r.max(g).max(b) - r.min(g).min(b) > 60 {
            colored += 1;
        }
        colors.insert((r, g, b));
    }
    (
        non_white as f64 / n as f64,
        colors.len(),
        colored as f64 / n as f64,
    )
}

#[test]
fn report_renders_in_chromium_without_console_errors() {
    let dir = std::env::temp_dir().join(format!("tierlab-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runs = [
        ("base", vec![]),
        ("no-demotion", vec!["vm.demotion_enabled=false"]),
    ];
    let mut jsons = Vec::new();
    for (name, sets) in &runs {
        let json = dir.join(format!("{name}.json"));
        let mut args = vec!["run", "scenarios/validate/hot_small.toml", "--quiet"];
        for s in sets {
            args.extend(["--set", s]);
        }
        args.extend(["--json", json.to_str().unwrap()]);
        let o = tierlab(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        jsons.push(json);
    }
    let html = dir.join("report.html");
    let o = tierlab(&[
        "report",
        jsons[0].to_str().unwrap(),
        jsons[1].to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<table class=\"compare\">"),
        "no compare table"
    );
    assert!(
        !page.contains("<script src"),
        "the page loads a script from elsewhere"
    );
    let figures = page.matches("class=\"plotly-graph-div\"").count();
    assert!(figures >= 8, "only {figures} plots");

    let Some(chrome) = chromium() else {
        eprintln!("skipped the browser check: no chromium on the PATH (apt-get install chromium)");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };

    // The check must be able to fail: a page that logs an error is caught, and a blank page
    // is told from a rendered one.
    let bad = dir.join("bad.html");
    std::fs::write(
        &bad,
        "<html><body><script>console.error(\"x\")</script></body></html>",
    )
    .unwrap();
    let bad_png = dir.join("bad.png");
    let (_, err) = browse(
        &chrome,
        &bad,
        &dir,
        &[format!("--screenshot={}", bad_png.display())],
    );
    let caught = console_lines(&err);
    assert!(
        caught.iter().any(|l| l.contains("\"x\"")),
        "an injected console.error was not caught; chromium's stderr:\n{err}"
    );
    let (blank_ink, _, blank_color) = pixel_stats(&bad_png);
    assert!(
        blank_ink < 0.01 && blank_color == 0.0,
        "a blank page looks drawn"
    );

    let png_path = dir.join("report.png");
    let (_, err) = browse(
        &chrome,
        &html,
        &dir,
        &[format!("--screenshot={}", png_path.display())],
    );
    let console = console_lines(&err);
    assert!(
        console.is_empty(),
        "the report logged to the console:\n{}",
        console.join("\n")
    );
    let (ink, colors, colored) = pixel_stats(&png_path);
    eprintln!(
        "screenshot: {:.1} % non-white, {colors} colours, {:.2} % coloured",
        ink * 100.0,
        colored * 100.0
    );
    assert!(
        ink > 0.03 && colors > 200 && colored > 0.002,
        "the screenshot looks blank: {:.1} % non-white, {colors} colours, {:.2} % coloured",
        ink * 100.0,
        colored * 100.0
    );

    // Every plot drew: Plotly adds a plot container to each div once it has rendered.
    let (dom, err) = browse(&chrome, &html, &dir, &["--dump-dom".to_string()]);
    assert!(console_lines(&err).is_empty(), "console output:\n{err}");
    let drawn = dom.matches("class=\"plot-container plotly\"").count();
    assert_eq!(drawn, figures, "{drawn} of {figures} plots rendered");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("tierlab-report-err-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out.html");
    let out = out.to_str().unwrap();
    let missing = dir.join("missing.json");
    let o = tierlab(&["report", missing.to_str().unwrap(), "-o", out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("missing.json: cannot read"),
        "{err}"
    );

    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"timeline\": 3}").unwrap();
    let o = tierlab(&["report", bad.to_str().unwrap(), "-o", out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("bad.json: not a `tierlab run --json` result"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
