//! Fuzz target: see [`sparsile_fuzz::mtx`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sparsile_fuzz::mtx(data));
