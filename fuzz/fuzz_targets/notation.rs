//! Fuzz target: see [`sparsile_fuzz::notation`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sparsile_fuzz::notation(data));
