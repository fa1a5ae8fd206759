//! A global allocator that starts every large block on a cache line.
//!
//! Purpose: the C library's allocator returns 16-byte aligned memory, and a block it maps
//! fresh from the system starts 16 bytes past a page. A dense operand stored there has
//! every row of 32 f32 values (128 bytes) straddle three cache lines instead of two, and
//! every 64-byte vector load of it split across two lines. A kernel gathering such rows
//! (SpMM's `X[j, :]`, SDDMM's `Y[j, :]`) then moves half as much memory again: Flickr
//! SpMM at K = 32 ran 1.7-2.1× slower on one thread; whether a buffer lands aligned
//! changed from one allocation to the next, so the same kernel ran at two speeds in one
//! process. [`LineAligned`] aligns
//! every block of at least [`LARGE`] bytes to [`LINE`] bytes, so every buffer Sparsile's
//! binaries allocate (operands read from files, converted values, outputs) starts on a
//! line.
//!
//! Blocks of at least [`HUGE`] bytes (on Linux) are mapped on their own, start on a
//! 2 MiB boundary and are marked `MADV_HUGEPAGE`: where transparent huge pages are
//! enabled for such regions (`madvise`, the common default, or `always`), the kernel
//! backs them with 2 MiB pages. Random gathers from a dense operand of tens of
//! megabytes (SpMM on a large graph) then miss the TLB far less: ogbn-arxiv and
//! Flickr SpMM ran 10-15 % faster. A freed huge block is kept for the next one of about
//! its size ([`kept_blocks`]), so a program that allocates a large result per call does
//! not fault in and clear fresh pages every time.
//!
//! Preconditions: install it as the program's `#[global_allocator]` (the `sparsile`
//! command and the Python extension do). Small blocks go to [`std::alloc::System`]
//! unchanged; large ones to the C library's `malloc`, `calloc`, `realloc` and `free`,
//! with the block's start stored in the 8 bytes before the aligned address. The layout
//! passed to `dealloc` and `realloc` is the one the block was allocated with (the
//! [`GlobalAlloc`] contract), so both sides agree on which kind a block is.
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: sparsile_runtime::LineAligned = sparsile_runtime::LineAligned;
//!
//! let v = vec![0.0f32; 1 << 20];
//! assert_eq!(v.as_ptr() as usize % sparsile_runtime::line_aligned_alloc::LINE, 0);
//! ```

use std::alloc::{GlobalAlloc, Layout, System};

pub mod kept_blocks;

/// The alignment of large blocks: one cache line (and one AVX-512 vector).
pub const LINE: usize = 64;

/// Blocks of at least this many bytes start on a line.
pub const LARGE: usize = 4096;

/// Blocks of at least this many bytes are mapped on their own, on huge pages where the
/// system allows (Linux).
pub const HUGE: usize = 8 << 20;

/// The size and alignment of a huge page.
const HUGE_PAGE: usize = 2 << 20;

/// The global allocator described in the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct LineAligned;

/// Whether a block of `layout` is a large one (allocated here rather than by `System`).
fn is_large(layout: Layout) -> bool {
    layout.size() >= LARGE && layout.align() <= LINE
}

/// Whether a block of `layout` is a huge one (a mapping of its own).
fn is_huge(layout: Layout) -> bool {
    cfg!(target_os = "linux") && layout.size() >= HUGE && layout.align() <= HUGE_PAGE
}

/// The length of the mapping holding `size` bytes: whole huge pages.
fn huge_len(size: usize) -> Option<usize> {
    Some(size.checked_add(HUGE_PAGE - 1)? & !(HUGE_PAGE - 1))
}

/// A fresh, zeroed mapping of `size` bytes starting on a huge-page boundary, marked for
/// huge pages; null when it cannot be mapped.
#[cfg(target_os = "linux")]
unsafe fn map_huge(size: usize) -> *mut u8 {
    let Some(len) = huge_len(size) else {
        return std::ptr::null_mut();
    };
    let Some(span) = len.checked_add(HUGE_PAGE) else {
        return std::ptr::null_mut();
    };
    let raw = libc::mmap(
        std::ptr::null_mut(),
        span,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    );
    if raw == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    // Keep the aligned `len` bytes, give back the rest on both sides.
    let addr = raw as usize;
    let start = (addr + HUGE_PAGE - 1) & !(HUGE_PAGE - 1);
    let head = start - addr;
    let tail = span - head - len;
    if head > 0 {
        libc::munmap(raw, head);
    }
    if tail > 0 {
        libc::munmap((start + len) as *mut libc::c_void, tail);
    }
    // Advice only: without transparent huge pages the block is ordinary pages.
    libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    start as *mut u8
}

#[cfg(not(target_os = "linux"))]
unsafe fn map_huge(_size: usize) -> *mut u8 {
    unreachable!("huge blocks are Linux's")
}

/// Gives back a block from [`map_huge`]: kept for a later huge block, or unmapped.
#[cfg(target_os = "linux")]
unsafe fn release_huge(ptr: *mut u8, size: usize) {
    if let Some(len) = huge_len(size) {
        kept_blocks::give(ptr, len);
    }
}

#[cfg(not(target_os = "linux"))]
unsafe fn release_huge(_ptr: *mut u8, _size: usize) {
    unreachable!("huge blocks are Linux's")
}

/// The block holding `size` bytes at a line boundary, with room for its start before it.
fn raw_size(size: usize) -> Option<usize> {
    size.checked_add(LINE)
}

/// The aligned address inside a block starting at `base` (at least 8 bytes past it).
fn aligned_in(base: *mut u8) -> *mut u8 {
    let addr = base as usize;
    let aligned = (addr + LINE) & !(LINE - 1);
    base.wrapping_add(aligned - addr)
}

/// Records `base` before `aligned` and returns `aligned`.
///
/// # Safety
/// `aligned` lies at least 8 bytes past `base` inside the block at `base`.
unsafe fn record(base: *mut u8, aligned: *mut u8) -> *mut u8 {
    debug_assert!(aligned as usize - base as usize >= 8);
    aligned
        .sub(8)
        .cast::<usize>()
        .write_unaligned(base as usize);
    aligned
}

/// The line-aligned address inside the C library's block at `base` (null stays null),
/// with `base` recorded before it.
///
/// # Safety
/// `base` is null or a live block of at least [`raw_size`] of the size asked for.
unsafe fn line_block(base: *mut u8) -> *mut u8 {
    if base.is_null() {
        return base;
    }
    record(base, aligned_in(base))
}

/// The start of the block that `aligned` (returned by `record`) lies in.
///
/// # Safety
/// `aligned` was returned by [`record`] and its block is live.
unsafe fn base_of(aligned: *mut u8) -> *mut u8 {
    aligned.sub(8).cast::<usize>().read_unaligned() as *mut u8
}

// SAFETY: small blocks are `System`'s, unchanged. A large block is `LINE + size` bytes
// from the C allocator; the pointer returned lies on a line boundary between 8 and
// `LINE` bytes past the block's start (malloc's blocks are at least 8-byte aligned), so
// `size` bytes fit after it, and the start recorded before it is what `free` and
// `realloc` are given. Whether a block is large depends only on its layout, which the
// caller passes back unchanged.
unsafe impl GlobalAlloc for LineAligned {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout) {
            // A kept mapping first: its pages are already there (its bytes are not
            // cleared, which `alloc` does not promise).
            return match huge_len(layout.size()).and_then(kept_blocks::take) {
                Some(p) => p,
                None => map_huge(layout.size()),
            };
        }
        if !is_large(layout) {
            return System.alloc(layout);
        }
        match raw_size(layout.size()) {
            Some(raw) => line_block(libc::malloc(raw).cast()),
            None => std::ptr::null_mut(),
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout) {
            // A fresh mapping reads as zeros; its pages are touched first by whoever
            // writes the block.
            return map_huge(layout.size());
        }
        if !is_large(layout) {
            return System.alloc_zeroed(layout);
        }
        // `calloc` skips clearing memory it maps fresh (already zero), so the kernel that
        // writes such a block first touches its pages, on its own threads.
        match raw_size(layout.size()) {
            Some(raw) => line_block(libc::calloc(1, raw).cast()),
            None => std::ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_huge(layout) {
            return release_huge(ptr, layout.size());
        }
        if !is_large(layout) {
            return System.dealloc(ptr, layout);
        }
        libc::free(base_of(ptr).cast());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        if is_huge(layout) || is_huge(new_layout) {
            return self.move_block(ptr, layout, new_layout);
        }
        match (is_large(layout), is_large(new_layout)) {
            (false, false) => System.realloc(ptr, layout, new_size),
            (true, true) => {
                let Some(raw) = raw_size(new_size) else {
                    return std::ptr::null_mut();
                };
                let base = base_of(ptr);
                let offset = ptr as usize - base as usize;
                let new_base = libc::realloc(base.cast(), raw).cast::<u8>();
                if new_base.is_null() {
                    return new_base; // the old block is untouched
                }
                // `realloc` kept the bytes at the same offset from the block's start;
                // move them to the new block's line boundary when that differs.
                let aligned = aligned_in(new_base);
                let new_offset = aligned as usize - new_base as usize;
                if new_offset != offset {
                    std::ptr::copy(new_base.add(offset), aligned, layout.size().min(new_size));
                }
                record(new_base, aligned)
            }
            // Between a small and a large block.
            _ => self.move_block(ptr, layout, new_layout),
        }
    }
}

impl LineAligned {
    /// A new block of `new_layout` holding the bytes of the block at `ptr` (as many as
    /// fit), which is freed; null (the old block untouched) when none can be had.
    ///
    /// # Safety
    /// `ptr` is a live block of `layout` from this allocator.
    unsafe fn move_block(&self, ptr: *mut u8, layout: Layout, new_layout: Layout) -> *mut u8 {
        let new = self.alloc(new_layout);
        if !new.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_layout.size()));
            self.dealloc(ptr, layout);
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn large_blocks_start_on_a_line_and_small_ones_are_the_systems() {
        let a = LineAligned;
        for size in [LARGE, LARGE + 3, 100_000, 3 << 20, 40 << 20] {
            for align in [1, 4, 8, 16, 64] {
                let l = layout(size, align);
                // SAFETY: a non-zero layout; the block is written within its size and
                // freed with the same layout.
                unsafe {
                    let p = a.alloc(l);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % LINE, 0, "size {size} align {align}");
                    p.write_bytes(0xab, size);
                    a.dealloc(p, l);
                    let z = a.alloc_zeroed(l);
                    assert_eq!(z as usize % LINE, 0);
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                    a.dealloc(z, l);
                }
            }
        }
        // Huge blocks start on a huge page and read as zeros.
        for size in [HUGE, HUGE + 1, 3 * HUGE + 4097] {
            let l = layout(size, 4);
            // SAFETY: as above.
            unsafe {
                let p = a.alloc_zeroed(l);
                assert!(!p.is_null());
                if cfg!(target_os = "linux") {
                    assert_eq!(p as usize % HUGE_PAGE, 0, "size {size}");
                }
                assert!(std::slice::from_raw_parts(p, size).iter().all(|&b| b == 0));
                p.add(size - 1).write(7);
                a.dealloc(p, l);
            }
        }
        // Over-aligned requests keep their own alignment.
        let l = layout(LARGE, 4096);
        // SAFETY: as above.
        unsafe {
            let p = a.alloc(l);
            assert_eq!(p as usize % 4096, 0);
            a.dealloc(p, l);
        }
    }

    #[test]
    fn realloc_keeps_the_bytes_across_every_kind_of_block() {
        let a = LineAligned;
        // Small → small → large → larger → huge → larger huge → large (shrunk) → small.
        let sizes = [
            16usize,
            1000,
            LARGE + 8,
            1 << 20,
            9 << 20,
            21 << 20,
            LARGE,
            200,
            24,
        ];
        let mut l = layout(sizes[0], 4);
        // SAFETY: every pointer is the live block of layout `l`; bytes are read and
        // written within its size.
        unsafe {
            let mut p = a.alloc(l);
            for i in 0..l.size() {
                *p.add(i) = (i % 251) as u8;
            }
            for &size in &sizes[1..] {
                let kept = l.size().min(size);
                p = a.realloc(p, l, size);
                assert!(!p.is_null());
                l = layout(size, 4);
                if is_large(l) {
                    assert_eq!(p as usize % LINE, 0);
                }
                for i in 0..kept {
                    assert_eq!(
                        *p.add(i),
                        (i % 251) as u8,
                        "byte {i} after growing to {size}"
                    );
                }
                for i in kept..size {
                    *p.add(i) = (i % 251) as u8;
                }
            }
            a.dealloc(p, l);
        }
    }

    #[test]
    fn a_freed_huge_block_is_reused_dirty_by_alloc_and_never_by_alloc_zeroed() {
        let a = LineAligned;
        let l = layout(HUGE + 5000, 8);
        // SAFETY: every block is written and read within its size and freed with its
        // layout.
        unsafe {
            for _ in 0..3 {
                let p = a.alloc(l);
                assert!(!p.is_null());
                if cfg!(target_os = "linux") {
                    assert_eq!(p as usize % HUGE_PAGE, 0);
                }
                p.write_bytes(0xcd, l.size());
                a.dealloc(p, l);
                // Whatever was kept, a zeroed block reads as zeros.
                let z = a.alloc_zeroed(l);
                assert!(std::slice::from_raw_parts(z, l.size())
                    .iter()
                    .all(|&b| b == 0));
                z.write_bytes(0xef, l.size());
                a.dealloc(z, l);
            }
            // A shorter huge block may take a kept one: trimmed, it is still written and
            // freed as its own size.
            let short = layout(HUGE, 8);
            let p = a.alloc(short);
            assert!(!p.is_null());
            p.write_bytes(1, short.size());
            a.dealloc(p, short);
        }
    }

    #[test]
    fn an_impossible_size_is_a_null_block_not_a_wrap() {
        let a = LineAligned;
        let l = layout(isize::MAX as usize / 2, 8);
        // SAFETY: a null result is checked; nothing is written.
        unsafe {
            assert!(a.alloc(l).is_null());
            assert!(a.alloc_zeroed(l).is_null());
        }
    }
}
