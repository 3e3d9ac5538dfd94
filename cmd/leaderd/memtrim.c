/*
 * memtrim: allocator limits and give-back after peaks (glibc; with another C
 * library both calls do nothing and its own policy applies).
 */
#include "memtrim.h"

#include <stdlib.h> /* defines __GLIBC__ (features.h) for the test below */
#if defined(__GLIBC__)
#include <malloc.h>
#endif

void ld_memtrim_setup(void)
{
#if defined(__GLIBC__)
    /* glibc raises its mmap threshold to the size of each large block freed,
     * so a single odd megabyte-sized response (a hostile Lease, an error
     * page) would be served from the heap ever after and kept there. A fixed
     * threshold sends large blocks to mmap and back to the kernel when freed. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    /* One arena: the few threads (loop, HTTP server, notifier, curl's short
     * resolver) contend little, and each extra arena keeps its own slack. */
    mallopt(M_ARENA_MAX, 1);
#endif
}

void ld_memtrim_idle(void)
{
#if defined(__GLIBC__)
    /* Free chunks between live ones are never trimmed by free(); only
     * malloc_trim walks the bins and returns their whole pages. Counting the
     * free bytes first keeps the common, nothing-to-do case cheap. */
    struct mallinfo2 mi = mallinfo2();
    if (mi.fordblks > LD_MEMTRIM_KEEP)
        malloc_trim(0);
#endif
}
