//! The allocator of the `hearth` command: mimalloc. The fan-out allocates and frees small
//! buffers for every push, where glibc's malloc took about a tenth of the server's time at
//! 19,000 connections; with mimalloc, chat at 19,000 connections went from p50 650 ms to 10 ms
//! on the same machine (BENCHMARKS.md §11).
//!
//! mimalloc keeps freed pages for a while before it gives them back to the system; glibc
//! unmaps a large block as soon as it is freed. A burst of large pushes that the answer budget
//! refuses must not leave the process holding their memory (the budget is what bounds it), so
//! [`return_freed_memory_at_once`] sets the delay to zero.
//!
//! It also turns transparent huge pages off for the process. mimalloc asks the kernel for
//! them on its arenas (`MADV_HUGEPAGE`), so a 2 MiB page stays resident while any 4 KiB of it
//! is in use, and a purge of less than a whole huge page gives nothing back: loading a 9.6 MB
//! document left 1.42× its JSON resident against 1.01× without (a buffer grown to 16 MB and
//! freed left 6.3 MB behind, 0.4 MB without). BENCHMARKS.md §9.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay`: its position in `mi_option_e` of the version in Cargo.lock
/// (`libmimalloc-sys` does not name it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// `mi_option_allow_thp` (mimalloc 3.3), likewise.
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// Makes the allocator return freed memory to the system at once, and keeps the process off
/// transparent huge pages. Call it first in `main`.
pub fn return_freed_memory_at_once() {
    // SAFETY: `mi_option_set` only stores a value in the allocator's table of options; any
    // value is valid for these options, and the call has no other precondition.
    // `prctl(PR_SET_THP_DISABLE, 1)` sets a flag of this process that the kernel reads when
    // it backs a page; it touches no memory of ours. Its failure (an old kernel) leaves the
    // huge pages on, which costs memory, not correctness, so its result is not needed.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
        // mimalloc read this option when it started, before `main`: the arena it reserved
        // then is already marked for huge pages, which only the process-wide flag undoes.
        libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0);
        let (on, unused): (libc::c_ulong, libc::c_ulong) = (1, 0);
        libc::prctl(libc::PR_SET_THP_DISABLE, on, unused, unused, unused);
    }
}
