//! `cache_read`: stages the elements of a buffer that one iteration of a loop reads into
//! a local array, loaded once when the iteration starts.
//!
//! Purpose: SDDMM reads the row `X[i, 0..K]` once per non-zero of row `i`; staged, it is
//! loaded once per row into a [`sparsile_ir::loops::BufferKind::Local`] array that stays
//! in cache or registers.
//!
//! Preconditions (each violation is its own [`ScheduleError`]):
//! - the loop exists; `buffer` is a float values buffer laid out over axes that the loop
//!   reads and does not write ([`ScheduleError::UnknownBuffer`],
//!   [`ScheduleError::CacheBuffer`]);
//! - the accesses satisfy the rules of [`super::cache_write()`]: every index position is
//!   either the same expression computable at the top of the iteration, or the variable
//!   of an inner loop with constant bounds over a parentless `dense_fixed` axis
//!   ([`ScheduleError::CacheAccess`]); at most
//!   [`super::cache_write::MAX_LOCAL_ELEMENTS`] elements
//!   ([`ScheduleError::CacheTooLarge`]).
//!
//! Postcondition: a new `local` buffer `<buffer>_local`; after the `let`s that open the
//! iteration, the existing cached elements (`0 <= c < length`) are copied into it (the
//! others are 0), and every load of `buffer` in the body reads the local array instead.
//!
//! Example (`tests/schedule/cache_read/sddmm_csr.before` → `.after`):
//! ```text
//! for i_2 in 0..m {                        for i_2 in 0..m {
//!   for j_p in ... {                         for X_in1 in 0..8 { if X_in1 < k { X_local[X_in1] = X[i_2, X_in1] } else { ... = 0.0 } }
//!     for k_2 in 0..8 {            →         for j_p in ... {
//!       ... X[i_2, k_2] ...                    for k_2 in 0..8 { ... X_local[k_2] ... }
//! ```

use super::cache_write::{cache_buffer_for, Body, Plan};
use super::loop_ref::loop_mut;
use super::parallel::find_loop;
use super::{LoopRef, ScheduleError};

const PRIMITIVE: &str = "cache_read";

/// Stages the elements of `buffer` read by one iteration of `target` (see the module
/// docs). Returns the function and the name of the local buffer.
pub fn cache_read(
    func: &Func,
    target: &LoopRef,
    buffer: &str,
) -> Result<(Func, String), ScheduleError> {
    let found = find_loop(func, target, PRIMITIVE)?;
    let f = found.for_;
    let id = func
        .buffer_by_name(buffer)
        .ok_or_else(|| ScheduleError::UnknownBuffer {
            primitive: PRIMITIVE,
            buffer: buffer.to_string(),
        })?;
    let body = Body::of(f);
    if body.stores.contains(&id) {
        return Err(cache_buffer_for(
            PRIMITIVE,
            target,
            buffer,
            f.span,
            "the loop writes it (use cache_write)",
        ));
    }
    if super::cache_write::accesses(&f.body[body.leading_lets..], id).is_empty() {
        return Err(cache_buffer_for(
            PRIMITIVE,
            target,
            buffer,
            f.span,
            "the loop does not read it",
        ));
    }
    let plan = Plan::new(func, target, f, id, &body, PRIMITIVE)?;
    let mut out = func.clone();
    let local = plan.declare_local(&mut out, buffer);
    let (load, _) = plan.copy_loops(&mut out, local, true);
    let lets = body.leading_lets;
    let f = loop_mut(&mut out, target, PRIMITIVE)?;
    let mut new_body: Vec<Stmt> = f.body[..lets].to_vec();
    new_body.push(load);
    new_body.extend(f.body[lets..].iter().map(|s| plan.rewrite_stmt(s, local)));
    f.body = new_body;
    let name = out.buffers[local].name.clone();
    Ok((out, name))
}

use sparsile_ir::loops::{Func, Stmt};
