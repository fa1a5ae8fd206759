//! Recipe specifications: `name[:key=value,key=value,...]`.
//!
//! ```
//! use sparsile::recipe::RecipeSpec;
//! let spec: RecipeSpec = "hyb:c=2,k=4".parse().unwrap();
//! assert_eq!(spec.name, "hyb");
//! assert_eq!(spec.args, vec![("c".to_string(), "2".to_string()), ("k".to_string(), "4".to_string())]);
//! assert_eq!(spec.to_string(), "hyb:c=2,k=4");
//! ```

use std::fmt;
use std::str::FromStr;

use super::RecipeError;

/// A recipe name with its arguments, in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipeSpec {
    pub name: String,
    pub args: Vec<(String, String)>,
}

impl FromStr for RecipeSpec {
    type Err = RecipeError;

    fn from_str(text: &str) -> Result<RecipeSpec, RecipeError> {
        let bad = |reason: String| RecipeError::BadSpec {
            spec: text.to_string(),
            reason,
        };
        let (name, rest) = match text.split_once(':') {
            Some((n, r)) => (n.trim(), Some(r)),
            None => (text.trim(), None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad(format!(
                "`{name}` is not a recipe name (letters, digits and `_`)"
            )));
        }
        let mut args: Vec<(String, String)> = Vec::new();
        if let Some(rest) = rest {
            for (k, item) in rest.split(',').enumerate() {
                let Some((key, value)) = item.split_once('=') else {
                    return Err(bad(format!(
                        "argument {} (`{item}`) is not `key=value`",
                        k + 1
                    )));
                };
                let (key, value) = (key.trim(), value.trim());
                if key.is_empty() || value.is_empty() {
                    return Err(bad(format!(
                        "argument {} (`{item}`) has an empty key or value",
                        k + 1
                    )));
                }
                if args.iter().any(|(x, _)| x == key) {
                    return Err(bad(format!("argument `{key}` is given twice")));
                }
                args.push((key.to_string(), value.to_string()));
            }
        }
        Ok(RecipeSpec {
            name: name.to_string(),
            args,
        })
    }
}

impl fmt::Display for RecipeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        for (k, (key, value)) in self.args.iter().enumerate() {
            write!(f, "{}{key}={value}", if k == 0 { ':' } else { ',' })?;
        }
        Ok(())
    }
}
