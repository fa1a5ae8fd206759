//! The parser of the stage-I text IR: `impl FromStr for Program`.
//!
//! The text is what `Display for Program` prints, and `print -> parse -> print` is the
//! identity. Parsing records a [`Span`] in every axis, buffer, iteration and store it
//! builds; [`Program::clear_spans`] forgets them, so that `parse(print(p))` compares
//! equal to a program `p` built in Rust.
//!
//! # Grammar (EBNF)
//!
//! ```text
//! program    = "func" IDENT "(" [ IDENT { "," IDENT } ] ")" "{"
//!                { axis } { buffer } { derived } { stmt } "}" ;
//! axis       = "axis" IDENT "=" KIND "(" [ parent "," ] extent { "," attr } ")"
//!                [ "=" ( "union" | "intersect" ) "(" IDENT { "," IDENT } ")" ] ;
//! KIND       = "dense_fixed" | "dense_variable" | "sparse_fixed" | "sparse_variable" ;
//! parent     = IDENT | "none" ;          (* required for every kind but dense_fixed *)
//! attr       = "nnz" "=" extent | "per" "=" extent | "idx" "=" ( "i32" | "i64" )
//!            | "nonunique" | "nopad" ;  (* each at most once; printed in this order *)
//! extent     = [ "-" ] INT | IDENT ;    (* a constant or a parameter *)
//! buffer     = "buffer" IDENT ":" DTYPE "[" [ IDENT { "," IDENT } ] "]" ROLE ;
//! DTYPE      = "f16" | "bf16" | "f32" | "f64" | "i32" | "i64" ;
//! ROLE       = "input" | "output" | "temp" ;
//! derived    = "derived" IDENT "=" "part" "(" IDENT "," INT ")" "by" IDENT
//!                "(" [ ( IDENT | INT ) { "," ( IDENT | INT ) } ] ")" ;
//! stmt       = iteration | store ;
//! iteration  = "iter" IDENT "over" "[" [ iteraxis { "," iteraxis } ] "]"
//!                "as" "(" [ IDENT { "," IDENT } ] ")" "{" [ init ] { stmt } "}" ;
//! iteraxis   = IDENT ":" ( "S" | "R" ) ;
//! init       = "init" "{" { stmt } "}" ;
//! store      = IDENT "[" [ expr { "," expr } ] "]" "=" expr ;
//! expr       = term { ( "+" | "-" ) term } ;              (* left associative *)
//! term       = factor { ( "*" | "/" | "%" ) factor } ;    (* left associative *)
//! factor     = literal | "(" expr ")"
//!            | IDENT "(" expr [ "," expr ] ")"     (* max, min (2 args); neg, exp, relu,
//!                                                     sqrt, abs, log (1 arg) *)
//!            | IDENT "[" [ expr { "," expr } ] "]" (* load *)
//!            | IDENT ;                             (* iterator variable or parameter *)
//! literal    = [ "-" ] ( INT | FLOAT | "inf" ) | "nan" ;
//! INT        = digit { digit } ;
//! FLOAT      = digit { digit } ( "." digit { digit } [ exponent ] | exponent ) ;
//! exponent   = ( "e" | "E" ) [ "+" | "-" ] digit { digit } ;
//! IDENT      = ( letter | "_" ) { letter | digit | "_" } ;
//! ```
//!
//! `#` starts a comment that runs to the end of the line. Attribute defaults: index type
//! `i32`, unique coordinates, sparse axes possibly padded (`nopad` promises every stored
//! coordinate is below the length), `Bound` structure. `idx=` is always printed for axes with
//! structure arrays (every kind but `dense_fixed`, where it is printed only for `i64`).
//! There is no unary minus operator (use `neg(x)`); a `-` directly before a number is
//! part of the literal, so `a - -3` subtracts the literal `-3`. The words in
//! [`RESERVED`] cannot be used as names.
//!
//! # Names and scoping
//! Parameters, axes and buffers each have their own namespace and must be unique in it;
//! an axis may name a parent declared after it (the verifier rejects that, so the parser
//! accepts it). An iteration's variables are in scope in its `init` block and its body,
//! nested iterations included. A variable may not have the name of a parameter or of
//! another variable in scope, so a bare identifier in an expression names exactly one
//! variable or parameter; sibling iterations may reuse names. Variables are numbered in
//! the order they are bound in the text (a preorder walk of the iterations), which is
//! the order the builder creates them in.
//!
//! ```
//! use sparsile_ir::coord::Program;
//! let err = "func f(m) {\n  axis I = dense_fixed(m)\n  buffer X: f32[I) input\n}\n"
//!     .parse::<Program>()
//!     .unwrap_err();
//! assert_eq!(err.to_string(), "line 3, column 18: expected `,` or `]`, found `)`");
//! ```

mod grammar;
mod lexer;

use std::collections::HashMap;
use std::str::FromStr;

use thiserror::Error;

use super::expr::Expr;
use super::program::{IterVar, Program};
use super::stmt::Stmt;
use crate::id::{IdVec, IterVarId};
use crate::Span;

/// A syntax or name-resolution error, at a line and column of the text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{span}: {message}")]
pub struct ParseError {
    pub span: Span,
    pub message: String,
}

impl ParseError {
    pub fn new(span: Span, message: impl Into<String>) -> ParseError {
        ParseError {
            span,
            message: message.into(),
        }
    }
}

/// Words with a fixed meaning in the text IR, unusable as names.
pub const RESERVED: &[&str] = &[
    "func",
    "axis",
    "buffer",
    "iter",
    "over",
    "as",
    "init",
    "none",
    "union",
    "intersect",
    "nonunique",
    "nopad",
    "inf",
    "nan",
];

/// Whether `name` can be printed as a name: an identifier that is not reserved.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') && !RESERVED.contains(&name)
}

impl FromStr for Program {
    type Err = ParseError;

    fn from_str(src: &str) -> Result<Program, ParseError> {
        let tokens = lexer::tokenize(src)?;
        grammar::Parser::new(tokens).program()
    }
}

impl Program {
    /// Resets every span to `Span::default()` (to compare programs up to spans).
    pub fn clear_spans(&mut self) {
        for (_, a) in self.axes.iter_mut() {
            a.span = Span::default();
        }
        for (_, b) in self.buffers.iter_mut() {
            b.span = Span::default();
        }
        for d in &mut self.derived {
            d.span = Span::default();
        }
        clear_stmt_spans(&mut self.body);
    }
}

impl Program {
    /// Renumbers the iterator variables in the order iterations bind them (a preorder
    /// walk of the body, `init` before body) and drops variables no iteration binds.
    /// Uses of unbound variables are left as they are (the verifier reports them).
    pub fn compact_vars(&mut self) {
        let mut order: Vec<IterVarId> = Vec::new();
        collect_bound(&self.body, &mut order);
        let mut map: HashMap<IterVarId, IterVarId> = HashMap::new();
        let mut vars: IdVec<IterVarId, IterVar> = IdVec::new();
        for old in order {
            if map.contains_key(&old) {
                continue;
            }
            if let Some(v) = self.vars.get(old) {
                map.insert(old, vars.push(v.clone()));
            }
        }
        self.vars = vars;
        rename_vars(&mut self.body, &map);
    }
}

fn collect_bound(stmts: &[Stmt], order: &mut Vec<IterVarId>) {
    for s in stmts {
        if let Stmt::Iteration(it) = s {
            order.extend(it.axes.iter().map(|a| a.var));
            collect_bound(&it.init, order);
            collect_bound(&it.body, order);
        }
    }
}

fn rename_expr(e: &mut Expr, map: &HashMap<IterVarId, IterVarId>) {
    match e {
        Expr::Var(v) => {
            if let Some(&n) = map.get(v) {
                *v = n;
            }
        }
        Expr::Int(_) | Expr::Float(_) | Expr::Param(_) => {}
        Expr::Load { indices, .. } => indices.iter_mut().for_each(|i| rename_expr(i, map)),
        Expr::Unary { arg, .. } => rename_expr(arg, map),
        Expr::Binary { lhs, rhs, .. } => {
            rename_expr(lhs, map);
            rename_expr(rhs, map);
        }
    }
}

fn rename_vars(stmts: &mut [Stmt], map: &HashMap<IterVarId, IterVarId>) {
    for s in stmts {
        match s {
            Stmt::Store(st) => {
                st.indices.iter_mut().for_each(|i| rename_expr(i, map));
                rename_expr(&mut st.value, map);
            }
            Stmt::Iteration(it) => {
                for a in &mut it.axes {
                    if let Some(&n) = map.get(&a.var) {
                        a.var = n;
                    }
                }
                rename_vars(&mut it.init, map);
                rename_vars(&mut it.body, map);
            }
        }
    }
}

fn clear_stmt_spans(stmts: &mut [Stmt]) {
    for s in stmts {
        match s {
            Stmt::Store(st) => st.span = Span::default(),
            Stmt::Iteration(it) => {
                it.span = Span::default();
                clear_stmt_spans(&mut it.init);
                clear_stmt_spans(&mut it.body);
            }
        }
    }
}
