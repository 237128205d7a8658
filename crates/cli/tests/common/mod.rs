//! What the binary's tests share: the repository root, and the binary run there.
#![allow(dead_code)] // each test file uses what it needs

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn tierlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierlab"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run tierlab")
}
