//! Garbage user arrays give errors, never panics; whatever is accepted can be read.

use std::borrow::Cow;

use proptest::prelude::*;
use sparsile_formats::{
    AxisStorage, CheckOptions, CooTensor, Format, IndexArray, SparseTensor, Values,
};
use sparsile_ir::AxisKind;

fn index_value() -> impl Strategy<Value = i64> {
    prop_oneof![8 => -2i64..9, 1 => any::<i64>(), 1 => Just(i32::MAX as i64)]
}

fn index_array() -> impl Strategy<Value = IndexArray<'static>> {
    (prop::collection::vec(index_value(), 0..10), any::<bool>()).prop_map(|(v, wide)| {
        if wide {
            IndexArray::I64(Cow::Owned(v))
        } else {
            IndexArray::I32(Cow::Owned(v.into_iter().map(|x| x as i32).collect()))
        }
    })
}

fn values() -> impl Strategy<Value = Values<'static>> {
    prop::collection::vec(-3.0f64..3.0, 0..14).prop_map(|v| Values::F64(Cow::Owned(v)))
}

fn options() -> impl Strategy<Value = CheckOptions> {
    (any::<bool>(), any::<bool>()).prop_map(|(sort_indices, sum_duplicates)| CheckOptions {
        sort_indices,
        sum_duplicates,
    })
}

/// Reads an accepted tensor every way there is.
fn exercise(t: &SparseTensor<'_>) {
    let coo = t.to_coo().unwrap();
    assert!(coo.nnz() <= t.nnz_stored());
    let dense = t.to_dense_f64();
    assert_eq!(dense.len(), t.shape().iter().product::<usize>());
    let back = t.convert(&Format::Coo).unwrap();
    assert_eq!(back.to_coo().unwrap(), coo);
}

fn formats() -> Vec<Format> {
    [
        "dense",
        "csr",
        "csc",
        "coo",
        "dcsr",
        "bsr:2x2",
        "dbsr:1x3",
        "ell",
        "ell:2",
        "dia",
        "csf",
        "srbcrs:2x2",
        "ragged",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect()
}

/// One random change to the axes, values or shape of a valid tensor.
#[derive(Debug, Clone)]
enum Mutation {
    Kind(usize, u8),
    Parent(usize, Option<usize>),
    Length(usize, usize),
    Npos(usize, usize),
    Per(usize, Option<usize>),
    Unique(usize),
    Indptr(usize, Option<IndexArray<'static>>),
    Indices(usize, Option<IndexArray<'static>>),
    Values(Values<'static>),
    Shape(usize, usize),
    DropAxis(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let axis = 0usize..5;
    prop_oneof![
        (axis.clone(), 0u8..4).prop_map(|(a, k)| Mutation::Kind(a, k)),
        (axis.clone(), prop::option::of(0usize..5)).prop_map(|(a, p)| Mutation::Parent(a, p)),
        (axis.clone(), 0usize..9).prop_map(|(a, l)| Mutation::Length(a, l)),
        (axis.clone(), 0usize..20).prop_map(|(a, l)| Mutation::Npos(a, l)),
        (axis.clone(), prop::option::of(0usize..5)).prop_map(|(a, p)| Mutation::Per(a, p)),
        axis.clone().prop_map(Mutation::Unique),
        (axis.clone(), prop::option::of(index_array())).prop_map(|(a, x)| Mutation::Indptr(a, x)),
        (axis.clone(), prop::option::of(index_array())).prop_map(|(a, x)| Mutation::Indices(a, x)),
        values().prop_map(Mutation::Values),
        (0usize..3, 0usize..9).prop_map(|(d, s)| Mutation::Shape(d, s)),
        axis.prop_map(Mutation::DropAxis),
    ]
}

fn apply(
    m: &Mutation,
    shape: &mut [usize],
    axes: &mut Vec<AxisStorage<'static>>,
    vals: &mut Values<'static>,
) {
    let n = axes.len();
    if n == 0 {
        return;
    }
    let kinds = [
        AxisKind::DenseFixed,
        AxisKind::DenseVariable,
        AxisKind::SparseFixed,
        AxisKind::SparseVariable,
    ];
    match m.clone() {
        Mutation::Kind(a, k) => axes[a % n].kind = kinds[k as usize],
        Mutation::Parent(a, p) => axes[a % n].parent = p,
        Mutation::Length(a, l) => axes[a % n].length = l,
        Mutation::Npos(a, l) => axes[a % n].npos = l,
        Mutation::Per(a, p) => axes[a % n].nnz_per_parent = p,
        Mutation::Unique(a) => axes[a % n].unique ^= true,
        Mutation::Indptr(a, x) => axes[a % n].indptr = x,
        Mutation::Indices(a, x) => axes[a % n].indices = x,
        Mutation::Values(v) => *vals = v,
        Mutation::Shape(d, s) => {
            if let Some(x) = shape.get_mut(d) {
                *x = s;
            }
        }
        Mutation::DropAxis(a) => {
            axes.remove(a % n);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn compressed_garbage_never_panics(
        m in 0usize..6, n in 0usize..6, r in 0usize..3, c in 0usize..3,
        indptr in index_array(), indices in index_array(), vals in values(), opts in options(),
        which in 0u8..3,
    ) {
        let result = match which {
            0 => SparseTensor::from_csr([m, n], indptr, indices, vals, opts),
            1 => SparseTensor::from_csc([m, n], indptr, indices, vals, opts),
            _ => SparseTensor::from_bsr([m, n], (r, c), indptr, indices, vals, opts),
        };
        if let Ok(t) = result {
            exercise(&t);
        }
    }

    #[test]
    fn near_valid_compressed_never_panics(
        rows in prop::collection::vec(prop::collection::vec(-1i64..6, 0..4), 0..5),
        n in 0usize..6, vals in values(), opts in options(),
    ) {
        let mut indptr = vec![0i64];
        let mut indices = vec![];
        for row in &rows {
            indices.extend_from_slice(row);
            indptr.push(indices.len() as i64);
        }
        let nnz = indices.len();
        let v = vals.to_f64_vec();
        let vals = if v.len() >= nnz {
            Values::F64(Cow::Owned(v[..nnz].to_vec()))
        } else {
            vals
        };
        let result = SparseTensor::from_csr(
            [rows.len(), n],
            IndexArray::I64(Cow::Owned(indptr)),
            IndexArray::I64(Cow::Owned(indices)),
            vals,
            opts,
        );
        if let Ok(t) = result {
            exercise(&t);
        }
    }

    #[test]
    fn coo_garbage_never_panics(
        shape in prop::collection::vec(0usize..5, 0..4),
        coords in prop::collection::vec(index_array(), 0..4),
        vals in values(), opts in options(),
    ) {
        if let Ok(t) = SparseTensor::from_coo_arrays(&shape, coords, vals, opts) {
            exercise(&t);
        }
    }

    #[test]
    fn near_valid_coo_never_panics(
        shape in prop::collection::vec(0usize..5, 1..4),
        raw in prop::collection::vec(prop::collection::vec(-1i64..5, 4), 0..7),
        wide in any::<bool>(), opts in options(),
    ) {
        let coords = (0..shape.len())
            .map(|d| {
                let column: Vec<i64> = raw.iter().map(|e| e[d]).collect();
                if wide {
                    IndexArray::I64(Cow::Owned(column))
                } else {
                    IndexArray::I32(Cow::Owned(column.iter().map(|&x| x as i32).collect()))
                }
            })
            .collect();
        let vals = Values::F32(Cow::Owned((0..raw.len()).map(|v| v as f32 + 1.0).collect()));
        if let Ok(t) = SparseTensor::from_coo_arrays(&shape, coords, vals, opts) {
            exercise(&t);
        }
    }

    #[test]
    fn mutated_structures_never_panic(
        format in prop::sample::select(formats()),
        shape in (0usize..6, 0usize..6),
        entries in prop::collection::vec((0usize..6, 0usize..6, 1i32..5), 0..12),
        mutations in prop::collection::vec(mutation(), 0..3),
    ) {
        let shape = vec![shape.0, shape.1];
        let triplets: Vec<_> = entries
            .iter()
            .filter(|e| e.0 < shape[0] && e.1 < shape[1])
            .map(|e| (e.0, e.1, e.2 as f64))
            .collect();
        let mut coo = CooTensor {
            shape: shape.clone(),
            coords: triplets.iter().flat_map(|t| [t.0, t.1]).collect(),
            values: triplets.iter().map(|t| t.2).collect(),
        };
        coo.sort_and_sum_duplicates();
        let Ok(t) = SparseTensor::from_coo(&coo, &format) else {
            // Only ELL with a fixed width may refuse a valid matrix.
            let fixed_width = matches!(format, Format::Ell { k: Some(_) });
            prop_assert!(fixed_width, "{} refused a valid matrix", format);
            return Ok(());
        };
        let (mut shape, mut axes, mut vals) = (shape, t.structure.axes.clone(), t.values.clone());
        for m in &mutations {
            apply(m, &mut shape, &mut axes, &mut vals);
        }
        let unchanged = mutations.is_empty();
        match SparseTensor::from_parts(format.clone(), &shape, axes, vals) {
            Ok(u) => {
                exercise(&u);
                if unchanged {
                    prop_assert_eq!(u.to_coo().unwrap(), coo);
                }
            }
            Err(e) => prop_assert!(!unchanged, "{}: {}", format, e),
        }
    }
}

/// The per-run check the descent count in `runs_increasing` stands for.
fn naive_runs_increasing(indptr: &[i64], indices: &[i64], strict: bool) -> bool {
    indptr.windows(2).all(|w| {
        indices[w[0] as usize..w[1] as usize].windows(2).all(|x| {
            if strict {
                x[0] < x[1]
            } else {
                x[0] <= x[1]
            }
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// Runs of random lengths (empty ones included) over small indices, so that ties,
    /// descents inside runs and descents at run starts all occur.
    #[test]
    fn runs_increasing_matches_the_per_run_check(
        lengths in prop::collection::vec(0usize..5, 0..12),
        values in prop::collection::vec(0i64..6, 60),
        strict in any::<bool>(),
    ) {
        let mut indptr = vec![0i64];
        for l in &lengths {
            indptr.push(indptr.last().unwrap() + *l as i64);
        }
        let indices = values[..*indptr.last().unwrap() as usize].to_vec();
        prop_assert_eq!(
            sparsile_formats::validate::runs_increasing(&indptr, &indices, strict),
            naive_runs_increasing(&indptr, &indices, strict)
        );
    }
}
