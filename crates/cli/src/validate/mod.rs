//! `tierlab validate`: run a scenario's workload on a real Linux kernel under QEMU and compare
//! it with the simulator. `guest` boots the kernel on a machine mirroring the scenario's and
//! runs a program in it; `cpio` writes the initramfs it boots from.

// The `validate` subcommand that calls into this module is added separately; until then
// nothing in the binary uses it but its tests.
#![allow(dead_code)]

pub mod cpio;
pub mod guest;
