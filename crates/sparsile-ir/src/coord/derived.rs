//! Derived buffers: input buffers whose tensors Sparsile computes from another input.
//!
//! `decompose_format` rewrites an input buffer `A` into parts `A_p0, A_p1, …`, each an
//! ordinary input buffer over its own axes. The caller still passes only `A`; before a
//! run, the runtime computes every part's structure and values from `A`'s tensor by
//! the rule recorded here (a pre-processing step, cached per sparsity pattern).
//!
//! A [`DerivedBuffer`] says `buffer = part(source, part) by rule`. The rule is a name with
//! positional arguments (identifiers or integers), e.g. `hyb(2, 3)` or
//! `convert(dbsr, 2, 2)`; its meaning lives with the formats (the `decompose` module of
//! `sparsile-formats`), the IR only carries it.
//!
//! Text form (one line per derived buffer, after the buffer declarations):
//! ```text
//! derived A_p0 = part(A, 0) by hyb(2, 3)
//! ```
//!
//! ```
//! use sparsile_ir::coord::Program;
//! let text = "func f(m, n, r0) {\n  axis I = dense_fixed(m)\n  axis J = dense_fixed(n)\n  \
//!     axis I0 = sparse_fixed(none, m, per=r0, idx=i32, nonunique)\n  \
//!     axis J0 = sparse_fixed(I0, n, per=2, idx=i32)\n  buffer A: f32[I, J] input\n  \
//!     buffer A_p0: f32[I0, J0] input\n  derived A_p0 = part(A, 0) by hyb(1, 1)\n}\n";
//! let p: Program = text.parse().unwrap();
//! assert_eq!(p.derived.len(), 1);
//! assert_eq!(p.derived[0].rule.to_string(), "hyb(1, 1)");
//! assert_eq!(p.to_string(), text);
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::id::BufferId;
use crate::Span;

/// A decomposition rule as the IR records it: a name and positional arguments, each an
/// identifier or a non-negative integer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RuleSpec {
    pub name: String,
    pub args: Vec<String>,
}

impl RuleSpec {
    /// A rule `name(args…)`.
    pub fn new(name: impl Into<String>, args: Vec<String>) -> RuleSpec {
        RuleSpec {
            name: name.into(),
            args,
        }
    }
}

impl fmt::Display for RuleSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name, self.args.join(", "))
    }
}

/// `buffer = part(source, part) by rule`: the tensor of `buffer` is part number `part`
/// of the decomposition of `source`'s tensor by `rule`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DerivedBuffer {
    pub buffer: BufferId,
    pub source: BufferId,
    pub part: usize,
    pub rule: RuleSpec,
    pub span: Span,
}
