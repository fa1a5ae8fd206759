//! What an [`AutoKernel`](super::AutoKernel) call's choice and compiled kernel depend on,
//! read cheaply from its inputs, so that a call like the one before it (a training loop,
//! an iterative solver) skips the choice and the kernel's look-up.
//!
//! A sparse input counts by the identity of its structure, which is immutable while it is
//! shared (see [`super::pattern`]): the key holds a `Weak` to it, which keeps the
//! allocation, so no other structure can take its address while the key lives. A
//! structure that borrows its arrays (its memory may change between calls) gives no key.
//! Every input also counts by its value type, and a dense one by its shape. Besides the
//! inputs: the thread count and the tuning generation (a tuning in this process makes
//! earlier choices stale).
//!
//! ```
//! use std::collections::HashMap;
//! use sparsile::auto::call_key::CallKey;
//! use sparsile::formats::{CooTensor, Format, SparseTensor};
//! use sparsile::ir::DType;
//! let a = CooTensor::from_triplets(vec![2, 2], &[(0, 1, 2.0)]).unwrap();
//! let a = SparseTensor::from_coo_with(&a, &Format::Csr, DType::F32).unwrap();
//! let x = SparseTensor::dense_from_f64(&[2], &[1.0, 1.0], DType::F32).unwrap();
//! let inputs = HashMap::from([("A".to_string(), a), ("x".to_string(), x)]);
//! let key = CallKey::of(&inputs, 2, 0).unwrap();
//! assert!(key.matches(&inputs, 2, 0));
//! assert!(!key.matches(&inputs, 1, 0));
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use sparsile_formats::{SparseTensor, Structure};
use sparsile_ir::DType;

/// One input as the key sees it.
#[derive(Debug)]
enum InputKey {
    /// A sparse input: its structure.
    Sparse(Weak<Structure<'static>>, DType),
    /// A dense input: its shape.
    Dense(Vec<usize>, DType),
}

/// The key of one call (see the module docs).
#[derive(Debug)]
pub struct CallKey {
    /// By input name, sorted.
    inputs: Vec<(String, InputKey)>,
    threads: usize,
    generation: u64,
}

fn is_sparse(t: &SparseTensor<'_>) -> bool {
    t.structure.axes.iter().any(|a| a.kind.is_sparse())
}

impl CallKey {
    /// The key of a call on `inputs` with `threads` threads in tuning generation
    /// `generation`; `None` when a sparse input borrows its arrays.
    pub fn of(
        inputs: &HashMap<String, SparseTensor<'_>>,
        threads: usize,
        generation: u64,
    ) -> Option<CallKey> {
        let mut keyed = Vec::with_capacity(inputs.len());
        for (name, t) in inputs {
            let key = if is_sparse(t) {
                let owned = super::pattern::as_owned(&t.structure)?;
                InputKey::Sparse(Arc::downgrade(&owned), t.dtype())
            } else {
                InputKey::Dense(t.shape().to_vec(), t.dtype())
            };
            keyed.push((name.clone(), key));
        }
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        Some(CallKey {
            inputs: keyed,
            threads,
            generation,
        })
    }

    /// Whether a call on `inputs` with `threads` threads in tuning generation
    /// `generation` has this key.
    pub fn matches(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        threads: usize,
        generation: u64,
    ) -> bool {
        self.threads == threads
            && self.generation == generation
            && self.inputs.len() == inputs.len()
            && self.inputs.iter().all(|(name, key)| {
                inputs.get(name).is_some_and(|t| match key {
                    // The `Weak` keeps the address, so an equal pointer is the same,
                    // live structure.
                    InputKey::Sparse(s, dtype) => {
                        t.dtype() == *dtype
                            && std::ptr::eq(
                                s.as_ptr().cast::<u8>(),
                                Arc::as_ptr(&t.structure).cast::<u8>(),
                            )
                    }
                    InputKey::Dense(shape, dtype) => {
                        t.dtype() == *dtype && !is_sparse(t) && t.shape() == shape.as_slice()
                    }
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use sparsile_formats::{CooTensor, Format, SparseTensor};
    use sparsile_ir::DType;

    use super::CallKey;

    fn matrix() -> SparseTensor<'static> {
        let a = CooTensor::from_triplets(vec![3, 2], &[(0, 1, 2.0), (2, 0, 1.0)]).unwrap();
        SparseTensor::from_coo_with(&a, &Format::Csr, DType::F32).unwrap()
    }

    fn dense(n: usize, dtype: DType) -> SparseTensor<'static> {
        SparseTensor::dense_from_f64(&[n, 4], &vec![1.0; n * 4], dtype).unwrap()
    }

    fn inputs<'a>(a: SparseTensor<'a>, x: SparseTensor<'a>) -> HashMap<String, SparseTensor<'a>> {
        HashMap::from([("A".to_string(), a), ("X".to_string(), x)])
    }

    #[test]
    fn the_same_structure_and_shapes_match_and_nothing_else_does() {
        let a = matrix();
        let first = inputs(a.clone(), dense(2, DType::F32));
        let key = CallKey::of(&first, 2, 7).unwrap();
        assert!(key.matches(&first, 2, 7));
        // Another tensor over the same structure, a new dense operand of the same shape.
        let again = inputs(
            SparseTensor {
                structure: Arc::clone(&a.structure),
                values: a.values.clone(),
            },
            dense(2, DType::F32),
        );
        assert!(key.matches(&again, 2, 7));
        assert!(!key.matches(&again, 1, 7), "another thread count");
        assert!(!key.matches(&again, 2, 8), "another tuning generation");
        // An equal structure that is another one, a dense operand of another shape or
        // type, another set of names.
        assert!(!key.matches(&inputs(matrix(), dense(2, DType::F32)), 2, 7));
        assert!(!key.matches(&inputs(a.clone(), dense(3, DType::F32)), 2, 7));
        assert!(!key.matches(&inputs(a.clone(), dense(2, DType::F64)), 2, 7));
        let mut renamed = again;
        let x = renamed.remove("X").unwrap();
        renamed.insert("Y".to_string(), x);
        assert!(!key.matches(&renamed, 2, 7));
    }

    /// The key's structure is dropped; the structures made after it, whose memory the
    /// allocator would hand out again if the key held a bare address, never match.
    #[test]
    fn a_dropped_structure_no_longer_matches() {
        let key = CallKey::of(&inputs(matrix(), dense(2, DType::F32)), 2, 0).unwrap();
        for _ in 0..200 {
            assert!(!key.matches(&inputs(matrix(), dense(2, DType::F32)), 2, 0));
        }
    }

    #[test]
    fn a_borrowed_structure_gives_no_key() {
        let a = matrix();
        let borrowed = SparseTensor {
            structure: Arc::new(a.structure.view()),
            values: a.values.view(),
        };
        assert!(CallKey::of(&inputs(borrowed, dense(2, DType::F32)), 2, 0).is_none());
    }
}
