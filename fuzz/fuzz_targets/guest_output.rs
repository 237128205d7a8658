//! The guest output `tierlab validate` reads back: the program's JSON sample lines
//! (report::parse_samples) and the raw ftrace text (ftrace::parse). The modules are the
//! CLI's own files, compiled here as they are in the binary.
#![no_main]
#![allow(dead_code)]

use libfuzzer_sys::fuzz_target;

/// The one item ftrace.rs uses from guest.rs (as `super::guest`).
mod guest {
    pub fn sh_quote(s: &str) -> String {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
#[path = "../../crates/cli/src/validate/ftrace.rs"]
mod ftrace;
#[path = "../../crates/cli/src/validate/report.rs"]
mod report;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    if let Ok(samples) = report::parse_samples(&lines) {
        // The residency every comparison starts from: node 0 is the top tier.
        for s in &samples {
            for (_, pages) in &s.regions {
                let _ = report::dram_share(pages, &[true, false, false, false]);
            }
        }
    }
    let _ = ftrace::parse(&lines);
});
