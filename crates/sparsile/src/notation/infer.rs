//! Declarations inferred for a lone statement (the CLI's `--expr`, Python's
//! `sparsile.compile("Y[i,k] = A[i,j] * X[j,k]")`): tensors and their dimensions named
//! after the index variables, formats from what the caller knows is sparse.
//!
//! Precondition: `expr` is one statement whose accesses use plain index variables
//! (`A[i,j]`, not `A[idx[i]]` or `A[i+1]`); anything else needs declarations written out.
//! The statement is the last line of the program, verbatim, so an error the notation
//! reports on that line points at the same column of what the caller wrote.
//!
//! `C[i,k] = A[i,j] * B[j,k]` with `A` sparse becomes
//! ```text
//! tensor A: f32[n_i, n_j] csr
//! tensor B: f32[n_j, n_k]
//! tensor C: f32[n_i, n_k]
//! C[i,k] = A[i,j] * B[j,k]
//! ```
//! A tensor not named sparse is dense. The output is sparse, in the format
//! of a sparse operand, when it is indexed exactly like that operand (the operand whose
//! pattern it is sampled by); otherwise dense.

use std::collections::{BTreeMap, HashMap};

use sparsile_formats::Format;
use sparsile_ir::DType;

/// Why declarations cannot be inferred for an expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InferError(String);

type Result<T> = std::result::Result<T, InferError>;

macro_rules! bail {
    ($($arg:tt)*) => {
        return Err(InferError(format!($($arg)*)))
    };
}

/// A tensor access found in the expression: name and plain index variables.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    pub name: String,
    pub indices: Vec<String>,
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Finds `Name[i, j, ...]` accesses, in order of first appearance; the first is the
/// left-hand side.
pub fn accesses(expr: &str) -> Result<Vec<Access>> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out: Vec<Access> = Vec::new();
    let mut k = 0;
    while k < chars.len() {
        if chars[k] == '[' {
            let mut s = k;
            while s > 0 && is_ident_char(chars[s - 1]) {
                s -= 1;
            }
            let name: String = chars[s..k].iter().collect();
            if name.is_empty() {
                bail!(
                    "`[` at character {} does not follow a tensor name",
                    k + 1
                );
            }
            let close = chars[k..]
                .iter()
                .position(|&c| c == ']')
                .map(|p| p + k)
                .ok_or_else(|| InferError(format!("`[` at character {} is never closed", k + 1)))?;
            let inner: String = chars[k + 1..close].iter().collect();
            if inner.contains('[') {
                bail!("declarations are inferred for plain index variables only (found `{name}[{inner}]`); declare the tensors (`tensor NAME: TYPE[DIMS] FORMAT` lines before the statement)");
            }
            let indices: Vec<String> = inner.split(',').map(|s| s.trim().to_string()).collect();
            for ix in &indices {
                if ix.is_empty()
                    || !ix.chars().all(is_ident_char)
                    || ix.chars().next().is_some_and(|c| c.is_ascii_digit())
                {
                    bail!("index `{ix}` of `{name}` is not a plain index variable: declarations are inferred for plain ones only; declare the tensors (`tensor NAME: TYPE[DIMS] FORMAT` lines before the statement)");
                }
            }
            match out.iter().find(|a| a.name == name) {
                Some(prev) if prev.indices.len() != indices.len() => {
                    bail!(
                        "`{name}` is used with {} and with {} indices",
                        prev.indices.len(),
                        indices.len()
                    )
                }
                Some(_) => {}
                None => out.push(Access { name, indices }),
            }
            k = close + 1;
        } else {
            k += 1;
        }
    }
    if out.is_empty() {
        bail!(
            "no tensor access found (expected something like `C[i,k] = A[i,j] * B[j,k]`)"
        );
    }
    Ok(out)
}

/// The dimension name used for index variable `v`.
pub fn dim_name(v: &str) -> String {
    format!("n_{v}")
}

/// Writes the program text for `expr`: declarations, then `expr` (trimmed) as the last
/// line. `sparse_inputs` names the inputs known to be sparse (stored as CSR unless
/// `formats` says otherwise); `formats` chooses formats by tensor name.
pub fn program_text(
    expr: &str,
    sparse_inputs: &[String],
    formats: &HashMap<String, Format>,
    dtype: DType,
) -> Result<String> {
    let acc = accesses(expr)?;
    let lhs = &acc[0];
    let mut decl_formats: BTreeMap<String, Format> = BTreeMap::new();
    for a in &acc[1..] {
        let f = formats
            .get(&a.name)
            .cloned()
            .unwrap_or(if sparse_inputs.contains(&a.name) {
                Format::Csr
            } else {
                Format::Dense
            });
        decl_formats.insert(a.name.clone(), f);
    }
    let out_format = formats.get(&lhs.name).cloned().unwrap_or_else(|| {
        acc[1..]
            .iter()
            .find(|a| a.indices == lhs.indices && decl_formats[&a.name] != Format::Dense)
            .map(|a| decl_formats[&a.name].clone())
            .unwrap_or(Format::Dense)
    });
    let mut text = String::new();
    for a in &acc {
        if a.name == lhs.name && acc.iter().skip(1).any(|b| b.name == lhs.name) {
            continue;
        }
        let f = if a.name == lhs.name {
            out_format.clone()
        } else {
            decl_formats[&a.name].clone()
        };
        let dims: Vec<String> = a.indices.iter().map(|v| dim_name(v)).collect();
        text.push_str(&format!(
            "tensor {}: {}[{}] {}\n",
            a.name,
            dtype,
            dims.join(", "),
            f
        ));
    }
    text.push_str(expr.trim());
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infers_spmm_declarations() {
        let text = program_text(
            "C[i,k] = A[i,j] * B[j,k]",
            &["A".into()],
            &HashMap::new(),
            DType::F32,
        )
        .unwrap();
        assert_eq!(
            text,
            "tensor C: f32[n_i, n_k] dense\ntensor A: f32[n_i, n_j] csr\ntensor B: f32[n_j, n_k] dense\nC[i,k] = A[i,j] * B[j,k]\n"
        );
    }

    #[test]
    fn sampled_output_takes_the_operand_format() {
        let text = program_text(
            "C[i,j] = A[i,j] * X[i,k] * Y[k,j]",
            &["A".into()],
            &HashMap::new(),
            DType::F32,
        )
        .unwrap();
        assert!(text.starts_with("tensor C: f32[n_i, n_j] csr\n"), "{text}");
    }

    #[test]
    fn rejects_non_plain_indices() {
        assert!(accesses("C[i] = A[idx[i]]").is_err());
        assert!(accesses("C[i] = A[i+1]").is_err());
        assert!(accesses("no tensors").is_err());
    }
}
