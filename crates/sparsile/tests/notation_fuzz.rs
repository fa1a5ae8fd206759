//! Malformed and mutated programs never panic the front end, and whatever it accepts
//! lowers to a program the stage-I verifier accepts.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile::compile_notation;
use sparsile_ir::coord::verify;

const SEEDS: &[&str] = &[
    "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n",
    "tensor A: f32[m, n] bsr:2x2\ntensor X: f32[m, k]\ntensor Y: f32[k, n]\ntensor C: f32[m, n] bsr:2x2\nC[i,j] = A[i,j] * X[i,k] * Y[k,j]\n",
    "tensor A: f32[m, n] csr\ntensor B: f32[m, n] csr\ntensor C: f32[m, n] csr\nC[i,j] = A[i,j] + B[i,j]\nC[i,j] += -A[i,j] * 2\n",
    "tensor X: f32[p, c]\ntensor im: i32[r, q]\ntensor om: i32[r, q]\ntensor Y: f32[o, c]\nY[om[r2,q2], k] = X[im[r2,q2], k]\nY[om[r2,q2], k] += X[im[r2,q2], k] * 2\n",
    "tensor X: f32[p, c]\ntensor nbr: i32[o, r]\ntensor W: f32[r, c, l]\ntensor Y: f32[o, l]\nY[q,t] = X[nbr[q,s], d] * W[s,d,t]\n",
    "tensor B: f32[m, n, o] csf\ntensor c: f32[o]\ntensor Y: f32[m, n]\ntensor D: f32[m, n] dia\nY[i,j] = D[i,j] * max(B[i,j,k] * c[k], 1.5e0) / (2)\n",
];

const PIECES: &[&str] = &[
    "tensor ",
    "A",
    "B",
    "C",
    "x",
    "i",
    "j",
    "k",
    "m",
    "n",
    "[",
    "]",
    ",",
    ":",
    "=",
    "+=",
    "+",
    "-",
    "*",
    "/",
    "(",
    ")",
    "\n",
    "f32",
    "i32",
    "csr",
    "coo",
    "ell",
    "dia",
    "csf",
    "bsr:2x2",
    "exp(",
    "max(",
    "relu(",
    "2",
    "0.5",
    "#",
    " ",
    "idx[",
    "srbcrs:2x2",
    "0",
    "-1",
];

fn mutate(rng: &mut ChaCha8Rng, text: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..rng.random_range(1..4) {
        let at = rng.random_range(0..=chars.len());
        match rng.random_range(0..3) {
            0 if at < chars.len() => {
                chars.remove(at);
            }
            1 => {
                let piece = PIECES[rng.random_range(0..PIECES.len())];
                for (k, c) in piece.chars().enumerate() {
                    chars.insert(at + k, c);
                }
            }
            _ if at < chars.len() => {
                let other = rng.random_range(0..chars.len());
                chars.swap(at, other);
            }
            _ => {}
        }
    }
    chars.into_iter().collect()
}

fn accept_or_error(text: &str) -> bool {
    match compile_notation(text) {
        Ok(p) => {
            if let Err(errors) = verify(&p) {
                panic!("accepted but does not verify: {errors:?}\n{text}\n{p}");
            }
            true
        }
        Err(e) => {
            let span = e.span();
            assert!(span.line >= 1 && span.col >= 1, "{e}");
            assert!(span.start <= text.len(), "{e}");
            false
        }
    }
}

#[test]
fn mutated_programs_are_rejected_cleanly_or_verify() {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut accepted = 0;
    for seed in SEEDS {
        assert!(accept_or_error(seed), "seed program rejected:\n{seed}");
        for _ in 0..400 {
            accepted += usize::from(accept_or_error(&mutate(&mut rng, seed)));
        }
    }
    assert!(
        accepted > 50,
        "too few mutants accepted ({accepted}) to exercise lowering"
    );
}

#[test]
fn random_token_soup_never_panics() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for _ in 0..2000 {
        let n = rng.random_range(0..40);
        let text: String = (0..n)
            .map(|_| PIECES[rng.random_range(0..PIECES.len())])
            .collect();
        accept_or_error(&text);
    }
}
