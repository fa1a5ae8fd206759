//! Freed huge mappings, kept for the next huge block of about their size.
//!
//! Purpose: a fresh mapping costs a page fault per page and the system's clearing of
//! every page on first touch. A program that allocates a large output per call (Python's
//! `sparsile.spmm(A, X)`) paid that on every call: 2.8 ms for the 21.7 MB output of SpMM
//! on ogbn-arxiv at K = 32, around a 4 ms kernel. The C library avoids it for blocks up
//! to 32 MiB by keeping freed memory in its heap; huge blocks here are mappings of their
//! own, so they are kept here instead: at most [`BLOCKS`] mappings and [`BYTES`] bytes in
//! all, the least recently freed given back to the system first.
//!
//! A kept mapping is taken for a request whose mapping length is at most its own and
//! more than half of it; the part past the request is unmapped, so the block taken is
//! exactly the mapping the request would have had (what `dealloc` unmaps later). Its
//! bytes are whatever its last owner left, so only `alloc` takes kept mappings;
//! `alloc_zeroed` maps fresh zero pages, which the threads that first write them clear.
//!
//! The shelf is guarded by a lock that is only ever tried, never waited for: a thread
//! that finds it held maps or unmaps directly, so no thread blocks in the allocator, and
//! a child process forked while another thread held the lock still allocates.
//!
//! Preconditions: a mapping given back is one of `map_huge`'s, of the length given, and
//! no longer used.
//!
//! ```
//! # use sparsile_runtime::line_aligned_alloc::kept_blocks::{Shelf, BLOCKS};
//! let mut shelf = Shelf::new();
//! let mut evicted = [None; BLOCKS];
//! shelf.keep(0x4000_0000, 8 << 20, &mut evicted);
//! assert_eq!(shelf.take(6 << 20), Some((0x4000_0000, 8 << 20)));
//! assert_eq!(shelf.take(6 << 20), None);
//! ```

use std::sync::Mutex;

/// At most this many mappings are kept.
pub const BLOCKS: usize = 4;

/// At most this many bytes are kept, all mappings together.
pub const BYTES: usize = 256 << 20;

/// A kept mapping: address, length, and when it was freed (a counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Kept {
    addr: usize,
    len: usize,
    freed: u64,
}

/// The kept mappings (the bookkeeping alone: callers map and unmap).
#[derive(Debug)]
pub struct Shelf {
    kept: [Option<Kept>; BLOCKS],
    clock: u64,
}

impl Default for Shelf {
    fn default() -> Self {
        Shelf::new()
    }
}

impl Shelf {
    /// An empty shelf.
    pub const fn new() -> Shelf {
        Shelf {
            kept: [None; BLOCKS],
            clock: 0,
        }
    }

    /// Removes and returns `(address, length)` of the shortest kept mapping that holds
    /// `len` bytes and is less than twice as long; `None` when none is.
    pub fn take(&mut self, len: usize) -> Option<(usize, usize)> {
        let slot = (0..BLOCKS)
            .filter(|&i| matches!(self.kept[i], Some(k) if k.len >= len && k.len / 2 < len))
            .min_by_key(|&i| self.kept[i].map_or(usize::MAX, |k| k.len))?;
        self.kept[slot].take().map(|k| (k.addr, k.len))
    }

    /// Keeps the mapping `(addr, len)`, first removing the least recently freed ones
    /// until it fits both bounds; those are written to `evicted` as `(address, length)`
    /// for the caller to unmap. A mapping longer than [`BYTES`] is not kept: it is
    /// written to `evicted` itself.
    pub fn keep(
        &mut self,
        addr: usize,
        len: usize,
        evicted: &mut [Option<(usize, usize)>; BLOCKS],
    ) {
        let mut n = 0;
        if len > BYTES {
            evicted[0] = Some((addr, len));
            return;
        }
        self.clock += 1;
        loop {
            let total: usize = self.kept.iter().flatten().map(|k| k.len).sum();
            if total + len <= BYTES {
                if let Some(slot) = self.kept.iter().position(Option::is_none) {
                    self.kept[slot] = Some(Kept {
                        addr,
                        len,
                        freed: self.clock,
                    });
                    return;
                }
            }
            // Full: the oldest goes (each round empties a slot, so this ends).
            let oldest = (0..BLOCKS)
                .filter(|&i| self.kept[i].is_some())
                .min_by_key(|&i| self.kept[i].map_or(u64::MAX, |k| k.freed))
                .expect("a shelf too full for a block within BYTES holds some block");
            let k = self.kept[oldest].take().expect("chosen among the kept");
            evicted[n] = Some((k.addr, k.len));
            n += 1;
        }
    }

    /// Bytes kept, all mappings together.
    pub fn bytes(&self) -> usize {
        self.kept.iter().flatten().map(|k| k.len).sum()
    }
}

static SHELF: Mutex<Shelf> = Mutex::new(Shelf::new());

/// A kept mapping of exactly `len` bytes (a longer one trimmed), or `None`.
#[cfg(target_os = "linux")]
pub(super) fn take(len: usize) -> Option<*mut u8> {
    let (addr, have) = SHELF.try_lock().ok()?.take(len)?;
    if have > len {
        // SAFETY: the tail lies inside a kept mapping that no one uses.
        unsafe { libc::munmap((addr + len) as *mut libc::c_void, have - len) };
    }
    Some(addr as *mut u8)
}

#[cfg(not(target_os = "linux"))]
pub(super) fn take(_len: usize) -> Option<*mut u8> {
    None
}

/// Keeps the mapping at `ptr` of `len` bytes, or unmaps it (and unmaps the kept mappings
/// it displaces).
///
/// # Safety
/// `ptr` is a mapping of `len` bytes that no one uses any more.
#[cfg(target_os = "linux")]
pub(super) unsafe fn give(ptr: *mut u8, len: usize) {
    let mut evicted = [None; BLOCKS];
    match SHELF.try_lock() {
        Ok(mut shelf) => shelf.keep(ptr as usize, len, &mut evicted),
        Err(_) => evicted[0] = Some((ptr as usize, len)),
    }
    for (addr, len) in evicted.into_iter().flatten() {
        libc::munmap(addr as *mut libc::c_void, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn a_kept_mapping_serves_a_request_it_holds_and_not_one_half_its_size() {
        let mut s = Shelf::new();
        let mut ev = [None; BLOCKS];
        s.keep(0x1000_0000, 16 * MIB, &mut ev);
        assert_eq!(ev, [None; BLOCKS]);
        assert_eq!(s.take(20 * MIB), None, "too short");
        assert_eq!(s.take(8 * MIB), None, "more than twice as long");
        assert_eq!(s.take(10 * MIB), Some((0x1000_0000, 16 * MIB)));
        assert_eq!(s.bytes(), 0);
    }

    #[test]
    fn the_shortest_fitting_mapping_is_taken() {
        let mut s = Shelf::new();
        let mut ev = [None; BLOCKS];
        s.keep(0x1000_0000, 30 * MIB, &mut ev);
        s.keep(0x2000_0000, 22 * MIB, &mut ev);
        s.keep(0x3000_0000, 18 * MIB, &mut ev);
        assert_eq!(s.take(20 * MIB), Some((0x2000_0000, 22 * MIB)));
        assert_eq!(s.take(20 * MIB), Some((0x1000_0000, 30 * MIB)));
        assert_eq!(s.take(20 * MIB), None);
    }

    #[test]
    fn the_least_recently_freed_go_first_when_a_bound_is_reached() {
        let mut s = Shelf::new();
        let mut ev = [None; BLOCKS];
        for i in 0..BLOCKS {
            s.keep(0x1000_0000 * (i + 1), 8 * MIB, &mut ev);
        }
        assert_eq!(ev, [None; BLOCKS]);
        // A fifth block displaces the first freed.
        s.keep(0x9000_0000, 8 * MIB, &mut ev);
        assert_eq!(ev[0], Some((0x1000_0000, 8 * MIB)));
        assert_eq!(ev[1], None);
        // A block that needs most of the byte bound displaces every older one it must.
        let mut ev = [None; BLOCKS];
        s.keep(0xa000_0000, BYTES - 12 * MIB, &mut ev);
        let gone: Vec<_> = ev.iter().flatten().map(|&(a, _)| a).collect();
        assert_eq!(gone, vec![0x2000_0000, 0x3000_0000, 0x4000_0000]);
        assert!(s.bytes() <= BYTES);
        // A block beyond the bound is not kept at all.
        let mut ev = [None; BLOCKS];
        s.keep(0xb000_0000, BYTES + 2 * MIB, &mut ev);
        assert_eq!(ev[0], Some((0xb000_0000, BYTES + 2 * MIB)));
        assert!(s.bytes() <= BYTES);
    }
}
