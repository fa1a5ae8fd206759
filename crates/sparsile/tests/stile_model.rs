//! The STile strategy's tile model against the decomposition it stands for: for random
//! matrices (empty rows, a dense row, sizes no side divides) and random configurations,
//! the tiles per level and the entries left over that `TileStats::evaluate` predicts
//! are those of the `tiles(…)` rule's parts; the configurations the search keeps use
//! tiles, differ, and name a `tiles` recipe whose parts are that decomposition.

use proptest::prelude::*;
use sparsile::formats::decompose::DecomposePlan;
use sparsile::formats::{CooTensor, Format, SparseTensor};
use sparsile::tune::features::Csr;
use sparsile::tune::stile::{configurations, TileConfig, TileStats, SIDES};

/// Rows of random density with dense square patches, an empty row and a dense row.
fn matrix(m: usize, n: usize, seed: &[u8]) -> (Vec<i64>, Vec<i64>) {
    let mut indptr = vec![0i64];
    let mut indices = Vec::new();
    for i in 0..m {
        for j in 0..n {
            let s = seed[(i * 7 + j * 3) % seed.len()] as usize;
            let patch = (i / 8 + j / 8).is_multiple_of(3) && !s.is_multiple_of(4);
            let keep = i != 2 && (i == m / 2 || patch || s.is_multiple_of(17));
            if keep {
                indices.push(j as i64);
            }
        }
        indptr.push(indices.len() as i64);
    }
    (indptr, indices)
}

fn tensor(m: usize, n: usize, indptr: &[i64], indices: &[i64]) -> SparseTensor<'static> {
    let mut t = Vec::new();
    for i in 0..m {
        for p in indptr[i]..indptr[i + 1] {
            t.push((i, indices[p as usize] as usize, 1.0 + p as f64));
        }
    }
    SparseTensor::from_coo(
        &CooTensor::from_triplets(vec![m, n], &t).unwrap(),
        &Format::Csr,
    )
    .unwrap()
}

/// Blocks per tile part and entries of the rest, from the rule's parts.
fn parts_of(a: &SparseTensor<'_>, config: &TileConfig) -> (Vec<(usize, usize)>, usize) {
    let plan = DecomposePlan::new(&config.rule(), &a.structure).unwrap();
    let rest = plan.parts[0].gather.len();
    let tiles = config
        .costs
        .iter()
        .zip(&plan.parts[1..])
        .map(|(&(side, _), p)| (side, p.gather.len() / (side * side)))
        .collect();
    (tiles, rest)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn the_model_predicts_the_rules_parts(
        m in 0usize..70, n in 1usize..70,
        seed in prop::collection::vec(any::<u8>(), 1..50),
        mask in 1u32..16, costs in prop::collection::vec(1u32..300, 4),
    ) {
        let (indptr, indices) = matrix(m, n, &seed);
        let a = tensor(m, n, &indptr, &indices);
        let stats = TileStats::of(&Csr { rows: m, cols: n, indptr: &indptr, indices: &indices });
        let config = TileConfig {
            costs: SIDES.iter().zip(&costs).enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, (&s, &c))| (s, c))
                .collect(),
        };
        let e = stats.evaluate(&config);
        let (tiles, rest) = parts_of(&a, &config);
        prop_assert_eq!(&e.tiles, &tiles);
        prop_assert_eq!(e.rest, rest);
        // The kept configurations: each uses tiles, all differ, each level holds tiles.
        let base = TileConfig { costs: SIDES.iter().map(|&s| (s, (s * s / 4) as u32)).collect() };
        let kept = configurations(&stats, &base, 40.0, 1.2, 6);
        for (i, (c, e)) in kept.iter().enumerate() {
            prop_assert!(e.tiles.iter().all(|t| t.1 > 0), "{:?}", e);
            prop_assert_eq!(parts_of(&a, c), (e.tiles.clone(), e.rest));
            prop_assert!(c.recipe().starts_with("tiles:"));
            for (d, f) in &kept[..i] {
                prop_assert!(d != c && (f.tiles.clone(), f.rest) != (e.tiles.clone(), e.rest));
            }
        }
    }
}

#[test]
fn a_configuration_is_a_recipe() {
    let c = TileConfig {
        costs: vec![(16, 40), (4, 3)],
    };
    assert_eq!(c.recipe(), "tiles:t16=40,t8=0,t4=3");
    let c = TileConfig {
        costs: vec![(8, 12)],
    };
    assert_eq!(c.recipe(), "tiles:t8=12");
}

/// On a matrix with dense patches the search keeps decompositions (so the property
/// above checks some), each dropping its empty levels and matching the rule's parts.
#[test]
fn patches_keep_decompositions_that_match_the_rule() {
    let (m, n) = (64, 64);
    let seed: Vec<u8> = (0..37u8)
        .map(|x| x.wrapping_mul(29).wrapping_add(5))
        .collect();
    let (indptr, indices) = matrix(m, n, &seed);
    let a = tensor(m, n, &indptr, &indices);
    let stats = TileStats::of(&Csr {
        rows: m,
        cols: n,
        indptr: &indptr,
        indices: &indices,
    });
    let base = TileConfig {
        costs: SIDES.iter().map(|&s| (s, (s * s / 4) as u32)).collect(),
    };
    let kept = configurations(&stats, &base, 40.0, 1.2, 6);
    assert!(!kept.is_empty());
    for (c, e) in &kept {
        assert!(e.cost < (stats.nnz + stats.rows) as f64, "{e:?}");
        assert_eq!(c.costs.len(), e.tiles.len(), "{c:?} {e:?}");
        assert_eq!(parts_of(&a, c), (e.tiles.clone(), e.rest));
    }
}
