//! The checked arguments of one recipe application.

use super::{RecipeError, RecipeInfo, RecipeSpec};

/// Argument values by parameter name, defaults filled in.
#[derive(Debug, Clone)]
pub struct Args {
    recipe: String,
    values: Vec<(String, String)>,
}

impl Args {
    /// Checks `spec`'s arguments against the recipe's parameters.
    pub fn new(info: &RecipeInfo, spec: &RecipeSpec) -> Result<Args, RecipeError> {
        for (key, _) in &spec.args {
            if !info.params.iter().any(|p| p.name == key) {
                return Err(RecipeError::UnknownArg {
                    recipe: info.name.to_string(),
                    arg: key.clone(),
                    allowed: if info.params.is_empty() {
                        "none".to_string()
                    } else {
                        info.params
                            .iter()
                            .map(|p| p.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                });
            }
        }
        let values = info
            .params
            .iter()
            .map(|p| {
                let given = spec.args.iter().find(|(k, _)| k == p.name);
                (
                    p.name.to_string(),
                    given.map_or(p.default.to_string(), |(_, v)| v.clone()),
                )
            })
            .collect();
        Ok(Args {
            recipe: info.name.to_string(),
            values,
        })
    }

    /// The value of parameter `name` as text.
    pub fn text(&self, name: &str) -> &str {
        self.values
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| {
                panic!(
                    "recipe `{}` reads undeclared parameter `{name}`",
                    self.recipe
                )
            })
    }

    /// The value of parameter `name` as an integer in `min..=max`.
    pub fn int(&self, name: &str, min: i64, max: i64) -> Result<i64, RecipeError> {
        let text = self.text(name);
        match text.parse::<i64>() {
            Ok(v) if (min..=max).contains(&v) => Ok(v),
            _ => Err(self.bad(name, format!("expected an integer in {min}..={max}"))),
        }
    }

    /// The value of parameter `name`, one of `choices`.
    pub fn choice<'c>(&self, name: &str, choices: &[&'c str]) -> Result<&'c str, RecipeError> {
        let text = self.text(name);
        choices
            .iter()
            .find(|c| **c == text)
            .copied()
            .ok_or_else(|| self.bad(name, format!("expected one of {}", choices.join(", "))))
    }

    fn bad(&self, name: &str, expected: String) -> RecipeError {
        RecipeError::BadArg {
            recipe: self.recipe.clone(),
            arg: name.to_string(),
            value: self.text(name).to_string(),
            expected,
        }
    }
}
