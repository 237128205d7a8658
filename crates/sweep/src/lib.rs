//! Sweeps: the cartesian product of knob values and seeds over one or more scenarios (a
//! GRID.toml), run in parallel, tabulated one row per run as CSV and Parquet. Shared by
//! `tierlab sweep` and the Python package, so both give the same table.

pub mod grid;
pub mod metrics;
pub mod parquet_out;
pub mod run;
pub mod table;

pub use grid::{Grid, Point};
