//! Fuzz target: see [`sparsile_fuzz::spt`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sparsile_fuzz::spt(data));
