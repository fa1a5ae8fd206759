//! Fuzz target: see [`sparsile_fuzz::loops_ir`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sparsile_fuzz::loops_ir(data));
