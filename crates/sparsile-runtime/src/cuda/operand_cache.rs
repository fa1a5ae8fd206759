//! The structure arrays of sparse operands (`indptr`, `indices`), kept on the device
//! between device runs.
//!
//! A structure that owns all its arrays and is shared through an `Arc` cannot change
//! while anyone else can see it (the rule the validation memo and the pattern memo rely
//! on), so its arrays are copied to the device once and reused while this cache holds a
//! `Weak` to it, by every kernel on that device (the forward and backward kernels of
//! one operand share them). The `Weak` also keeps the allocation, so no other structure
//! can appear at the same address: an entry is never served for another matrix. A
//! structure over borrowed arrays (which their owner may change) is not cached; a run
//! copies its arrays every time.
//!
//! Entries of structures that died are freed at the next look-up, and the oldest entry
//! goes when more than [`CAPACITY`] structures are cached. Kernels queued earlier may
//! still read an entry's memory then, so freeing waits for the device first (a rare,
//! one-off wait); a run that is still using an evicted array frees it itself when it
//! ends, after the same wait. [`clear`] frees everything.
//!
//! A copy is queued on the run's stream and waited for once, so the arrays are complete
//! before any later run reads them, on any stream.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, Weak};

use sparsile_formats::{IndexArray, Structure};

use super::stream::{bytes_of, copy_to_device_async, synchronize_stream};
use super::{CudaDevice, CudaError, CudaStream, DeviceBuffer};

/// At most this many structures are cached.
pub const CAPACITY: usize = 64;

/// An array of a structure: its axis, and whether it is the `indptr` (else `indices`).
type ArrayKey = (usize, bool);

struct Entry {
    structure: Weak<Structure<'static>>,
    device: CudaDevice,
    arrays: Vec<(ArrayKey, Arc<DeviceBuffer>)>,
    /// When it was last used (a counter), for evicting the oldest.
    used: u64,
}

struct Cache {
    entries: Vec<Entry>,
    clock: u64,
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: Mutex<Cache> = Mutex::new(Cache {
        entries: Vec::new(),
        clock: 0,
    });
    &CACHE
}

fn owned(a: &Option<IndexArray<'_>>) -> bool {
    match a {
        None => true,
        Some(IndexArray::I32(c)) => matches!(c, Cow::Owned(_)),
        Some(IndexArray::I64(c)) => matches!(c, Cow::Owned(_)),
    }
}

/// `s` as a structure of any lifetime, when it owns every array (so it borrows nothing).
fn shared_owned(s: &Arc<Structure<'_>>) -> Option<Arc<Structure<'static>>> {
    if !s.axes.iter().all(|a| owned(&a.indptr) && owned(&a.indices)) {
        return None;
    }
    // SAFETY: every array of the structure is owned (checked above), so it holds no
    // reference of its lifetime parameter.
    Some(unsafe {
        std::mem::transmute::<Arc<Structure<'_>>, Arc<Structure<'static>>>(Arc::clone(s))
    })
}

fn same(weak: &Weak<Structure<'static>>, s: &Arc<Structure<'static>>) -> bool {
    weak.strong_count() > 0 && std::ptr::eq(weak.as_ptr(), Arc::as_ptr(s))
}

/// Frees `buffers` of `device` that nothing else holds, after waiting for the device.
fn release(device: &CudaDevice, buffers: Vec<Arc<DeviceBuffer>>) {
    let last: Vec<DeviceBuffer> = buffers
        .into_iter()
        .filter_map(|b| Arc::try_unwrap(b).ok())
        .collect();
    if !last.is_empty() {
        // Kernels queued before may still read them. A failure here is one of earlier
        // work, reported by the next synchronising call; the memory is freed anyway.
        let _ = device.synchronize();
        drop(last);
    }
}

/// Releases the arrays a run held (see the module docs): each one the cache dropped
/// meanwhile is freed after waiting for the device.
pub(super) fn release_held(device: &CudaDevice, held: Vec<Arc<DeviceBuffer>>) {
    release(device, held);
}

/// Drops the entries of dead structures (freeing their memory).
fn sweep(cache: &mut Cache) -> Vec<Entry> {
    let (dead, live) = std::mem::take(&mut cache.entries)
        .into_iter()
        .partition(|e| e.structure.strong_count() == 0);
    cache.entries = live;
    dead
}

fn free_entries(entries: Vec<Entry>) {
    for e in entries {
        let arrays = e.arrays.into_iter().map(|(_, b)| b).collect();
        release(&e.device, arrays);
    }
}

/// The device copy of `array` (axis `axis` of `structure`, its `indptr` when `indptr`)
/// on `device`: from the cache, or copied now on `stream` (and waited for) and cached.
/// `None` when the structure borrows its arrays: the caller copies them itself.
pub(super) fn array(
    device: &CudaDevice,
    stream: CudaStream,
    structure: &Arc<Structure<'_>>,
    axis: usize,
    indptr: bool,
    array: &IndexArray<'_>,
) -> Result<Option<Arc<DeviceBuffer>>, CudaError> {
    let Some(shared) = shared_owned(structure) else {
        return Ok(None);
    };
    let key = (axis, indptr);
    let dead = {
        let mut c = cache().lock().unwrap_or_else(|e| e.into_inner());
        let dead = sweep(&mut c);
        c.clock += 1;
        let now = c.clock;
        let hit = c
            .entries
            .iter_mut()
            .find(|e| same(&e.structure, &shared) && e.device.raw_context() == device.raw_context())
            .and_then(|e| {
                e.used = now;
                e.arrays
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, b)| Arc::clone(b))
            });
        if let Some(b) = hit {
            drop(c);
            free_entries(dead);
            return Ok(Some(b));
        }
        dead
    };
    free_entries(dead);

    // Copied without holding the lock (the copy waits for the stream).
    let (src, bytes) = match array {
        IndexArray::I32(v) => bytes_of(v),
        IndexArray::I64(v) => bytes_of(v),
    };
    let buffer = device.alloc_unset(bytes)?;
    // SAFETY: the buffer holds at least `bytes` bytes; the source is the structure's
    // array, alive (the caller holds the structure) until the wait below returns.
    unsafe { copy_to_device_async(device, buffer.device_ptr(), (src, bytes), stream)? };
    synchronize_stream(device, stream)?;
    let buffer = Arc::new(buffer);

    let mut c = cache().lock().unwrap_or_else(|e| e.into_inner());
    c.clock += 1;
    let now = c.clock;
    let position = c.entries.iter().position(|e| {
        same(&e.structure, &shared) && e.device.raw_context() == device.raw_context()
    });
    let mut evicted = Vec::new();
    let index = match position {
        Some(i) => i,
        None => {
            if c.entries.len() >= CAPACITY {
                let oldest = (0..c.entries.len())
                    .min_by_key(|&i| c.entries[i].used)
                    .expect("the cache is full");
                evicted.push(c.entries.swap_remove(oldest));
            }
            c.entries.push(Entry {
                structure: Arc::downgrade(&shared),
                device: device.clone(),
                arrays: Vec::new(),
                used: now,
            });
            c.entries.len() - 1
        }
    };
    let entry = &mut c.entries[index];
    entry.used = now;
    // Another run may have cached the same array meanwhile: keep one.
    let result = match entry.arrays.iter().find(|(k, _)| *k == key) {
        Some((_, b)) => Arc::clone(b),
        None => {
            entry.arrays.push((key, Arc::clone(&buffer)));
            Arc::clone(&buffer)
        }
    };
    drop(c);
    drop(buffer);
    free_entries(evicted);
    Ok(Some(result))
}

/// What the cache holds: (structures, arrays, bytes of device memory).
pub fn stats() -> (usize, usize, usize) {
    let c = cache().lock().unwrap_or_else(|e| e.into_inner());
    let live = c.entries.iter().filter(|e| e.structure.strong_count() > 0);
    live.fold((0, 0, 0), |(s, a, b), e| {
        (
            s + 1,
            a + e.arrays.len(),
            b + e.arrays.iter().map(|(_, x)| x.bytes()).sum::<usize>(),
        )
    })
}

/// Frees every cached array (after waiting for each device that has some).
pub fn clear() {
    let entries = std::mem::take(&mut cache().lock().unwrap_or_else(|e| e.into_inner()).entries);
    free_entries(entries);
}
