//! The data movement of decompositions: every rule's parts add up to the source (each
//! entry stored once, padding zero), parts have the documented layout, the text form of
//! rules round-trips, and the cache reuses a plan exactly while the pattern is the same.

use std::sync::Arc;

use proptest::prelude::*;
use sparsile_formats::decompose::{
    DecomposeCache, DecomposePlan, DecomposeRule, TileLevel, PADDING,
};
use sparsile_formats::{CooTensor, Format, SparseTensor};
use sparsile_ir::AxisKind;

fn random(m: usize, n: usize, keep: &[bool], values: &[f64]) -> CooTensor {
    let mut t = Vec::new();
    for i in 0..m {
        for j in 0..n {
            let e = i * n + j;
            if keep[e % keep.len()] && (i % 3 != 2) {
                t.push((i, j, values[e % values.len()]));
            }
        }
    }
    CooTensor::from_triplets(vec![m, n], &t).unwrap()
}

fn sum_of_parts(parts: &[SparseTensor<'static>], len: usize) -> Vec<f64> {
    parts.iter().fold(vec![0.0; len], |acc, p| {
        acc.iter()
            .zip(p.to_dense_f64())
            .map(|(a, b)| a + b)
            .collect()
    })
}

proptest! {
    #[test]
    fn hyb_parts_add_up_to_the_source(
        m in 1usize..12, n in 1usize..12, c in 1usize..4, k in 0u32..4,
        keep in prop::collection::vec(any::<bool>(), 1..40),
        values in prop::collection::vec(1i32..9, 1..40),
    ) {
        let values: Vec<f64> = values.iter().map(|&v| v as f64).collect();
        let a = SparseTensor::from_coo(&random(m, n, &keep, &values), &Format::Csr).unwrap();
        let rule = DecomposeRule::Hyb { c, k };
        let plan = DecomposePlan::new(&rule, &a.structure).unwrap();
        prop_assert_eq!(plan.parts.len(), rule.num_parts());
        let parts = plan.gather(&a.values);
        prop_assert_eq!(sum_of_parts(&parts, m * n), a.to_dense_f64());
        let stored: usize = plan.parts.iter().map(|p| p.gather.iter().filter(|&&g| g != PADDING).count()).sum();
        prop_assert_eq!(stored, a.values.len());
        for (p, part) in parts.iter().enumerate() {
            let w = 1usize << (p % (k as usize + 1));
            let axes = &part.structure.axes;
            prop_assert_eq!(axes[0].kind, AxisKind::SparseFixed);
            prop_assert!(!axes[0].unique);
            prop_assert_eq!(axes[1].nnz_per_parent, Some(w));
            prop_assert_eq!(part.values.len(), axes[0].npos * w);
            // Column partition q holds columns q * ceil(n / c) ..
            let q = p / (k as usize + 1);
            let width = n.div_ceil(c);
            let cols = axes[1].indices.as_ref().unwrap().to_usizes();
            prop_assert!(cols.iter().all(|&j| j == n || j / width == q));
        }
    }

    #[test]
    fn conversions_add_up_to_the_source(
        m in 1usize..10, n in 1usize..10, f in 0usize..5,
        keep in prop::collection::vec(any::<bool>(), 1..30),
    ) {
        let format = ["dbsr:2x2", "srbcrs:2x3", "ell", "bsr:3x2", "coo"][f];
        let a = SparseTensor::from_coo(&random(m, n, &keep, &[1.5, -2.0, 3.0]), &Format::Csr).unwrap();
        let rule = DecomposeRule::Convert { format: format.to_string() };
        let parts = DecomposePlan::new(&rule, &a.structure).unwrap().gather(&a.values);
        prop_assert_eq!(parts.len(), 1);
        prop_assert_eq!(parts[0].format(), &format.parse::<Format>().unwrap());
        prop_assert_eq!(parts[0].to_dense_f64(), a.to_dense_f64());
    }

    #[test]
    fn block_parts_add_up_to_the_source(
        m in 0usize..14, n in 1usize..14, r in 1usize..5, c in 1usize..5, fill in 1u32..101,
        keep in prop::collection::vec(any::<bool>(), 1..40),
    ) {
        let a = SparseTensor::from_coo(&random(m, n, &keep, &[1.5, -2.0, 3.0, 0.5]), &Format::Csr).unwrap();
        let rule = DecomposeRule::Blocks { r, c, fill };
        let plan = DecomposePlan::new(&rule, &a.structure).unwrap();
        let parts = plan.gather(&a.values);
        prop_assert_eq!(parts.len(), 2);
        prop_assert_eq!(parts[0].format(), &Format::Bsr { r, c });
        prop_assert_eq!(parts[1].format(), &Format::Csr);
        prop_assert_eq!(sum_of_parts(&parts, m * n), a.to_dense_f64());
        let stored: usize = plan.parts.iter().map(|p| p.gather.iter().filter(|&&g| g != PADDING).count()).sum();
        prop_assert_eq!(stored, a.values.len());
        // Every block of the tile part is full enough; no block of the rest is.
        let dense_a = a.to_dense_f64();
        let count = |bi: usize, bj: usize| {
            (bi * r..(bi * r + r).min(m))
                .flat_map(|i| (bj * c..(bj * c + c).min(n)).map(move |j| (i, j)))
                .filter(|&(i, j)| dense_a[i * n + j] != 0.0)
                .count()
        };
        let full = |bi, bj| count(bi, bj) * 100 >= fill as usize * r * c;
        let tiles = parts[0].to_dense_f64();
        let rest = parts[1].to_dense_f64();
        for i in 0..m {
            for j in 0..n {
                let e = i * n + j;
                if dense_a[e] != 0.0 {
                    let in_tile = full(i / r, j / c);
                    prop_assert_eq!(tiles[e] != 0.0, in_tile);
                    prop_assert_eq!(rest[e] != 0.0, !in_tile);
                }
            }
        }
    }
}

proptest! {
    #[test]
    fn tile_parts_add_up_to_the_source(
        m in 0usize..20, n in 1usize..20, costs in prop::collection::vec(1u32..20, 3),
        shape in 0usize..3,
        keep in prop::collection::vec(any::<bool>(), 1..60),
    ) {
        let a = SparseTensor::from_coo(&random(m, n, &keep, &[1.5, -2.0, 3.0, 0.5]), &Format::Csr).unwrap();
        let sides: &[(usize, usize)] = [&[(8, 8), (4, 4), (2, 2)][..], &[(6, 4), (3, 2), (1, 1)], &[(4, 8), (2, 8), (1, 4)]][shape];
        let levels: Vec<TileLevel> = sides.iter().zip(&costs).map(|(&(r, c), &cost)| TileLevel { r, c, cost }).collect();
        let rule = DecomposeRule::Tiles { levels: levels.clone() };
        let plan = DecomposePlan::new(&rule, &a.structure).unwrap();
        let parts = plan.gather(&a.values);
        prop_assert_eq!(parts.len(), levels.len() + 1);
        prop_assert_eq!(parts[0].format(), &Format::Csr);
        for (p, l) in parts[1..].iter().zip(&levels) {
            prop_assert_eq!(p.format(), &Format::Bsr { r: l.r, c: l.c });
        }
        prop_assert_eq!(sum_of_parts(&parts, m * n), a.to_dense_f64());
        let stored: usize = plan.parts.iter().map(|p| p.gather.iter().filter(|&&g| g != PADDING).count()).sum();
        prop_assert_eq!(stored, a.values.len());
        // Each stored value's coordinates: the source holds that value there.
        let coords = plan.source_coordinates(&a.structure).unwrap();
        let dense = a.to_dense_f64();
        let values = a.values.to_f64_vec();
        prop_assert_eq!(coords.len(), 2 * values.len());
        for (o, v) in values.iter().enumerate() {
            prop_assert_eq!(dense[coords[2 * o] * n + coords[2 * o + 1]], *v);
        }
    }

    #[test]
    fn one_level_of_tiles_is_the_blocks_rule(
        m in 0usize..16, n in 1usize..16, side in 1usize..5, fill in 1u32..101,
        keep in prop::collection::vec(any::<bool>(), 1..40),
    ) {
        let a = SparseTensor::from_coo(&random(m, n, &keep, &[1.0, -2.0]), &Format::Csr).unwrap();
        let cells = (side * side) as u32;
        let cost = (fill * cells).div_ceil(100);
        let tiles = DecomposeRule::Tiles { levels: vec![TileLevel { r: side, c: side, cost }] };
        let blocks = DecomposeRule::Blocks { r: side, c: side, fill };
        let t = DecomposePlan::new(&tiles, &a.structure).unwrap();
        let b = DecomposePlan::new(&blocks, &a.structure).unwrap();
        // The same parts, the rest first.
        prop_assert_eq!(&t.parts[0], &b.parts[1]);
        prop_assert_eq!(&t.parts[1], &b.parts[0]);
    }
}

/// Nested levels: a tile replaces its smaller tiles and entries when it costs no more,
/// and a block too sparse for its level still holds tiles of the next.
#[test]
fn nested_tiles_take_the_cheaper_choice() {
    // 8 x 8: the top-left 4 x 4 block full (16 entries), one entry at (4, 4), a 2 x 2
    // full block at (6, 0), one entry at (0, 7).
    let mut t = Vec::new();
    for i in 0..4 {
        for j in 0..4 {
            t.push((i, j, 1.0));
        }
    }
    t.extend([
        (4, 4, 1.0),
        (6, 0, 1.0),
        (6, 1, 1.0),
        (7, 0, 1.0),
        (7, 1, 1.0),
        (0, 7, 1.0),
    ]);
    let a = SparseTensor::from_coo(
        &CooTensor::from_triplets(vec![8, 8], &t).unwrap(),
        &Format::Csr,
    )
    .unwrap();
    let nnz_of = |p: &SparseTensor<'_>| p.to_dense_f64().iter().filter(|&&v| v != 0.0).count();
    let level = |r, cost| TileLevel { r, c: r, cost };
    // Parts: the rest, then 8 x 8, 4 x 4, 2 x 2. An 8 x 8 tile costs 30, more than its
    // contents (the full 4 x 4 block as a tile, 4; the full 2 x 2 block as a tile, 2;
    // the entries at (4, 4) and (0, 7), 1 each): none; the full blocks are tiles.
    let rule = DecomposeRule::Tiles {
        levels: vec![level(8, 30), level(4, 4), level(2, 2)],
    };
    let parts = DecomposePlan::new(&rule, &a.structure)
        .unwrap()
        .gather(&a.values);
    let counts: Vec<usize> = parts.iter().map(nnz_of).collect();
    assert_eq!(counts, vec![2, 0, 16, 4]);
    // An 8 x 8 tile of cost 8, no more than its contents' 4 + 2 + 1 + 1, takes all.
    let rule = DecomposeRule::Tiles {
        levels: vec![level(8, 8), level(4, 4), level(2, 2)],
    };
    let parts = DecomposePlan::new(&rule, &a.structure)
        .unwrap()
        .gather(&a.values);
    let counts: Vec<usize> = parts.iter().map(nnz_of).collect();
    assert_eq!(counts, vec![0, 22, 0, 0]);
}

#[test]
fn tile_rules_are_checked() {
    for (text, needle) in [
        ("tiles()", "three arguments a level"),
        ("tiles(8, 8)", "three arguments a level"),
        ("tiles(8, 8, 0)", "at least 1 entry"),
        ("tiles(8, 8, 4, 3, 3, 1)", "do not nest"),
        ("tiles(8, 8, 4, 8, 8, 1)", "do not nest"),
        ("tiles(8, 8, x)", "must be an integer"),
        ("tiles(512, 8, 4)", "each side must be from 1"),
    ] {
        let e = text.parse::<DecomposeRule>().unwrap_err().to_string();
        assert!(e.contains(needle), "{text}: {e}");
    }
}

#[test]
fn rules_round_trip_through_their_text_form() {
    for text in [
        "hyb(2, 3)",
        "convert(dbsr, 2, 2)",
        "convert(csr)",
        "convert(ell, 4)",
        "blocks(8, 8, 50)",
        "blocks(3, 16, 100)",
        "tiles(16, 16, 40, 8, 8, 12, 4, 4, 3)",
        "tiles(6, 4, 5, 3, 2, 1)",
    ] {
        let rule: DecomposeRule = text.parse().unwrap();
        assert_eq!(rule.to_string(), text);
        assert_eq!(DecomposeRule::from_spec(&rule.to_spec()).unwrap(), rule);
    }
    for bad in [
        "hyb(0, 1)",
        "hyb(1)",
        "hyb(1, 99)",
        "nope(1)",
        "convert(bsr, 0, 1)",
        "hyb",
        "blocks(8, 8)",
        "blocks(0, 8, 50)",
        "blocks(8, 8, 0)",
        "blocks(8, 8, 101)",
        "blocks(8, 999, 50)",
        "blocks(8, x, 50)",
    ] {
        assert!(bad.parse::<DecomposeRule>().is_err(), "{bad}");
    }
    let json = serde_json::to_string(&DecomposeRule::Hyb { c: 2, k: 3 }).unwrap();
    assert_eq!(json, r#"{"rule":"hyb","c":2,"k":3}"#);
}

#[test]
fn three_dimensional_hyb_buckets_rows_per_slice() {
    // Slice 0: row 0 of length 1; slice 1: row 1 of length 3, row 2 of length 2.
    let mut coo = CooTensor::empty(vec![2, 3, 4]);
    for (x, v) in [
        ([0, 0, 1], 1.0),
        ([1, 1, 0], 2.0),
        ([1, 1, 2], 3.0),
        ([1, 1, 3], 4.0),
        ([1, 2, 0], 5.0),
        ([1, 2, 1], 6.0),
    ] {
        coo.coords.extend(x);
        coo.values.push(v);
    }
    let a = SparseTensor::from_coo(&coo, &Format::Csf).unwrap();
    let plan = DecomposePlan::new(&DecomposeRule::Hyb { c: 1, k: 1 }, &a.structure).unwrap();
    let parts = plan.gather(&a.values);
    let rows = |p: usize| {
        parts[p].structure.axes[1]
            .indices
            .as_ref()
            .unwrap()
            .to_usizes()
    };
    let indptr = |p: usize| {
        parts[p].structure.axes[1]
            .indptr
            .as_ref()
            .unwrap()
            .to_usizes()
    };
    assert_eq!((rows(0), indptr(0)), (vec![0], vec![0, 1, 1]));
    // Row 1 (length 3) is split into two rows of width 2; row 2 fits one.
    assert_eq!((rows(1), indptr(1)), (vec![1, 1, 2], vec![0, 0, 3]));
    assert_eq!(
        parts[1].values.to_f64_vec(),
        vec![2.0, 3.0, 4.0, 0.0, 5.0, 6.0]
    );
    assert_eq!(sum_of_parts(&parts, 24), a.to_dense_f64());
}

#[test]
fn hyb_rejects_orders_other_than_two_and_three() {
    let x = SparseTensor::dense_from_f64(&[4], &[1.0; 4], sparsile_ir::DType::F64).unwrap();
    let e = DecomposePlan::new(&DecomposeRule::Hyb { c: 1, k: 1 }, &x.structure).unwrap_err();
    assert!(e.to_string().contains("order 1"), "{e}");
}

#[test]
fn the_cache_reuses_plans_only_for_the_same_pattern() {
    let cache = DecomposeCache::new();
    let rule = DecomposeRule::Hyb { c: 1, k: 2 };
    let a =
        SparseTensor::from_coo(&random(6, 5, &[true, false, true], &[1.0]), &Format::Csr).unwrap();
    let first = cache.plan(&rule, &a.structure).unwrap();
    // A view (new Arc, same arrays) and a copy (new arrays, same pattern) both hit.
    let view = a.view();
    assert!(Arc::ptr_eq(
        &first,
        &cache.plan(&rule, &view.structure).unwrap()
    ));
    let copy = a.clone().into_owned();
    assert!(Arc::ptr_eq(
        &first,
        &cache.plan(&rule, &copy.structure).unwrap()
    ));
    assert_eq!(cache.len(), 1);
    // Same sizes, another pattern: a new plan.
    let shifted: Vec<(usize, usize, f64)> = (0..6)
        .flat_map(|i| (0..5).map(move |j| (i, j)))
        .filter(|&(i, j)| a.to_dense_f64()[i * 5 + (j + 1) % 5] != 0.0)
        .map(|(i, j)| (i, j, 1.0))
        .collect();
    let b = SparseTensor::from_coo(
        &CooTensor::from_triplets(vec![6, 5], &shifted).unwrap(),
        &Format::Csr,
    )
    .unwrap();
    assert_ne!(a.to_dense_f64(), b.to_dense_f64());
    assert_eq!(a.values.len(), b.values.len());
    let other = cache.plan(&rule, &b.structure).unwrap();
    assert!(!Arc::ptr_eq(&first, &other));
    assert_eq!(other.gather(&b.values)[0].to_dense_f64().len(), 30);
    // Another rule: a new plan.
    cache
        .plan(&DecomposeRule::Hyb { c: 2, k: 2 }, &a.structure)
        .unwrap();
    assert_eq!(cache.len(), 3);
    cache.clear();
    assert!(cache.is_empty());
}

#[test]
fn the_cache_keeps_its_capacity_and_forgets_the_least_recently_used() {
    let cache = DecomposeCache::with_capacity(2);
    assert_eq!(cache.capacity(), 2);
    let rule = DecomposeRule::Hyb { c: 1, k: 2 };
    // Three patterns of the same sizes (one entry moved each time).
    let pattern = |col: usize| {
        let t = vec![(0, col, 1.0), (2, 4, 2.0), (3, 1, 3.0)];
        SparseTensor::from_coo(
            &CooTensor::from_triplets(vec![4, 5], &t).unwrap(),
            &Format::Csr,
        )
        .unwrap()
    };
    let (a, b, c) = (pattern(0), pattern(2), pattern(3));
    let pa = cache.plan(&rule, &a.structure).unwrap();
    let pb = cache.plan(&rule, &b.structure).unwrap();
    // `a` used again: `b` is now the least recently used, and `c` replaces it.
    assert!(Arc::ptr_eq(&pa, &cache.plan(&rule, &a.structure).unwrap()));
    cache.plan(&rule, &c.structure).unwrap();
    assert_eq!(cache.len(), 2);
    assert!(Arc::ptr_eq(&pa, &cache.plan(&rule, &a.structure).unwrap()));
    let pb_again = cache.plan(&rule, &b.structure).unwrap();
    assert!(
        !Arc::ptr_eq(&pb, &pb_again),
        "b was forgotten and planned again"
    );
    assert_eq!(cache.len(), 2);
    // The plan made again is the same plan.
    assert_eq!(
        pb.gather(&b.values)[0].to_dense_f64(),
        pb_again.gather(&b.values)[0].to_dense_f64()
    );
}
