//! The allocator of the `hearth` command: mimalloc. The fan-out allocates and frees small
//! buffers for every push, where glibc's malloc took about a tenth of the server's time at
//! 19,000 connections; with mimalloc, chat at 19,000 connections went from p50 650 ms to 10 ms
//! on the same machine (BENCHMARKS.md §11).
//!
//! mimalloc keeps freed pages for a while before it gives them back to the system; glibc
//! unmaps a large block as soon as it is freed. A burst of large pushes that the answer budget
//! refuses must not leave the process holding their memory (the budget is what bounds it), so
//! [`return_freed_memory_at_once`] sets the delay to zero.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay`: its position in `mi_option_e` of the version in Cargo.lock
/// (`libmimalloc-sys` does not name it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Makes the allocator return freed memory to the system at once. Call it first in `main`.
pub fn return_freed_memory_at_once() {
    // SAFETY: `mi_option_set` only stores a value in the allocator's table of options; any
    // value is valid for this option, and the call has no other precondition.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
    }
}
