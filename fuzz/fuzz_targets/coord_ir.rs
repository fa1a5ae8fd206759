//! Fuzz target: see [`sparsile_fuzz::coord_ir`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sparsile_fuzz::coord_ir(data));
