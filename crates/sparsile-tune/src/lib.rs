//! Automatic, input-aware choice of format and schedule.
//!
//! A *candidate* is a way to run one operator on one sparse operand: a format for the
//! operand and a named recipe with its parameters. This crate enumerates the candidates
//! of an operator (the search space), describes an input by cheap features, estimates
//! candidates with a roofline cost model, remembers measured choices in a tuning
//! database, and predicts the best candidate without measuring (the learned selector,
//! trained on a corpus of generated matrices). It sits below the facade: measuring a
//! candidate needs the compiler, which the facade provides through [`Evaluator`].

pub mod corpus;
pub mod cost;
pub mod db;
pub mod features;
pub mod gbt;
pub mod op;
pub mod rule;
pub mod search;
pub mod selector;
pub mod space;
pub mod stile;
pub mod target;
pub mod trial;

pub use search::Evaluator;
