//! `type = "socket_pairs"`: P pairs of processes passing data through a socket, one writing
//! and one reading, as lmbench's bw_unix (AF_UNIX stream, 64 KiB writes, `XFERSIZE` in
//! lmbench's bench.h) and netperf's SCTP_STREAM_MANY (a message per send; lkp-tests runs it
//! with `-m 10K`) do. The writer's CPU allocates the buffers and the reader's frees them,
//! which is what seed 002's networking tables exercise. Each reader counts the bytes it
//! receives as work, so the summary's work rate is the bandwidth.

use serde::Deserialize;
use tierlab::config::{typed, ConfigError};
use tierlab::workload::{Mark, Op, OpBuf, Placement, SockKind, ThreadSpec, ThreadStream, Workload};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(rename = "type")]
    _kind: String,
    /// Writer/reader pairs.
    pairs: u32,
    /// "unix" (AF_UNIX stream) or "sctp" (a linear buffer per message).
    socket: String,
    /// Bytes per send and per recv.
    message_bytes: u32,
    /// Messages each writer sends.
    messages: u64,
}

/// Ops a pair's thread repeats.
struct PairStream {
    op: Op,
    /// Bytes a recv counts as work (0 for the writer).
    work: u32,
    left: u64,
}

impl ThreadStream for PairStream {
    fn refill(&mut self, out: &mut OpBuf) {
        let n = self.left.min(512);
        for _ in 0..n {
            out.push(self.op);
            if self.work > 0 {
                out.push(Op::Mark(Mark::Work(self.work)));
            }
        }
        self.left -= n;
    }
}

/// Build the workload from the scenario's `[workload]` table.
pub fn build(table: &toml::Table, origin: &str, cpus: u32) -> Result<Workload, ConfigError> {
    let raw: Raw = typed(toml::Value::Table(table.clone()), origin, "workload")?;
    let err = |key: &str, msg: String| ConfigError::key(origin, format!("workload.{key}"), msg);
    let kind = match raw.socket.as_str() {
        "unix" => SockKind::UnixStream,
        "sctp" => SockKind::Linear,
        other => {
            return Err(err(
                "socket",
                format!("expected \"unix\" or \"sctp\", found {other:?}"),
            ))
        }
    };
    if raw.pairs == 0 || raw.pairs.saturating_mul(2) > cpus {
        return Err(err(
            "pairs",
            format!(
                "must be between 1 and half the CPUs ({}), found {}",
                cpus / 2,
                raw.pairs
            ),
        ));
    }
    if raw.message_bytes == 0 || raw.message_bytes > 1 << 20 {
        return Err(err(
            "message_bytes",
            format!("must be between 1 and 1 MiB, found {}", raw.message_bytes),
        ));
    }
    if raw.messages == 0 {
        return Err(err("messages", "must be at least 1".into()));
    }
    let bytes = raw.message_bytes;
    let mut threads = Vec::new();
    for p in 0..raw.pairs {
        let send = Op::Send {
            sock: p,
            bytes,
            kind,
        };
        let recv = Op::Recv { sock: p, bytes };
        // Each side is a process of its own on a CPU of its own, a pair's two on neighbouring
        // CPUs (an assumption: the seed does not say where its pairs ran).
        for (i, (op, work)) in [(send, 0), (recv, bytes)].into_iter().enumerate() {
            threads.push(ThreadSpec {
                process: 2 * p + i as u32,
                placement: Placement::Pinned(2 * p + i as u32),
                stream: Box::new(PairStream {
                    op,
                    work,
                    left: raw.messages,
                }),
            });
        }
    }
    Ok(Workload {
        name: format!("socket_pairs ({} × {}, {} B)", raw.pairs, raw.socket, bytes),
        work_unit: "bytes".into(),
        processes: 2 * raw.pairs,
        files: vec![],
        threads,
        info: vec![
            ("pairs".into(), raw.pairs.to_string()),
            ("socket".into(), raw.socket.clone()),
            ("message bytes".into(), bytes.to_string()),
        ],
        phases: vec![],
        regions: vec![],
        expected: None,
    })
}
