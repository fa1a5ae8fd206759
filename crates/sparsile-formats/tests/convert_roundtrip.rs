//! Every format converts to every other and back to the same canonical COO; produced
//! structures satisfy their layout (re-validated with `from_parts`).

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{CooTensor, Format, SparseTensor};
use sparsile_ir::DType;

/// A random canonical matrix with small non-zero integer values (exact in every
/// dtype); optionally one row filled almost completely.
fn random_coo(shape: Vec<usize>, density: f64, long_row: bool, seed: u64) -> CooTensor {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let total: usize = shape.iter().product();
    let long = if long_row && shape[0] > 0 {
        Some(rng.random_range(0..shape[0]))
    } else {
        None
    };
    let inner: usize = shape[1..].iter().product();
    let mut coo = CooTensor::empty(shape.clone());
    for off in 0..total {
        let in_long = long == Some(off / inner.max(1));
        if rng.random_bool(if in_long { 0.9 } else { density }) {
            let mut rem = off;
            let mut c = vec![0; shape.len()];
            for (k, &d) in shape.iter().enumerate().rev() {
                c[k] = rem % d;
                rem /= d;
            }
            coo.coords.extend(c);
            let v: i32 = rng.random_range(1..=8) * if rng.random_bool(0.5) { 1 } else { -1 };
            coo.values.push(v as f64);
        }
    }
    coo
}

fn formats_2d(coo: &CooTensor) -> Vec<Format> {
    let mut longest = vec![0usize; coo.shape[0]];
    for e in 0..coo.nnz() {
        longest[coo.coord(e)[0]] += 1;
    }
    let k = longest.iter().copied().max().unwrap_or(0) + 1;
    [
        "dense",
        "csr",
        "csc",
        "coo",
        "dcsr",
        "bsr:1x1",
        "bsr:3x2",
        "bsr:4x4",
        "dbsr:3x2",
        "dbsr:2x5",
        "ell",
        "dia",
        "csf",
        "srbcrs:1x1",
        "srbcrs:4x2",
        "srbcrs:3x3",
        "ragged",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .chain(std::iter::once(Format::Ell { k: Some(k) }))
    .collect()
}

fn dense_of(coo: &CooTensor) -> Vec<f64> {
    let mut dense = vec![0.0; coo.shape.iter().product()];
    for e in 0..coo.nnz() {
        let off = coo
            .coord(e)
            .iter()
            .zip(&coo.shape)
            .fold(0, |o, (&c, &d)| o * d + c);
        dense[off] = coo.values[e];
    }
    dense
}

/// Builds `format`, checks it against its layout, its COO and dense forms.
fn build_and_check(coo: &CooTensor, format: &Format, dtype: DType) -> SparseTensor<'static> {
    let t = SparseTensor::from_coo_with(coo, format, dtype).unwrap();
    assert_eq!(t.dtype(), dtype);
    assert_eq!(t.format(), format);
    let again = SparseTensor::from_parts(
        format.clone(),
        &coo.shape,
        t.structure.axes.clone(),
        t.values.clone(),
    );
    assert!(again.is_ok(), "{format}: {:?}", again.unwrap_err());
    assert_eq!(t.to_coo().unwrap(), *coo, "{format}");
    assert_eq!(t.to_dense_f64(), dense_of(coo), "{format}");
    t
}

fn shape_2d() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        (0usize..3, 0usize..14).prop_map(|(m, n)| vec![m, n]),
        (0usize..14, 0usize..3).prop_map(|(m, n)| vec![m, n]),
        (1usize..14, 1usize..14).prop_map(|(m, n)| vec![m, n]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_2d_format_to_every_other(
        shape in shape_2d(),
        density in prop_oneof![Just(0.0), 0.05f64..0.5],
        long_row in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let coo = random_coo(shape, density, long_row, seed);
        let formats = formats_2d(&coo);
        for a in &formats {
            let t = build_and_check(&coo, a, DType::F64);
            for b in &formats {
                let u = t.convert(b).unwrap();
                prop_assert_eq!(u.format(), b);
                prop_assert_eq!(u.to_coo().unwrap(), coo.clone(), "{} -> {}", a, b);
            }
        }
    }

    #[test]
    fn order_3_round_trips(
        shape in (0usize..5, 0usize..5, 0usize..5).prop_map(|(a, b, c)| vec![a, b, c]),
        density in 0.0f64..0.6,
        seed in any::<u64>(),
    ) {
        let coo = random_coo(shape, density, false, seed);
        for a in [Format::Dense, Format::Coo, Format::Csf] {
            let t = build_and_check(&coo, &a, DType::F64);
            for b in [Format::Dense, Format::Coo, Format::Csf] {
                prop_assert_eq!(t.convert(&b).unwrap().to_coo().unwrap(), coo.clone());
            }
        }
    }

    #[test]
    fn every_value_type(
        shape in shape_2d(),
        density in 0.05f64..0.5,
        seed in any::<u64>(),
    ) {
        let coo = random_coo(shape, density, false, seed);
        for dtype in [DType::F16, DType::BF16, DType::F32, DType::F64] {
            for f in formats_2d(&coo) {
                let t = build_and_check(&coo, &f, dtype);
                prop_assert_eq!(t.convert(&Format::Csr).unwrap().dtype(), dtype);
            }
        }
    }
}

#[test]
fn order_1_and_order_4() {
    let one = random_coo(vec![9], 0.4, false, 7);
    for f in [Format::Dense, Format::Coo] {
        build_and_check(&one, &f, DType::F32);
    }
    let four = random_coo(vec![3, 2, 4, 3], 0.3, false, 8);
    for f in [Format::Dense, Format::Coo, Format::Csf] {
        build_and_check(&four, &f, DType::F64);
    }
}

#[test]
fn unsorted_input_is_canonicalised() {
    let coo = CooTensor {
        shape: vec![2, 3],
        coords: vec![1, 2, 0, 1],
        values: vec![1.0, 2.0],
    };
    let t = SparseTensor::from_coo(&coo, &Format::Csr).unwrap();
    assert_eq!(t.to_coo().unwrap().coords, vec![0, 1, 1, 2]);
}

#[test]
fn explicit_zeros_kept_by_unpadded_formats_only() {
    let coo = CooTensor::from_triplets(vec![2, 2], &[(0, 1, 0.0), (1, 0, 1.0)]).unwrap();
    for f in ["csr", "csc", "coo", "dcsr", "csf"] {
        let t = SparseTensor::from_coo(&coo, &f.parse().unwrap()).unwrap();
        assert_eq!(t.to_coo().unwrap(), coo, "{f}");
    }
    let kept = CooTensor::from_triplets(vec![2, 2], &[(1, 0, 1.0)]).unwrap();
    for f in ["dense", "bsr:2x2", "ell", "dia", "srbcrs:2x2", "ragged"] {
        let t = SparseTensor::from_coo(&coo, &f.parse().unwrap()).unwrap();
        assert_eq!(t.to_coo().unwrap(), kept, "{f}");
    }
}
