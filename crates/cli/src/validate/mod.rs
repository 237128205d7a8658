//! `tierlab validate`: run a scenario's workload on a real Linux kernel under QEMU and compare
//! it with the simulator. `guest` boots the kernel on a machine mirroring the scenario's and
//! runs a program in it; `cpio` writes the initramfs it boots from.

pub mod calibrate;
pub mod command;
pub mod cpio;
pub mod ftrace;
pub mod guest;
pub mod replay;
pub mod report;
pub mod scan_trace;
pub mod seeds;
pub mod suite;
