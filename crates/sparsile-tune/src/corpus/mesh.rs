//! `mesh`: adjacency matrices of irregular triangulated 2-D meshes.
//!
//! Points on an `nx × ny` grid; every grid cell is split into two triangles by one of its
//! diagonals, chosen at random, so an inner point has 4 to 8 neighbours (6 on average, as
//! in a Delaunay triangulation of random points; fewer on the boundary) and row lengths
//! vary unpredictably from one row to the next, unlike a stencil's. Members cycle through
//! three numberings of the points: `random` (a random symmetric permutation, as in meshes
//! numbered in the order their points were generated), `grid` (x fastest) and `patches`
//! (8 × 8 patches in random order, numbered within each patch: locality with random
//! jumps, as in meshes numbered by region); and, independently, with or without the
//! diagonal. Meshes have about 2,000 to 150,000 points at full scale, an aspect ratio up
//! to 4. The structure is symmetric.
//!
//! ```
//! use sparsile_formats::MatrixStats;
//! use sparsile_tune::corpus::{corpus, CorpusSpec};
//! let all = corpus(&CorpusSpec { seed: 3, scale: 0.05, per_family: 1 });
//! let m = all.iter().find(|m| m.family == "mesh").unwrap();
//! let s = MatrixStats::of(&m.coo).unwrap();
//! assert!(s.row_length_max <= 8);
//! assert_eq!(s.structurally_symmetric, Some(true));
//! ```

use super::{params, Gen, Member, Pattern};

const NUMBERINGS: [&str; 3] = ["random", "grid", "patches"];

/// The side of a patch of the `patches` numbering.
const PATCH: usize = 8;

pub(super) fn generate(k: usize, g: &mut Gen) -> Member {
    let numbering = NUMBERINGS[k % NUMBERINGS.len()];
    let diagonal = (k / NUMBERINGS.len()) % 2 == 1;
    let size = g.dim(2_000.0, 150_000.0) as f64;
    let aspect = g.uniform(1.0, 4.0);
    let nx = ((size * aspect).sqrt().round() as usize).max(2);
    let ny = ((size / nx as f64).round() as usize).max(2);
    let n = nx * ny;
    let number = numbering_of(numbering, nx, ny, g);
    let mut pat = Pattern::new(n, n);
    pat.keys.reserve(n * 7);
    let mut edge = |a: usize, b: usize| {
        pat.push(number[a], number[b]);
        pat.push(number[b], number[a]);
    };
    for y in 0..ny {
        for x in 0..nx {
            let p = x + nx * y;
            if x + 1 < nx {
                edge(p, p + 1);
            }
            if y + 1 < ny {
                edge(p, p + nx);
            }
            if x + 1 < nx && y + 1 < ny {
                // One diagonal of the cell whose lower-left corner is p.
                if g.below(2) == 0 {
                    edge(p, p + nx + 1);
                } else {
                    edge(p + 1, p + nx);
                }
            }
        }
    }
    if diagonal {
        for p in 0..n {
            pat.push(p, p);
        }
    }
    let params = params(&[
        ("grid", format!("{nx}x{ny}")),
        ("numbering", numbering.to_string()),
        ("diagonal", diagonal.to_string()),
    ]);
    let variant = if diagonal {
        format!("{numbering}-diag")
    } else {
        numbering.to_string()
    };
    Member {
        variant,
        params,
        coo: pat.finish(g),
    }
}

/// The number of each grid point (`x + nx * y`) under `numbering`.
fn numbering_of(numbering: &str, nx: usize, ny: usize, g: &mut Gen) -> Vec<usize> {
    let n = nx * ny;
    match numbering {
        "random" => g.permutation(n),
        "patches" => {
            let (px, py) = (nx.div_ceil(PATCH), ny.div_ceil(PATCH));
            let order = g.permutation(px * py);
            let mut number = vec![0; n];
            let mut next = 0;
            for &patch in &order {
                let (bx, by) = (patch % px, patch / px);
                for y in by * PATCH..((by + 1) * PATCH).min(ny) {
                    for x in bx * PATCH..((bx + 1) * PATCH).min(nx) {
                        number[x + nx * y] = next;
                        next += 1;
                    }
                }
            }
            number
        }
        _ => (0..n).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn gen(seed: u64) -> Gen {
        Gen {
            rng: ChaCha8Rng::seed_from_u64(seed),
            scale: 0.05,
        }
    }

    #[test]
    fn every_numbering_is_a_permutation() {
        for numbering in NUMBERINGS {
            for (nx, ny) in [(2, 2), (9, 17), (16, 8), (23, 5)] {
                let mut seen = numbering_of(numbering, nx, ny, &mut gen(7));
                seen.sort_unstable();
                assert_eq!(
                    seen,
                    (0..nx * ny).collect::<Vec<_>>(),
                    "{numbering} {nx}x{ny}"
                );
            }
        }
    }

    #[test]
    fn every_point_has_two_to_eight_neighbours_six_on_average() {
        for k in 0..6 {
            let m = generate(k, &mut gen(k as u64));
            let rows = m.coo.shape[0];
            let mut len = vec![0usize; rows];
            for e in 0..m.coo.nnz() {
                let (i, j) = (m.coo.coord(e)[0], m.coo.coord(e)[1]);
                if i != j {
                    len[i] += 1;
                }
            }
            assert!(len.iter().all(|&l| (2..=8).contains(&l)), "{}", m.variant);
            let mean = len.iter().sum::<usize>() as f64 / rows as f64;
            assert!((5.0..6.1).contains(&mean), "{} mean {mean}", m.variant);
            assert_eq!(m.variant.ends_with("-diag"), k % 6 >= 3);
        }
    }
}
