//! Fuzz target: random programs, formats, inputs and schedules, the scheduled stage-III
//! code run by the flat interpreter against the stage-I interpreter (see
//! [`sparsile_fuzz::differential`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sparsile_fuzz::differential(data, false));
