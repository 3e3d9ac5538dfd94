/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for cmd/leaderd/memtrim: dropping the read-only segments' pages
 * lowers this process's file-backed RSS and leaves its code working, and an
 * idle pass after a peak of freed-but-pinned heap gives the pages back.
 * Figures come from /proc/self/status.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cmd/leaderd/core/memtrim.h"
#include "support/run_suite.h"

/* A kB figure of /proc/self/status ("RssFile", "RssAnon"), -1 if absent. */
static long status_kb(const char *field)
{
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            kb = strtol(line + n + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

START_TEST(drop_lowers_file_rss_and_code_still_runs)
{
    long before = status_kb("RssFile");
    ck_assert_int_gt(before, 0);
    ld_memtrim_drop_startup_code();
    long after = status_kb("RssFile");
    /* Check, libc and the test itself were all mapped; most of that goes. */
    ck_assert_msg(after < before, "RssFile %ld kB -> %ld kB", before, after);
    /* Every page comes back on use: the same code and constants still work. */
    char buf[64];
    snprintf(buf, sizeof(buf), "%s %d", "dropped", 42);
    ck_assert_str_eq(buf, "dropped 42");
    ck_assert_int_eq(status_kb("RssFile") > 0, 1);
}
END_TEST

#if !defined(__SANITIZE_ADDRESS__) && defined(__GLIBC__)
enum { BLOCKS = 512, BLOCK = 8 * 1024 };

START_TEST(idle_gives_back_a_pinned_peak)
{
    static char *blocks[BLOCKS];
    ld_memtrim_setup();
    long base = status_kb("RssAnon");
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = malloc(BLOCK);
        ck_assert_ptr_nonnull(blocks[i]);
        memset(blocks[i], 'x', BLOCK);
    }
    /* Every 16th block stays, so no free can shrink the heap from the top:
     * only a trim returns the pages between them. */
    for (int i = 0; i < BLOCKS; i++)
        if (i % 16 != 0) {
            free(blocks[i]);
            blocks[i] = NULL;
        }
    long peak = status_kb("RssAnon");
    ck_assert_msg(peak > base + 3 * 1024, "peak %ld kB over base %ld kB", peak, base);
    ld_memtrim_idle();
    long after = status_kb("RssAnon");
    /* 4 MiB were allocated, 3.75 MiB freed: at least 3 MiB must come back. */
    ck_assert_msg(after < peak - 3 * 1024, "RssAnon base %ld, peak %ld, after %ld kB",
                  base, peak, after);
    for (int i = 0; i < BLOCKS; i++)
        free(blocks[i]);
}
END_TEST
#endif

static Suite *memtrim_suite(void)
{
    Suite *s = suite_create("memtrim");
    TCase *tc = tcase_create("memtrim");
    tcase_add_test(tc, drop_lowers_file_rss_and_code_still_runs);
#if !defined(__SANITIZE_ADDRESS__) && defined(__GLIBC__)
    /* ASan's allocator has its own heap: glibc's trim does not apply. */
    tcase_add_test(tc, idle_gives_back_a_pinned_peak);
#endif
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* In a forked child the code is not mapped yet (fork copies no page
     * tables of file mappings): the drop would have nothing to take. */
    setenv("CK_FORK", "no", 1);
    return ld_test_run(memtrim_suite());
}
