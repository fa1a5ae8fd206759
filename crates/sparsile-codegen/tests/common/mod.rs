//! Shared by the C backend tests: a small builder for stage-III functions, and a
//! harness that compiles generated C with the system compiler, loads it and runs it
//! through the kernel ABI.

#![allow(dead_code)]

pub mod build;
pub mod harness;
pub mod kernels;
