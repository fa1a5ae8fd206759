//! `stencil`: matrices of stencil operators on regular meshes.
//!
//! Grid point `p` (numbered x fastest) couples to its neighbours under a 2-D 5-point,
//! 2-D 9-point, 3-D 7-point or 3-D 27-point stencil (fewer at the boundary). Members
//! cycle through the four stencils and, independently, through no permutation, one
//! random symmetric permutation (`P A P^T`, the structure stays symmetric) and
//! independent random row and column permutations. Grids have about 2,000 to 150,000
//! points at full scale (27-point ones at most [`MAX_NNZ`] / 27), 2-D grids an aspect
//! ratio up to 4.
//!
//! ```
//! use sparsile_formats::MatrixStats;
//! use sparsile_tune::corpus::{corpus, CorpusSpec};
//! let all = corpus(&CorpusSpec { seed: 3, scale: 0.05, per_family: 1 });
//! let m = all.iter().find(|m| m.family == "stencil").unwrap();
//! let s = MatrixStats::of(&m.coo).unwrap();
//! assert_eq!(s.row_length_max, 5);
//! assert_eq!(s.structurally_symmetric, Some(true));
//! ```

use super::{params, Gen, Member, Pattern, MAX_NNZ};

/// (name, dimensions, points).
const STENCILS: [(&str, usize, usize); 4] =
    [("2d5", 2, 5), ("2d9", 2, 9), ("3d7", 3, 7), ("3d27", 3, 27)];
const PERMUTATIONS: [&str; 3] = ["none", "sym", "rowcol"];

pub(super) fn generate(k: usize, g: &mut Gen) -> Member {
    let (stencil, dims, points) = STENCILS[k % STENCILS.len()];
    let permutation = PERMUTATIONS[k % PERMUTATIONS.len()];
    let most = 0.95 * (MAX_NNZ / points) as f64;
    let size = (g.dim(2_000.0, 150_000f64.min(most)) as f64).min(most);
    let (nx, ny, nz) = if dims == 2 {
        let aspect = g.uniform(1.0, 4.0);
        let nx = ((size * aspect).sqrt().round() as usize).max(2);
        let ny = ((size / nx as f64).round() as usize).max(2);
        (nx, ny, 1)
    } else {
        let side = size.cbrt();
        let nx = ((side * g.uniform(1.0, 2.0)).round() as usize).max(2);
        let ny = (side.round() as usize).max(2);
        let nz = ((size / (nx * ny) as f64).round() as usize).max(2);
        (nx, ny, nz)
    };
    let n = nx * ny * nz;
    let offsets = offsets(stencil);
    let row_perm: Vec<usize> = match permutation {
        "none" => (0..n).collect(),
        _ => g.permutation(n),
    };
    let col_perm = match permutation {
        "rowcol" => g.permutation(n),
        _ => row_perm.clone(),
    };
    let mut pat = Pattern::new(n, n);
    pat.keys.reserve(n * points);
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let p = x + nx * (y + ny * z);
                for &(dx, dy, dz) in &offsets {
                    let (Some(qx), Some(qy), Some(qz)) = (
                        x.checked_add_signed(dx).filter(|&v| v < nx),
                        y.checked_add_signed(dy).filter(|&v| v < ny),
                        z.checked_add_signed(dz).filter(|&v| v < nz),
                    ) else {
                        continue;
                    };
                    pat.push(row_perm[p], col_perm[qx + nx * (qy + ny * qz)]);
                }
            }
        }
    }
    let grid = if dims == 2 {
        format!("{nx}x{ny}")
    } else {
        format!("{nx}x{ny}x{nz}")
    };
    let params = params(&[
        ("stencil", stencil.to_string()),
        ("grid", grid),
        ("permutation", permutation.to_string()),
    ]);
    Member {
        variant: format!("{stencil}-{permutation}"),
        params,
        coo: pat.finish(g),
    }
}

/// The neighbour offsets of a stencil, the centre included.
fn offsets(stencil: &str) -> Vec<(isize, isize, isize)> {
    let mut out = Vec::new();
    let zs: &[isize] = if stencil.starts_with("3d") {
        &[-1, 0, 1]
    } else {
        &[0]
    };
    for &dz in zs {
        for dy in -1isize..=1 {
            for dx in -1isize..=1 {
                let nonzero = [dx, dy, dz].iter().filter(|&&d| d != 0).count();
                let keep = match stencil {
                    "2d5" | "3d7" => nonzero <= 1,
                    _ => true,
                };
                if keep {
                    out.push((dx, dy, dz));
                }
            }
        }
    }
    out
}
