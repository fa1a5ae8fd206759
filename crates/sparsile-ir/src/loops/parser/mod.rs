//! The parser of the loop-level text IR (stages II and III): `impl FromStr for Func`.
//!
//! The text is what `Display for Func` prints, and `print -> parse -> print` is the
//! identity. Parsing records a [`Span`] in every axis, buffer and statement it builds;
//! [`Func::clear_spans`] forgets them, so that `parse(print(f))` compares equal to a
//! function `f` built in Rust (whose variables are numbered in declaration order, as
//! [`super::FuncBuilder`] numbers them).
//!
//! # Grammar (EBNF)
//!
//! ```text
//! func      = ( "pos" | "flat" ) "func" IDENT "(" [ IDENT { "," IDENT } ] ")" "{"
//!               { axis } { buffer } { stmt } "}" ;
//! axis      = (* exactly as in stage I, see crate::coord::parser *) ;
//! buffer    = "buffer" IDENT ":" DTYPE "[" layout "]" ROLE KIND ;
//! layout    = [ IDENT { "," IDENT } ]    (* axes: when the first word names an axis *)
//!           | expr ;                     (* flat: the length, over parameters *)
//! ROLE      = "input" | "output" | "temp" ;
//! KIND      = "values" | "scratch" | "local" | "shared"
//!           | ( "indptr" | "indices" ) "(" IDENT "," INT ")" ;
//! stmt      = for | if | let | warp | assign | store | atomic | block | launch | barrier
//!           | mma ;
//! for       = "for" IDENT "in" expr ".." expr [ FORKIND ] "{" { stmt } "}" ;
//! FORKIND   = "parallel" [ "(" PARTITION ")" ]
//!           | "vectorized" [ "(" "reassociate" [ "," "scalar_sums" "=" INT ] ")" ]
//!           | "unrolled" | "batched" | "register_tiled"
//!           | "bind" "(" ( "blockIdx" | "threadIdx" ) "." ( "x" | "y" | "z" ) ")" ;
//!             (* none: serial *)
//! PARTITION = "dynamic" | "balanced" IDENT ;   (* IDENT: a flat integer buffer *)
//! if        = "if" expr "{" { stmt } "}" [ "else" "{" { stmt } "}" ] ;
//! let       = "let" IDENT ":" ( "idx" | DTYPE ) "=" expr ;
//! assign    = IDENT "=" expr ;
//! store     = IDENT "[" [ expr { "," expr } ] "]" "=" expr ;
//! atomic    = "atomic" IDENT "[" [ expr { "," expr } ] "]" "+" "=" expr ;  (* printed `+=` *)
//! warp      = "let" IDENT ":" ( "idx" | DTYPE ) "="
//!             ( ( "warp_sum" | "warp_max" | "warp_min" ) "(" expr "," INT ")"
//!             | "warp_segment_sum" "(" expr "," expr "," INT ")" ) ;
//! mma       = "mma" SHAPE MMATYPE "(" IDENT "," IDENT "," IDENT ")"
//!             [ "where" expr ":" ] IDENT "[" [ expr { "," expr } ] "]" "+" "=" expr ;
//!             (* SHAPE: m16n8k16 | m16n8k8 | m16n8k4; MMATYPE: f16 | bf16 | tf32; the
//!                tile variables (row, column, depth) are in scope in the rest of the
//!                statement; the last expr is a product `A * B`, split at its top `*` *)
//! block     = "block" IDENT { "." IDENT } "{" { stmt } "}" ;
//! launch    = "launch" IDENT "{" { stmt } "}" ;
//! barrier   = "sync_threads" | "sync_warp" ;
//! expr      = conj { "||" conj } ;                     (* left associative *)
//! conj      = cmp { "&&" cmp } ;                       (* left associative *)
//! cmp       = sum [ ( "<" | "<=" | "==" | "!=" | ">=" | ">" ) sum ] ;  (* no chains *)
//! sum       = term { ( "+" | "-" ) term } ;            (* left associative *)
//! term      = factor { ( "*" | "/" | "%" ) factor } ;  (* left associative *)
//! factor    = literal | "(" expr ")"
//!           | "select" "(" expr "," expr "," expr ")"
//!           | "search" "(" IDENT "," expr "," expr "," expr ")"
//!           | ( "max" | "min" ) "(" expr "," expr ")"
//!           | UNARY "(" expr ")"       (* neg, exp, relu, sqrt, abs, log *)
//!           | IDENT "[" [ expr { "," expr } ] "]"     (* load *)
//!           | IDENT ;                                 (* variable or parameter *)
//! literal   = [ "-" ] ( INT | FLOAT | "inf" ) | "nan" ;
//! ```
//!
//! `#` starts a comment that runs to the end of the line. Literals, identifiers, element
//! types and axis declarations are as in stage I. There is no unary minus operator (use
//! `neg(x)`); a `-` directly before a number is part of the literal. The words in
//! [`RESERVED`] cannot be used as names.
//!
//! # Names and scoping
//! Parameters, axes and buffers each have their own namespace; a parameter must not
//! share its name with an axis (so that a buffer's `[...]` is unambiguous). A loop
//! variable is in scope in its loop's body; a `let` local from its declaration to the
//! end of the enclosing statement list. A variable may not have the name of a parameter
//! or of another variable in scope, so a bare identifier names exactly one variable or
//! parameter; sibling scopes may reuse names (each declaration is a distinct variable).
//! Variables are numbered in the order they are declared in the text.
//!
//! ```
//! use sparsile_ir::loops::Func;
//! let text = "\
//! flat func scale(n) {
//!   buffer X: f32[n] input values
//!   buffer Y: f32[n] output values
//!   for i in 0..n parallel {
//!     let x: f32 = X[i]
//!     if x > 0.0 && i % 2 == 0 {
//!       Y[i] = 2.0 * x
//!     } else {
//!       Y[i] = 0.0
//!     }
//!   }
//! }
//! ";
//! let f: Func = text.parse().unwrap();
//! assert_eq!(f.to_string(), text);
//! let err = "flat func f(n) {\n  for i in 0..n {\n    Y[i] = 1.0\n  }\n}\n"
//!     .parse::<Func>()
//!     .unwrap_err();
//! assert_eq!(err.to_string(), "line 3, column 5: unknown buffer `Y`");
//! ```

mod grammar;
mod lexer;

use std::str::FromStr;

pub use crate::coord::ParseError;

use super::func::Func;
use super::stmt::Stmt;
use crate::Span;

/// Words with a fixed meaning in the loop-level text IR, unusable as names.
pub const RESERVED: &[&str] = &[
    "func",
    "axis",
    "buffer",
    "for",
    "in",
    "if",
    "else",
    "let",
    "block",
    "none",
    "union",
    "intersect",
    "nonunique",
    "nopad",
    "prefetch",
    "inf",
    "nan",
    "launch",
    "sync_threads",
    "sync_warp",
    "warp_sum",
    "warp_max",
    "warp_min",
    "warp_segment_sum",
];

/// Whether `name` can be printed as a name: an identifier that is not reserved.
pub fn is_valid_name(name: &str) -> bool {
    is_identifier(name) && !RESERVED.contains(&name)
}

/// Whether `name` is an identifier (`[A-Za-z_][A-Za-z0-9_]*`).
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `name` can be printed as a block name: identifiers joined by `.`.
pub fn is_valid_block_name(name: &str) -> bool {
    name.split('.').all(is_identifier)
}

impl FromStr for Func {
    type Err = ParseError;

    fn from_str(src: &str) -> Result<Func, ParseError> {
        let tokens = lexer::tokenize(src)?;
        grammar::Parser::new(tokens).func()
    }
}

impl Func {
    /// Resets every span to `Span::default()` (to compare functions up to spans).
    pub fn clear_spans(&mut self) {
        for (_, a) in self.axes.iter_mut() {
            a.span = Span::default();
        }
        for (_, b) in self.buffers.iter_mut() {
            b.span = Span::default();
        }
        clear_stmt_spans(&mut self.body);
    }
}

fn clear_stmt_spans(stmts: &mut [Stmt]) {
    for s in stmts {
        match s {
            Stmt::For(l) => {
                l.span = Span::default();
                clear_stmt_spans(&mut l.body);
            }
            Stmt::If {
                then_body,
                else_body,
                span,
                ..
            } => {
                *span = Span::default();
                clear_stmt_spans(then_body);
                clear_stmt_spans(else_body);
            }
            Stmt::Let { span, .. }
            | Stmt::Assign { span, .. }
            | Stmt::Store { span, .. }
            | Stmt::Prefetch { span, .. }
            | Stmt::AtomicAdd { span, .. }
            | Stmt::Barrier { span, .. }
            | Stmt::WarpReduce { span, .. } => *span = Span::default(),
            Stmt::Mma(m) => m.span = Span::default(),
            Stmt::Block { body, span, .. } | Stmt::Launch { body, span, .. } => {
                *span = Span::default();
                clear_stmt_spans(body);
            }
        }
    }
}
