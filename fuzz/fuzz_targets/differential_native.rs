//! Fuzz target: like `differential`, and every accepted program is also compiled to C,
//! run natively with one and three threads and compared (slow: one C compile per new
//! program; see [`sparsile_fuzz::differential`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sparsile_fuzz::differential(data, true));
