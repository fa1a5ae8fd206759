//! Remembering which structures were already validated.
//!
//! Kernels check their arguments on every call; for the same matrix called again and
//! again (a GNN layer in a training loop) that check costs as much as an SpMV. A
//! structure that owns all its arrays and is shared through an `Arc` cannot change while
//! anyone else can see it (`Arc::get_mut` needs the only strong *and* no weak
//! reference; `Arc::make_mut` moves the value away from weak references), so the facts
//! checked once stay true while this cache holds a `Weak` to it — and the `Weak` keeps
//! the allocation, so no other structure can appear at the same address. Structures
//! with borrowed arrays (zero-copy views of caller memory, which the caller may change)
//! are checked every time.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, Weak};

use sparsile_formats::{IndexArray, Structure};

/// At most this many remembered structures (dead entries are dropped first).
const CAPACITY: usize = 256;

struct Entry {
    structure: Weak<Structure<'static>>,
    /// Per axis: whether a stored coordinate equals the axis length (padding).
    padding: Vec<bool>,
}

fn cache() -> &'static Mutex<Vec<Entry>> {
    static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
    &CACHE
}

fn owned(a: &Option<IndexArray<'_>>) -> bool {
    match a {
        None => true,
        Some(IndexArray::I32(c)) => matches!(c, Cow::Owned(_)),
        Some(IndexArray::I64(c)) => matches!(c, Cow::Owned(_)),
    }
}

/// Whether every structure array of `s` is owned (no borrowed caller memory).
fn all_owned(s: &Structure<'_>) -> bool {
    s.axes.iter().all(|a| owned(&a.indptr) && owned(&a.indices))
}

/// The remembered padding facts of `s`, when it was validated before.
pub(crate) fn lookup(s: &Arc<Structure<'_>>) -> Option<Vec<bool>> {
    if !all_owned(s) {
        return None;
    }
    let ptr = Arc::as_ptr(s) as *const ();
    let entries = cache().lock().unwrap_or_else(|e| e.into_inner());
    entries
        .iter()
        .find(|e| e.structure.as_ptr() as *const () == ptr && e.structure.strong_count() > 0)
        .map(|e| e.padding.clone())
}

/// `s` as a structure of any lifetime, when every array of it is owned (so it borrows
/// nothing): sharing it costs an `Arc` clone where a copy would cost its arrays.
pub(crate) fn shared_owned(s: &Arc<Structure<'_>>) -> Option<Arc<Structure<'static>>> {
    if !all_owned(s) {
        return None;
    }
    // SAFETY: every array of the structure is owned (checked above), so it holds no
    // reference of its lifetime parameter.
    Some(unsafe {
        std::mem::transmute::<Arc<Structure<'_>>, Arc<Structure<'static>>>(Arc::clone(s))
    })
}

/// Remembers that `s` is valid, with its padding facts.
pub(crate) fn remember(s: &Arc<Structure<'_>>, padding: Vec<bool>) {
    // Only the `Weak` is kept, to compare addresses and to keep the allocation from being
    // reused, never to read through.
    let Some(as_static) = shared_owned(s) else {
        return;
    };
    let weak = Arc::downgrade(&as_static);
    drop(as_static);
    let mut entries = cache().lock().unwrap_or_else(|e| e.into_inner());
    entries.retain(|e| e.structure.strong_count() > 0);
    if entries.len() >= CAPACITY {
        entries.remove(0);
    }
    entries.push(Entry {
        structure: weak,
        padding,
    });
}
