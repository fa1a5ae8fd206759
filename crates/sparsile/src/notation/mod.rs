//! The index notation front end: text -> tokens -> syntax tree -> checked program ->
//! stage-I program.
//!
//! ```text
//! # comments
//! tensor A: f32[m, n] csr      # name: dtype[dims] format (default dense)
//! tensor B: f32[n, k]
//! tensor C: f32[m, k]
//! C[i,k] = A[i,j] * B[j,k]     # indices only on the right are summed
//! ```
//! Expressions: `+ - * /`, unary minus, `exp relu sqrt neg abs log`, `max(a, b)`,
//! `min(a, b)`, integer and floating-point constants, parentheses. Statements run in
//! order (later ones may read earlier outputs); `+=` accumulates into an output assigned
//! before. An index may be an integer tensor read (`X[idx[i], k]`; on the left,
//! `Y[out[p], k] = ...` scatters: colliding writes add up, writes out of range are
//! skipped). Each term of a sum is summed over its own indices not on the left.
//! Assigned tensors are outputs, the others inputs. Operands of one operation have one
//! element type, the output's, except that f16/bf16 values may be assigned to f32 or f64
//! outputs (`tensor C: f32[m, k]` with f16 `A` and `B`: mixed precision).
//!
//! `M[i] max= e` / `M[i] min= e` keep the largest / smallest value of `e` over its indices
//! not on the left, instead of the sum (the right-hand side is one term). The values
//! range over the stored entries of the operand that drives the iteration: a sparse
//! factor of the product, else the first sparse operand read with plain indices, else
//! the dense index space; stored explicit zeros (BSR block fill, ELL padding) count. The
//! output starts at the identity, `-inf` for `max=` and `inf` for `min=`, so an element
//! no entry reaches (an empty row) keeps it. NaN values are skipped (`fmax`/`fmin`
//! semantics), so only NaN values also give the identity. The output must be dense with
//! a floating-point type ([`NotationError::UnsupportedReduction`]).
//!
//! A tensor declared with no dimensions, `tensor s: f64[]`, is a dense scalar: assigned
//! as `s = ...` or `s[] = ...` (also `+=`, `max=`, `min=`), read as `s[]`.
//!
//! ```
//! use sparsile::notation::compile_notation;
//! let program = compile_notation("\
//! tensor A: f32[m, n] csr
//! tensor B: f32[n, k]
//! tensor C: f32[m, k]
//! C[i,k] = A[i,j] * B[j,k]
//! ").unwrap();
//! assert_eq!(program.body.len(), 1);
//! let err = compile_notation("tensor A: f32[m] csr\n").unwrap_err();
//! assert_eq!((err.span().line, err.span().col), (1, 18));
//! ```

pub mod ast;
mod declare;
pub mod error;
pub mod infer;
pub mod lexer;
mod lower;
pub mod parser;
mod pattern;
pub mod typecheck;

pub use error::NotationError;
pub use lower::{compile_notation, lower, lower_checked};
pub use parser::parse;
pub use typecheck::{check, Checked, CheckedStatement};
