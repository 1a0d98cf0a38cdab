//! What a piece of code allocates at its peak, for the tests that hold the
//! codecs to their estimates: the unit tests' allocator counts the bytes
//! each thread holds, so tests running side by side do not count each
//! other's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system's allocator, counting.
struct Counting;

#[global_allocator]
static COUNTING: Counting = Counting;

thread_local! {
    /// Bytes this thread holds now (what it freed of another thread's is
    /// not taken off).
    static HELD: Cell<usize> = const { Cell::new(0) };
    /// The most it held since [`peak_of`] started counting.
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grew(bytes: usize) {
    let _ = HELD.try_with(|held| {
        held.set(held.get() + bytes);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(held.get())));
    });
}

fn shrank(bytes: usize) {
    let _ = HELD.try_with(|held| held.set(held.get().saturating_sub(bytes)));
}

// SAFETY: every call goes to the system's allocator as it came; the
// counters beside it are plain numbers of this thread, which allocate
// nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller promised for `layout`.
        let memory = unsafe { System.alloc(layout) };
        if !memory.is_null() {
            grew(layout.size());
        }
        memory
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller promised for `layout`.
        let memory = unsafe { System.alloc_zeroed(layout) };
        if !memory.is_null() {
            grew(layout.size());
        }
        memory
    }

    unsafe fn dealloc(&self, memory: *mut u8, layout: Layout) {
        // SAFETY: as the caller promised for `memory` and `layout`.
        unsafe { System.dealloc(memory, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, memory: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        // SAFETY: as the caller promised for `memory`, `layout` and `size`.
        let moved = unsafe { System.realloc(memory, layout, size) };
        if !moved.is_null() {
            // Both are held for a moment when the block moves.
            grew(size);
            shrank(layout.size());
        }
        moved
    }
}

/// What `work` returns, and the most bytes this thread held at once while
/// it ran beyond what it held before.
pub(crate) fn peak_of<T>(work: impl FnOnce() -> T) -> (T, u64) {
    let before = HELD.with(Cell::get);
    PEAK.with(|peak| peak.set(before));
    let result = work();
    let peak = PEAK.with(Cell::get);
    (result, (peak - before) as u64)
}
