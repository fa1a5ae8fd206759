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
//! pattern it is sampled by) and the statement is not a `max=`/`min=` reduction;
//! otherwise dense. A bare name on the left (`s = A[i,j]`) or `s[]` is a scalar output
//! (`tensor s: f32[]`).

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

/// The left-hand side of `expr` when it is a bare name (a scalar output, `s = ...`), and
/// whether the statement is a `max=`/`min=` reduction.
fn statement_kind(expr: &str) -> (Option<String>, bool) {
    let Some(eq) = expr.find('=') else {
        return (None, false);
    };
    let lhs = expr[..eq].trim_end();
    let (lhs, extremum) = match lhs.strip_suffix("max").or_else(|| lhs.strip_suffix("min")) {
        Some(rest) if !rest.trim().is_empty() && !rest.ends_with(is_ident_char) => (rest, true),
        _ => (lhs, false),
    };
    let lhs = lhs.trim_end_matches('+').trim();
    let bare = !lhs.is_empty()
        && lhs.chars().all(is_ident_char)
        && !lhs.starts_with(|c: char| c.is_ascii_digit());
    (bare.then(|| lhs.to_string()), extremum)
}

/// Finds `Name[i, j, ...]` accesses, in order of first appearance; the first is the
/// left-hand side (a bare name on the left, `s = ...`, is a scalar: `s[]`).
pub fn accesses(expr: &str) -> Result<Vec<Access>> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out: Vec<Access> = Vec::new();
    if let (Some(name), _) = statement_kind(expr) {
        out.push(Access {
            name,
            indices: Vec::new(),
        });
    }
    let mut k = 0;
    while k < chars.len() {
        if chars[k] == '[' {
            let mut s = k;
            while s > 0 && is_ident_char(chars[s - 1]) {
                s -= 1;
            }
            let name: String = chars[s..k].iter().collect();
            if name.is_empty() {
                bail!("`[` at character {} does not follow a tensor name", k + 1);
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
            let indices: Vec<String> = if inner.trim().is_empty() {
                Vec::new()
            } else {
                inner.split(',').map(|s| s.trim().to_string()).collect()
            };
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
        bail!("no tensor access found (expected something like `C[i,k] = A[i,j] * B[j,k]`)");
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
    // A `max=`/`min=` output is dense.
    let extremum = statement_kind(expr).1;
    let out_format = formats.get(&lhs.name).cloned().unwrap_or_else(|| {
        acc[1..]
            .iter()
            .find(|a| {
                !extremum && a.indices == lhs.indices && decl_formats[&a.name] != Format::Dense
            })
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
    fn scalar_and_extremum_outputs_are_dense() {
        let sparse = ["A".to_string()];
        let none = HashMap::new();
        let text = program_text("s = A[i,j]", &sparse, &none, DType::F64).unwrap();
        assert!(
            text.starts_with(
                "tensor s: f64[] dense
"
            ),
            "{text}"
        );
        let text = program_text("s[] max= A[i,j]", &sparse, &none, DType::F64).unwrap();
        assert!(
            text.starts_with(
                "tensor s: f64[] dense
"
            ),
            "{text}"
        );
        let text = program_text("M[i,j] min= A[i,j]", &sparse, &none, DType::F32).unwrap();
        assert!(
            text.starts_with(
                "tensor M: f32[n_i, n_j] dense
"
            ),
            "{text}"
        );
        let text = program_text("max[i] = A[i,j]", &sparse, &none, DType::F32).unwrap();
        assert!(
            text.starts_with(
                "tensor max: f32[n_i] dense
"
            ),
            "{text}"
        );
    }

    #[test]
    fn rejects_non_plain_indices() {
        assert!(accesses("C[i] = A[idx[i]]").is_err());
        assert!(accesses("C[i] = A[i+1]").is_err());
        assert!(accesses("no tensors").is_err());
    }
}
