//! Naming loops: a [`LoopRef`] is the name of the block that contains the loop and the
//! loop variable's name. This module finds loops by their `LoopRef` and chooses fresh
//! variable names for the loops that primitives create.
//!
//! Preconditions: block names are unique in a function; a loop variable's name is
//! unique within its block (every primitive keeps it so).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A loop, named by its block and its variable, e.g. `LoopRef::new("C", "i")`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LoopRef {
    pub block: String,
    pub var: String,
}

impl LoopRef {
    pub fn new(block: impl Into<String>, var: impl Into<String>) -> LoopRef {
        LoopRef {
            block: block.into(),
            var: var.into(),
        }
    }
}

impl fmt::Display for LoopRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.block, self.var)
    }
}
