//! The STile strategy's model: nested square tiles of a matrix, the cost of a
//! decomposition into dense tiles and scattered entries, and the decompositions worth
//! measuring.
//!
//! [`TileStats`] counts a matrix's non-empty aligned blocks at the sides of
//! [`SIDES`] (32, 16, 8, 4; each nests in the one before) once. A *configuration*
//! ([`TileConfig`]) names the levels allowed to hold tiles and what a tile of each
//! costs, in scattered entries (the `tiles` recipe's `tS` parameters); for it,
//! [`TileStats::evaluate`] finds the cheapest nested choice exactly, bottom-up, as the
//! `tiles(…)` decomposition rule does (a block is a tile when that costs no more than
//! its sub-blocks and entries), and reports the tiles per level, the entries left over
//! and the estimated cost: tiles and entries, plus one unit for each output row each
//! part passes over (every part reads and writes its output rows again); the search
//! adds the calibrated cost of a part's parallel pass for each tile part.
//!
//! The tile costs come from a [`Calibration`]: measured times of a dense tile of each
//! side and of a scattered entry at one dense width, on this machine (STile fits a
//! cost `a · R + b` per tile kind to measured sub-tasks; here the measured ratio is the
//! fitted coefficient), with the cost of an entry of the matrix at hand
//! ([`Calibration::costs_on`]). [`configurations`] is the local search around the calibrated
//! costs: every set of levels, each cost scaled by ½, 1 and 2, the distinct
//! decompositions that use tiles (a level left without tiles dropped) kept when their
//! estimate is below CSR's and within `within` of the best (so a matrix without dense
//! blocks keeps none).
//!
//! ```
//! use sparsile_tune::features::Csr;
//! use sparsile_tune::stile::{TileConfig, TileStats};
//! // An 8 × 8 matrix: a full 4 × 4 block at the origin and two scattered entries.
//! let mut rows: Vec<Vec<i64>> = vec![vec![]; 8];
//! for i in 0..4 { rows[i].extend(0..4); }
//! rows[5].push(7);
//! rows[7].push(1);
//! let indptr: Vec<i64> = std::iter::once(0).chain(rows.iter().scan(0, |s, r| { *s += r.len() as i64; Some(*s) })).collect();
//! let indices: Vec<i64> = rows.concat();
//! let stats = TileStats::of(&Csr { rows: 8, cols: 8, indptr: &indptr, indices: &indices });
//! let e = stats.evaluate(&TileConfig { costs: vec![(4, 3)] });
//! assert_eq!(e.tiles, vec![(4, 1)]);
//! assert_eq!(e.rest, 2);
//! ```

use serde::{Deserialize, Serialize};
use sparsile_formats::decompose::{DecomposeRule, TileLevel};

use crate::features::Csr;

/// The square tile sides, largest first.
pub const SIDES: [usize; 4] = [32, 16, 8, 4];

/// One level's non-empty blocks: keys sorted, and per block its entry count (the
/// smallest level) and the index of its parent block in the level above.
#[derive(Debug, Clone)]
struct Level {
    side: usize,
    /// `(block row, block column)` of each non-empty block, sorted.
    keys: Vec<(u32, u32)>,
    /// The index of each block's enclosing block in the previous (larger) level.
    parent: Vec<u32>,
}

/// A matrix's non-empty aligned blocks at every side of [`SIDES`].
#[derive(Debug, Clone)]
pub struct TileStats {
    pub rows: usize,
    pub nnz: usize,
    levels: Vec<Level>,
    /// Entries in each block of the smallest level.
    counts: Vec<u64>,
}

/// Which levels may hold tiles and what a tile costs there, in scattered entries:
/// `(side, cost)`, sides from [`SIDES`], largest first.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TileConfig {
    pub costs: Vec<(usize, u32)>,
}

impl TileConfig {
    /// The decomposition rule of this configuration, `tiles(S, S, cost, …)`.
    pub fn rule(&self) -> DecomposeRule {
        DecomposeRule::Tiles {
            levels: self
                .costs
                .iter()
                .map(|&(side, cost)| TileLevel {
                    r: side,
                    c: side,
                    cost,
                })
                .collect(),
        }
    }

    /// The `tiles` recipe that runs this configuration: `tiles:t16=40,t8=12,t4=3`.
    pub fn recipe(&self) -> String {
        let mut params: Vec<String> = SIDES
            .iter()
            .map(|s| {
                let cost = self.costs.iter().find(|c| c.0 == *s).map_or(0, |c| c.1);
                format!("t{s}={cost}")
            })
            .collect();
        // The recipe's own default level (`t8`) must be given even when unused.
        params.retain(|p| !p.ends_with("=0") || p.starts_with("t8="));
        format!("tiles:{}", params.join(","))
    }
}

/// What a configuration makes of a matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// `(side, tiles)` per level of the configuration.
    pub tiles: Vec<(usize, usize)>,
    /// Entries left to the scattered part.
    pub rest: usize,
    /// The estimated cost, in scattered entries (see the module docs).
    pub cost: f64,
}

impl Evaluation {
    /// Whether any tile is used.
    pub fn uses_tiles(&self) -> bool {
        self.tiles.iter().any(|t| t.1 > 0)
    }
}

impl TileStats {
    /// Counts the blocks of `csr` (its column indices in range; duplicates count twice).
    pub fn of(csr: &Csr) -> TileStats {
        let small = *SIDES.last().expect("sides");
        let mut all: Vec<(u32, u32)> = Vec::with_capacity(csr.indices.len());
        for i in 0..csr.rows {
            let lo = csr.indptr[i].max(0) as usize;
            let hi = (csr.indptr[i + 1].max(0) as usize).min(csr.indices.len());
            for &j in &csr.indices[lo.min(hi)..hi] {
                all.push(((i / small) as u32, (j.max(0) as usize / small) as u32));
            }
        }
        all.sort_unstable();
        let mut keys: Vec<(u32, u32)> = Vec::new();
        let mut counts: Vec<u64> = Vec::new();
        for run in all.chunk_by(|a, b| a == b) {
            keys.push(run[0]);
            counts.push(run.len() as u64);
        }
        let mut levels: Vec<Level> = vec![Level {
            side: small,
            keys,
            parent: Vec::new(),
        }];
        for &side in SIDES.iter().rev().skip(1) {
            let child = levels.last_mut().expect("a level");
            let ratio = (side / child.side) as u32;
            let mut up: Vec<(u32, u32)> = child
                .keys
                .iter()
                .map(|&(bi, bj)| (bi / ratio, bj / ratio))
                .collect();
            up.sort_unstable();
            up.dedup();
            child.parent = child
                .keys
                .iter()
                .map(|&(bi, bj)| {
                    up.binary_search(&(bi / ratio, bj / ratio))
                        .expect("every parent is listed") as u32
                })
                .collect();
            levels.push(Level {
                side,
                keys: up,
                parent: Vec::new(),
            });
        }
        levels.reverse();
        TileStats {
            rows: csr.rows,
            nnz: csr.indices.len(),
            levels,
            counts,
        }
    }

    /// The cheapest nested choice of tiles for `config` (see the module docs).
    pub fn evaluate(&self, config: &TileConfig) -> Evaluation {
        let n = self.levels.len();
        let cost_at = |l: usize| {
            config
                .costs
                .iter()
                .find(|c| c.0 == self.levels[l].side)
                .map(|c| c.1 as u64)
        };
        // Bottom-up: whether each block is a tile; `below` ends as the top level's best
        // costs.
        let mut tile: Vec<Vec<bool>> = vec![Vec::new(); n];
        let mut below: Vec<u64> = self.counts.clone();
        for l in (0..n).rev() {
            let cost = cost_at(l);
            tile[l] = below
                .iter()
                .map(|&s| cost.is_some_and(|c| c <= s))
                .collect();
            let best = below.iter().map(|&s| cost.map_or(s, |c| c.min(s)));
            below = if l > 0 {
                let mut above = vec![0u64; self.levels[l - 1].keys.len()];
                for (&p, b) in self.levels[l].parent.iter().zip(best) {
                    above[p as usize] += b;
                }
                above
            } else {
                best.collect()
            };
        }
        let top: u64 = below.iter().sum();
        // Top-down: a block is covered when it or an enclosing block is a tile; a tile
        // counts at the outermost level that covers it.
        let mut tiles = Vec::new();
        let mut part_rows = 0usize;
        let mut covered: Vec<bool> = Vec::new();
        for (l, level) in self.levels.iter().enumerate() {
            let above = |b: usize| l > 0 && covered[level.parent[b] as usize];
            let mut block_rows: Vec<u32> = (0..level.keys.len())
                .filter(|&b| !above(b) && tile[l][b])
                .map(|b| level.keys[b].0)
                .collect();
            if cost_at(l).is_some() {
                tiles.push((level.side, block_rows.len()));
            }
            block_rows.dedup();
            part_rows += (block_rows.len() * level.side).min(self.rows);
            covered = (0..level.keys.len())
                .map(|b| above(b) || tile[l][b])
                .collect();
        }
        let small = self.levels[n - 1].side;
        let mut rest = 0usize;
        let mut rest_rows: Vec<u32> = Vec::new();
        for (b, &c) in self.counts.iter().enumerate() {
            if !covered[b] {
                rest += c as usize;
                rest_rows.push(self.levels[n - 1].keys[b].0);
            }
        }
        rest_rows.dedup();
        let rest_rows = (rest_rows.len() * small).min(self.rows);
        Evaluation {
            tiles,
            rest,
            cost: top as f64 + (part_rows + rest_rows) as f64,
        }
    }
}

/// Measured costs of one machine at one dense width: a scattered entry and a dense
/// tile of each side, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub width: usize,
    pub threads: usize,
    pub dtype_bytes: usize,
    pub entry_ms: f64,
    /// `(side, ms)` per tile side.
    pub tile_ms: Vec<(usize, f64)>,
    /// What one more part costs beyond its tiles: a parallel pass of its own.
    #[serde(default)]
    pub part_ms: f64,
}

impl Calibration {
    /// The configuration for a matrix whose scattered entries cost `entry_ms` each:
    /// every side, each tile's cost in those entries. A tile gathers one dense row per
    /// column, as an entry does, so where the matrix's entries cost more than the
    /// calibration's (its dense rows miss the caches the calibration's fit in), each of
    /// a tile's `S` gathered rows costs that difference more:
    /// `tile_ms(S) + S · max(0, entry_ms − calibrated entry_ms)`.
    pub fn costs_on(&self, entry_ms: f64) -> TileConfig {
        let extra = (entry_ms - self.entry_ms).max(0.0);
        TileConfig {
            costs: self
                .tile_ms
                .iter()
                .map(|&(s, t)| {
                    let cost = (t + s as f64 * extra) / entry_ms;
                    (s, cost.round().clamp(1.0, u32::MAX as f64) as u32)
                })
                .collect(),
        }
    }
}

/// The configurations worth measuring, best estimate first (see the module docs), at
/// most `limit`; each tile part adds `part_cost` (in scattered entries) to an estimate.
pub fn configurations(
    stats: &TileStats,
    calibrated: &TileConfig,
    part_cost: f64,
    within: f64,
    limit: usize,
) -> Vec<(TileConfig, Evaluation)> {
    let csr_cost = (stats.nnz + stats.rows) as f64;
    let mut seen: Vec<(TileConfig, Evaluation)> = Vec::new();
    let sides = &calibrated.costs;
    for mask in 1u32..(1 << sides.len()) {
        for scale in [0.5, 1.0, 2.0] {
            let costs: Vec<(usize, u32)> = sides
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, &(s, c))| (s, ((c as f64 * scale).round() as u32).max(1)))
                .collect();
            let mut e = stats.evaluate(&TileConfig {
                costs: costs.clone(),
            });
            if !e.uses_tiles() {
                continue;
            }
            // A level that holds no tile is left out: the same decomposition (its blocks
            // that would be tiles lie in tiles of a larger level, whose choice and cost
            // stay), one part fewer.
            e.tiles.retain(|t| t.1 > 0);
            let config = TileConfig {
                costs: costs
                    .into_iter()
                    .filter(|c| e.tiles.iter().any(|t| t.0 == c.0))
                    .collect(),
            };
            // Each tile part is a pass of its own.
            e.cost += part_cost * e.tiles.len() as f64;
            if seen
                .iter()
                .any(|(_, f)| f.tiles == e.tiles && f.rest == e.rest)
            {
                continue;
            }
            seen.push((config, e));
        }
    }
    let best = seen.iter().map(|s| s.1.cost).fold(csr_cost, f64::min);
    seen.retain(|s| s.1.cost <= within * best && s.1.cost < csr_cost);
    seen.sort_by(|a, b| a.1.cost.total_cmp(&b.1.cost));
    seen.truncate(limit);
    seen
}
