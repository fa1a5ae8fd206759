//! The STile strategy's measured side: tile costs calibrated on this machine, and the
//! `tiles` candidates a search adds to the space.
//!
//! [`calibration`] measures, at the operator's dense width, thread count and element
//! type, a matrix of scattered entries (`csr` under `rowwise`) and, per side of
//! [`SIDES`], a matrix of full aligned square blocks (`tiles` with that side alone, so
//! every block is a tile): time per entry and time per tile, the coefficients of the
//! tile model. Measured once per machine and setting, then read back from a JSON-lines
//! file beside the tuning database (`tuning.stile.jsonl` next to `tuning.jsonl`); a
//! line that does not parse is skipped. The cost of a scattered entry is then measured
//! on the matrix at hand ([`entry_ms_on`]: how much its dense rows are reused decides
//! it), and [`candidates`] asks the model ([`sparsile_tune::stile`]) for the
//! decompositions worth measuring on it.
//!
//! ```no_run
//! use sparsile::auto::stile::calibration;
//! use sparsile_ir::{settings::Settings, DType};
//! use sparsile_tune::op::Operator;
//! let cal = calibration(Operator::Spmm, 32, 2, DType::F32, &Settings::from_env()).unwrap();
//! println!("a 16 x 16 tile costs {:.1} entries", cal.tile_ms[1].1 / cal.entry_ms);
//! ```

use std::io::Write;
use std::path::PathBuf;

use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use sparsile_formats::decompose::DecomposeRule;
use sparsile_formats::{CooTensor, Format, SparseTensor};
use sparsile_ir::settings::Settings;
use sparsile_ir::DType;
use sparsile_tune::db::median;
use sparsile_tune::features::Csr;
use sparsile_tune::op::Operator;
use sparsile_tune::search::Evaluator;
use sparsile_tune::space::Candidate;
use sparsile_tune::stile::{configurations, Calibration, Evaluation, TileStats, SIDES};

use super::evaluate::{EvaluateError, OpEvaluator};

/// The version of the calibration's method; records of another are measured again.
pub const CALIBRATION_VERSION: u32 = 2;

/// The side of the calibration matrices.
const SIZE: usize = 4096;

/// The stored entries of each calibration matrix.
const CELLS: usize = 1 << 18;

/// The side of the matrix that measures a part's own pass, and its entries a row: a
/// kernel of a few microseconds, where a pass's cost shows.
const PART_SIZE: usize = 1024;
const PART_PER_ROW: usize = 8;

/// At most this many decompositions are measured, each with and without prefetching
/// (the one kernel parameter whose best setting changes from matrix to matrix).
pub const MAX_TILE_CANDIDATES: usize = 4;

/// Keeps the decompositions estimated within this factor of the best (STile's r).
pub const WITHIN: f64 = 1.2;

#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    version: u32,
    target: String,
    calibration: Calibration,
}

/// Where calibrations are kept, beside the tuning database (none without a cache
/// folder).
pub fn calibration_path(settings: &Settings) -> Option<PathBuf> {
    let db = match &settings.tuning_db {
        Some(p) => p.clone(),
        None => sparsile_runtime::jit::private_cache_dir(settings)
            .ok()?
            .join("tuning.jsonl"),
    };
    let stem = db.file_stem()?.to_string_lossy().into_owned();
    Some(db.with_file_name(format!("{stem}.stile.jsonl")))
}

fn stored(settings: &Settings, width: usize, threads: usize, bytes: usize) -> Option<Calibration> {
    let text = std::fs::read_to_string(calibration_path(settings)?).ok()?;
    let target = sparsile_tune::target::host();
    // The latest matching record; a line that does not parse, or holds impossible
    // times or other sides, is skipped.
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Stored>(l).ok())
        .filter(|s| s.version == CALIBRATION_VERSION && s.target == target)
        .map(|s| s.calibration)
        .find(|c| {
            c.width == width
                && c.threads == threads
                && c.dtype_bytes == bytes
                && c.entry_ms > 0.0
                && c.entry_ms.is_finite()
                && c.part_ms >= 0.0
                && c.part_ms.is_finite()
                && c.tile_ms.iter().map(|t| t.0).eq(SIDES)
                && c.tile_ms.iter().all(|t| t.1 > 0.0 && t.1.is_finite())
        })
}

fn store(settings: &Settings, calibration: &Calibration) {
    let Some(path) = calibration_path(settings) else {
        return;
    };
    let record = Stored {
        version: CALIBRATION_VERSION,
        target: sparsile_tune::target::host(),
        calibration: calibration.clone(),
    };
    let Ok(mut line) = serde_json::to_string(&record) else {
        return;
    };
    line.push('\n');
    // One write of one line in append mode: concurrent writers do not interleave.
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// The operator and width the calibration measures for `op` at `width`: SpMV at 1,
/// everything else as SpMM.
fn measured_as(op: Operator, width: usize) -> (Operator, usize) {
    match op {
        Operator::Spmv => (Operator::Spmv, 1),
        _ => (Operator::Spmm, width),
    }
}

/// The tile model's costs for `op` at this width, thread count and type: stored, or
/// measured now and stored (see the module docs).
pub fn calibration(
    op: Operator,
    width: usize,
    threads: usize,
    dtype: DType,
    settings: &Settings,
) -> Result<Calibration, EvaluateError> {
    let (_, width) = measured_as(op, width);
    if let Some(c) = stored(settings, width, threads, dtype.size_bytes()) {
        return Ok(c);
    }
    recalibrate(op, width, threads, dtype, settings)
}

/// Measures the tile model's costs again and stores them (they replace any earlier
/// record for the same setting: the newest is read).
pub fn recalibrate(
    op: Operator,
    width: usize,
    threads: usize,
    dtype: DType,
    settings: &Settings,
) -> Result<Calibration, EvaluateError> {
    let (op, width) = measured_as(op, width);
    let c = measure(op, width, threads, dtype)?;
    store(settings, &c);
    Ok(c)
}

/// Rounds of [`time`]: the least of their medians is kept (a round that a busy spell of
/// the machine slowed does not set a coefficient).
const ROUNDS: usize = 3;

/// The least of [`ROUNDS`] medians of one candidate's times on `a`, in milliseconds.
fn time(
    op: Operator,
    a: &SparseTensor<'_>,
    width: usize,
    threads: usize,
    recipe: &str,
) -> Result<f64, EvaluateError> {
    time_on(&mut OpEvaluator::new(op, a, width, threads, 1)?, recipe)
}

/// [`time`] with an evaluator that already holds the operands (the search's own).
fn time_on(ev: &mut OpEvaluator, recipe: &str) -> Result<f64, EvaluateError> {
    let c = Candidate::new("csr", recipe);
    let failed = |reason: String| EvaluateError::Calibration {
        recipe: recipe.to_string(),
        reason,
    };
    ev.prepare(&c).map_err(failed)?;
    let mut best = f64::INFINITY;
    for _ in 0..ROUNDS {
        let times = ev.time(&c, 3, 10).map_err(failed)?;
        best = best.min(median(&times).ok_or_else(|| failed("no times".into()))?);
    }
    Ok(best)
}

fn matrix(
    size: usize,
    triplets: &[(usize, usize, f64)],
    dtype: DType,
) -> Result<SparseTensor<'static>, EvaluateError> {
    let coo = CooTensor::from_triplets(vec![size, size], triplets)?;
    Ok(SparseTensor::from_coo_with(&coo, &Format::Csr, dtype)?)
}

fn measure(
    op: Operator,
    width: usize,
    threads: usize,
    dtype: DType,
) -> Result<Calibration, EvaluateError> {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5717e);
    let per_row = CELLS / SIZE;
    let mut scattered = Vec::with_capacity(CELLS);
    for i in 0..SIZE {
        for j in sample(&mut rng, SIZE, per_row) {
            scattered.push((i, j, rng.random_range(-1.0..1.0)));
        }
    }
    // The time of `recipe` on a `size`-square matrix of `triplets`.
    let run = |size: usize, triplets: &[(usize, usize, f64)], recipe: &str| {
        time(op, &matrix(size, triplets, dtype)?, width, threads, recipe)
    };
    let entry_ms = run(SIZE, &scattered, "rowwise")? / CELLS as f64;
    let mut tile_ms = Vec::new();
    for side in SIDES {
        let grid = SIZE / side;
        let blocks = CELLS / (side * side);
        let mut cells = Vec::with_capacity(CELLS);
        for b in sample(&mut rng, grid * grid, blocks) {
            let (bi, bj) = (b / grid, b % grid);
            for i in 0..side {
                for j in 0..side {
                    cells.push((bi * side + i, bj * side + j, rng.random_range(-1.0..1.0)));
                }
            }
        }
        let recipe = format!("tiles:t{side}=1{}", if side == 8 { "" } else { ",t8=0" });
        let t = run(SIZE, &cells, &recipe)?;
        tile_ms.push((side, t / blocks as f64));
    }
    // A part's own pass: a small matrix of scattered entries against the same entries
    // with one more part holding one full 32 x 32 tile (a tile costs its 1,024 cells:
    // no other block is one), less that tile.
    let small = PART_SIZE;
    let mut scattered = Vec::new();
    for i in 0..small {
        for j in sample(&mut rng, small, PART_PER_ROW) {
            if i >= 32 || j >= 32 {
                scattered.push((i, j, rng.random_range(-1.0..1.0)));
            }
        }
    }
    let mut with_tile = scattered.clone();
    for i in 0..32 {
        for j in 0..32 {
            with_tile.push((i, j, rng.random_range(-1.0..1.0)));
        }
    }
    with_tile.sort_by_key(|t| (t.0, t.1));
    let plain = run(small, &scattered, "rowwise")?;
    let parted = run(small, &with_tile, "tiles:t32=1024,t8=0")?;
    let tile32 = tile_ms.first().map_or(0.0, |t| t.1);
    let part_ms = (parted - plain - tile32).max(0.0);
    Ok(Calibration {
        width,
        threads,
        dtype_bytes: dtype.size_bytes(),
        entry_ms,
        tile_ms,
        part_ms,
    })
}

/// A scattered entry's cost on the matrix `ev` holds (`csr` its pattern):
/// `csr/rowwise`'s time over the model's units for CSR (one a non-zero, one a row), in
/// milliseconds. The evaluator is the search's, so its operands are made once.
pub fn entry_ms_on(ev: &mut OpEvaluator, csr: &Csr) -> Result<f64, EvaluateError> {
    let units = (csr.indices.len() + csr.rows).max(1) as f64;
    Ok(time_on(ev, "rowwise")? / units)
}

/// The `tiles` candidates worth measuring on `csr` (whose scattered entries cost
/// `entry_ms` each), stored in `format`, with their
/// model evaluations and decomposition rules, best estimate first: each kept
/// decomposition with gathered rows prefetched and without.
pub fn candidates(
    csr: &Csr,
    format: &str,
    calibration: &Calibration,
    entry_ms: f64,
) -> Vec<(Candidate, Evaluation, DecomposeRule)> {
    let stats = TileStats::of(csr);
    configurations(
        &stats,
        &calibration.costs_on(entry_ms),
        calibration.part_ms / entry_ms,
        WITHIN,
        MAX_TILE_CANDIDATES,
    )
    .into_iter()
    .flat_map(|(config, e)| {
        let rule = config.rule();
        [String::new(), ",prefetch=0".to_string()].map(|extra| {
            (
                Candidate::new(format, format!("{}{extra}", config.recipe())),
                e.clone(),
                rule.clone(),
            )
        })
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored record whose costs are impossible (a negative or infinite part cost, an
    /// entry cost of zero) is skipped for an earlier valid one.
    #[test]
    fn stored_calibrations_with_impossible_costs_are_skipped() {
        let dir = std::env::temp_dir().join(format!("sparsile-stile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let settings = Settings {
            tuning_db: Some(dir.join("tuning.jsonl")),
            ..Settings::default()
        };
        let good = Calibration {
            width: 32,
            threads: 2,
            dtype_bytes: 4,
            entry_ms: 1e-6,
            tile_ms: SIDES.iter().map(|&s| (s, 1e-5)).collect(),
            part_ms: 2e-3,
        };
        store(&settings, &good);
        for bad in [
            Calibration {
                part_ms: -1.0,
                ..good.clone()
            },
            Calibration {
                entry_ms: 0.0,
                ..good.clone()
            },
        ] {
            store(&settings, &bad);
        }
        let found = stored(&settings, 32, 2, 4).expect("the valid record");
        assert_eq!(found.part_ms, good.part_ms);
        assert_eq!(found.entry_ms, good.entry_ms);
        assert!(stored(&settings, 128, 2, 4).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
