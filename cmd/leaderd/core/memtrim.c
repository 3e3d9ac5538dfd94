/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memtrim: allocator limits and give-back after peaks (the allocator parts
 * are glibc's; with another C library they do nothing and its own policy
 * applies: musl's, the image's, unmaps freed pages by itself), and the
 * page-table entries of start-up code dropped once (any C library).
 */
#include "memtrim.h"

#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h> /* defines __GLIBC__ (features.h) for the tests below */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "clock.h"

/* Monotonic ms of ld_memtrim_setup: start-up is over STARTUP_MS later. */
static int64_t setup_ms;

void ld_memtrim_setup(void)
{
    setup_ms = ld_mono_ms();
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

/* Where a segment's virtual address lies in memory: the loader reports the
 * object's base as an integer. */
static char *loaded_at(const struct dl_phdr_info *obj, ElfW(Addr) vaddr)
{
    return (char *)(obj->dlpi_addr + vaddr);
}

/* True when obj patches its own code at load time (text relocations): its
 * read-only pages may then differ from the file and must stay as they are. */
static bool has_textrel(const struct dl_phdr_info *obj)
{
    for (int i = 0; i < obj->dlpi_phnum; i++) {
        if (obj->dlpi_phdr[i].p_type != PT_DYNAMIC)
            continue;
        const ElfW(Dyn) *d = (const ElfW(Dyn) *)loaded_at(obj, obj->dlpi_phdr[i].p_vaddr);
        for (size_t k = 0; k < 4096 && d[k].d_tag != DT_NULL; k++) {
            if (d[k].d_tag == DT_TEXTREL)
                return true;
            if (d[k].d_tag == DT_FLAGS && (d[k].d_un.d_val & DF_TEXTREL))
                return true;
        }
    }
    return false;
}

static int drop_object(struct dl_phdr_info *obj, size_t size, void *page_size)
{
    (void)size;
    uintptr_t page = *(const uintptr_t *)page_size;
    /* The vDSO is the kernel's, not a file mapping. */
    if (obj->dlpi_name && strncmp(obj->dlpi_name, "linux-", 6) == 0)
        return 0;
    if (has_textrel(obj))
        return 0;
    for (int i = 0; i < obj->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &obj->dlpi_phdr[i];
        /* Never written, so every page is the file's: dropping the entry
         * loses nothing, the next use maps the page again. Writable
         * segments (and RELRO, which is one until start-up ends) hold data
         * that exists nowhere else. */
        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W))
            continue;
        char *start = loaded_at(obj, ph->p_vaddr);
        char *end = start + ph->p_memsz;
        /* Whole pages inside the segment only. */
        uintptr_t head = (uintptr_t)start % page;
        if (head)
            start += page - head;
        end -= (uintptr_t)end % page;
        if (end > start)
            madvise(start, (size_t)(end - start), MADV_DONTNEED);
    }
    return 0;
}

void ld_memtrim_drop_startup_code(void)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t page_size = page > 0 ? (uintptr_t)page : 4096;
    dl_iterate_phdr(drop_object, &page_size);
}

void ld_memtrim_idle(void)
{
    static bool dropped;
    int64_t now = ld_mono_ms();
    if (!dropped && now - setup_ms >= LD_MEMTRIM_STARTUP_MS) {
        dropped = true;
        ld_memtrim_drop_startup_code();
    }
#if defined(__GLIBC__)
    /* Free chunks between live ones are never trimmed by free(); only
     * malloc_trim walks the bins and returns their whole pages. A trimmed
     * chunk still counts as free, so the free total alone cannot say whether
     * its pages came back: trim at once when it grew by LD_MEMTRIM_KEEP
     * since the last trim (a peak just passed), else at most every
     * LD_MEMTRIM_EVERY_MS (chunks reused and freed again). */
    static size_t free_at_trim;
    static int64_t trimmed_ms;
    struct mallinfo2 mi = mallinfo2();
    if (mi.fordblks <= LD_MEMTRIM_KEEP)
        return;
    if (mi.fordblks > free_at_trim + LD_MEMTRIM_KEEP ||
        now - trimmed_ms >= LD_MEMTRIM_EVERY_MS) {
        malloc_trim(0);
        free_at_trim = mallinfo2().fordblks;
        trimmed_ms = now;
    }
#endif
}
