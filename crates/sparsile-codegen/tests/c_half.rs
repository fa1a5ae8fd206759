//! The C conversions between f32 and the bits of f16/bf16 elements, compiled and run
//! against the `half` crate: every f16 and bf16 bit pattern widened, and f32 values
//! (edge cases, every exponent, random bits) rounded to nearest even, f32 to f16 with
//! the compiler's `_Float16` and written by hand (`-DSPARSILE_SOFT_HALF`). NaNs only need
//! to stay NaNs.

mod common;

use common::build::*;
use common::harness::{compiler, Data, Kernel};
use half::{bf16, f16};
use rand::{Rng, SeedableRng};
use sparsile_codegen::emit_c;
use sparsile_ir::coord::BufferRole;
use sparsile_ir::DType;

/// `wide[i] = half[i]` and `narrow[i] = value[i]` for `i < n`, `half` and `narrow` of
/// `dtype`.
fn kernel(dtype: DType, cc: &str, extra: &[&str]) -> Kernel {
    let mut b = FuncBuilder::new("convert");
    let n = b.param("n");
    let half = b.values("half", dtype, p(n), BufferRole::Input);
    let wide = b.values("wide", DType::F32, p(n), BufferRole::Output);
    let value = b.values("value", DType::F32, p(n), BufferRole::Input);
    let narrow = b.values("narrow", dtype, p(n), BufferRole::Output);
    let i = b.index("i");
    let f = b.finish(vec![parallel(
        i,
        int(0),
        p(n),
        vec![
            store(wide, v(i), ld(half, v(i))),
            store(narrow, v(i), ld(value, v(i))),
        ],
    )]);
    Kernel::compile_with(cc, &emit_c(&f).unwrap(), extra)
}

fn values() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        65504.0,
        65519.99,
        65520.0,
        -65520.0,
        1e10,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        6.1035156e-5,
        5.9604645e-8,
        2.9802322e-8,
        2.9802326e-8,
        8.940697e-8,
        // 1 + one f16 unit, and the ties on either side of it.
        1.0 + 2f32.powi(-10),
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        3.3895314e38,
        f32::MAX,
    ];
    for e in -150..130 {
        for m in [1.0f32, 1.5, 1.000_488_3, 1.999_999_9] {
            v.push(m * 2f32.powi(e));
            v.push(-m * 2f32.powi(e));
        }
    }
    let mut g = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    v.extend((0..20000).map(|_| f32::from_bits(g.random())));
    v
}

fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

#[test]
fn conversions_match_the_half_crate() {
    let Some(cc) = compiler() else {
        return;
    };
    let vals = values();
    for extra in [&[][..], &["-DSPARSILE_SOFT_HALF"][..]] {
        for dtype in [DType::F16, DType::BF16] {
            let k = kernel(dtype, &cc, extra);
            let n = 65536usize.max(vals.len());
            let bits: Vec<u16> = (0..n).map(|i| (i % 65536) as u16).collect();
            let mut value = vals.clone();
            value.resize(n, 0.0);
            let mut buffers = vec![
                Data::U16(bits.clone()),
                Data::F32(vec![0.0; n]),
                Data::F32(value.clone()),
                Data::U16(vec![0; n]),
            ];
            k.run(&mut buffers, &[n as i64], 1000);
            let (Data::F32(wide), Data::U16(narrow)) = (&buffers[1], &buffers[3]) else {
                unreachable!()
            };
            for i in 0..n {
                let (want_wide, want_narrow) = match dtype {
                    DType::F16 => (
                        f16::from_bits(bits[i]).to_f32(),
                        f16::from_f32(value[i]).to_f32(),
                    ),
                    _ => (
                        bf16::from_bits(bits[i]).to_f32(),
                        bf16::from_f32(value[i]).to_f32(),
                    ),
                };
                assert!(
                    same(wide[i], want_wide),
                    "{dtype} {extra:?}: bits {:#06x} widened to {} (want {want_wide})",
                    bits[i],
                    wide[i]
                );
                let got_narrow = match dtype {
                    DType::F16 => f16::from_bits(narrow[i]).to_f32(),
                    _ => bf16::from_bits(narrow[i]).to_f32(),
                };
                assert!(
                    same(got_narrow, want_narrow),
                    "{dtype} {extra:?}: {:e} ({:#010x}) rounded to {got_narrow} (want {want_narrow})",
                    value[i],
                    value[i].to_bits()
                );
            }
        }
    }
}
