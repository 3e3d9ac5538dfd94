/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for lib/buf: the cap holds and a refused append changes
 * nothing, the content is a C string at every step, a burst's memory goes
 * back on reset (seen through the capacity), and running out of memory is
 * a clean error.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "support/run_suite.h"

START_TEST(new_buffer_is_an_empty_string_without_storage)
{
    struct ld_buf b;
    ld_buf_init(&b, 100);
    ck_assert_ptr_nonnull(b.data);
    ck_assert_str_eq(b.data, "");
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.cap, 0);
    ck_assert_int_eq(b.err, LD_OK);
    ck_assert_int_eq(ld_buf_append(&b, "x", 0), LD_OK);
    ck_assert_uint_eq(b.cap, 0);
    ld_buf_free(&b);
    ld_buf_free(NULL);
}
END_TEST

START_TEST(append_over_the_cap_is_refused_and_changes_nothing)
{
    struct ld_buf b;
    ld_buf_init(&b, 10);
    ck_assert_int_eq(ld_buf_append(&b, "hello", 5), LD_OK);
    ck_assert_int_eq(ld_buf_append(&b, "world!", 6), LD_ETOOBIG);
    ck_assert_str_eq(b.data, "hello");
    ck_assert_uint_eq(b.len, 5);
    ck_assert_int_eq(b.err, LD_ETOOBIG);
    /* The failure sticks until a reset, so a run of appends needs one check. */
    ck_assert_int_eq(ld_buf_append(&b, "x", 1), LD_ETOOBIG);
    ck_assert_str_eq(b.data, "hello");
    ld_buf_reset(&b);
    ck_assert_int_eq(b.err, LD_OK);
    ck_assert_int_eq(ld_buf_append(&b, "0123456789", 10), LD_OK);
    ck_assert_str_eq(b.data, "0123456789");
    ld_buf_free(&b);
}
END_TEST

START_TEST(storage_never_passes_the_cap)
{
    struct ld_buf b;
    char chunk[1000];
    memset(chunk, 'a', sizeof(chunk));
    ld_buf_init(&b, 5000);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(ld_buf_append(&b, chunk, sizeof(chunk)), LD_OK);
    ck_assert_uint_eq(b.len, 5000);
    /* Doubling would give 8192; the cap and its NUL are the whole need. */
    ck_assert_uint_eq(b.cap, 5001);
    ck_assert_int_eq(ld_buf_append(&b, "b", 1), LD_ETOOBIG);
    ld_buf_free(&b);
}
END_TEST

START_TEST(printf_over_the_cap_is_refused_and_changes_nothing)
{
    struct ld_buf b;
    ld_buf_init(&b, 20);
    ck_assert_int_eq(ld_buf_printf(&b, "%s=%d", "n", 42), LD_OK);
    ck_assert_str_eq(b.data, "n=42");
    ck_assert_int_eq(ld_buf_printf(&b, "%030d", 7), LD_ETOOBIG);
    ck_assert_str_eq(b.data, "n=42");
    ck_assert_uint_eq(b.len, 4);
    ld_buf_free(&b);
}
END_TEST

/* A format cut short in place writes past the content; a refusal must
 * leave the content ending where it did. */
START_TEST(refused_printf_into_a_full_block_keeps_the_nul)
{
    struct ld_buf b;
    char head[250];
    memset(head, 'a', sizeof(head));
    ld_buf_init(&b, 300);
    ck_assert_int_eq(ld_buf_append(&b, head, sizeof(head)), LD_OK);
    ck_assert_uint_gt(b.cap, b.len + 1); /* room for a cut try */
    ck_assert_int_eq(ld_buf_printf(&b, "%0100d", 1), LD_ETOOBIG);
    ck_assert_uint_eq(b.len, 250);
    ck_assert_uint_eq(strlen(b.data), 250);
    ld_buf_free(&b);
}
END_TEST

START_TEST(content_is_nul_terminated_at_every_step)
{
    struct ld_buf b;
    char expect[4096] = "";
    size_t n = 0;
    ld_buf_init(&b, sizeof(expect) - 1);
    for (int i = 0; i < 300; i++) {
        if (i % 2) {
            ck_assert_int_eq(ld_buf_printf(&b, "<%d>", i), LD_OK);
            n += (size_t)snprintf(expect + n, sizeof(expect) - n, "<%d>", i);
        } else {
            /* bytes without a NUL of their own */
            const char raw[3] = {'r', 'a', 'w'};
            ck_assert_int_eq(ld_buf_append(&b, raw, sizeof(raw)), LD_OK);
            n += (size_t)snprintf(expect + n, sizeof(expect) - n, "raw");
        }
        ck_assert_uint_eq(b.len, n);
        ck_assert_int_eq(b.data[b.len], '\0');
        ck_assert_str_eq(b.data, expect);
    }
    ld_buf_free(&b);
}
END_TEST

START_TEST(embedded_nuls_count_as_content)
{
    struct ld_buf b;
    ld_buf_init(&b, 16);
    ck_assert_int_eq(ld_buf_append(&b, "a\0b", 3), LD_OK);
    ck_assert_uint_eq(b.len, 3);
    ck_assert_int_eq(memcmp(b.data, "a\0b", 4), 0);
    ld_buf_free(&b);
}
END_TEST

START_TEST(reset_gives_back_the_memory_of_a_burst)
{
    struct ld_buf b;
    size_t big = 1024 * 1024;
    char *chunk = calloc(1, big);
    ck_assert_ptr_nonnull(chunk);
    ld_buf_init(&b, 16 * big);
    ck_assert_int_eq(ld_buf_append(&b, chunk, big), LD_OK);
    ck_assert_uint_gt(b.cap, big);
    ld_buf_reset(&b);
    ck_assert_uint_eq(b.cap, 0);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_str_eq(b.data, "");

    /* Usable again, and it grows from small. */
    ck_assert_int_eq(ld_buf_append(&b, "small", 5), LD_OK);
    ck_assert_uint_le(b.cap, LD_BUF_KEEP);
    ck_assert_str_eq(b.data, "small");
    free(chunk);
    ld_buf_free(&b);
}
END_TEST

START_TEST(reset_keeps_a_small_block_for_reuse)
{
    struct ld_buf b;
    ld_buf_init(&b, 1 << 20);
    ck_assert_int_eq(ld_buf_printf(&b, "%s", "a line of an ordinary size"), LD_OK);
    size_t cap = b.cap;
    char *block = b.data;
    ck_assert_uint_gt(cap, 0);
    ck_assert_uint_le(cap, LD_BUF_KEEP);
    ld_buf_reset(&b);
    ck_assert_uint_eq(b.cap, cap);
    ck_assert_ptr_eq(b.data, block);
    ck_assert_str_eq(b.data, "");
    ld_buf_free(&b);
    ck_assert_uint_eq(b.cap, 0);
}
END_TEST

START_TEST(take_hands_the_string_over_and_empties_the_buffer)
{
    struct ld_buf b;
    ld_buf_init(&b, 64);
    char *s = ld_buf_take(&b);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s, "");
    free(s);

    ck_assert_int_eq(ld_buf_printf(&b, "%d apples", 3), LD_OK);
    s = ld_buf_take(&b);
    ck_assert_str_eq(s, "3 apples");
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.cap, 0);
    ck_assert_str_eq(b.data, "");
    ck_assert_uint_eq(b.max, 64);
    free(s);
    ld_buf_free(&b);
}
END_TEST

/* AddressSanitizer reserves its shadow memory up front and aborts on a
 * failed allocation, so its build leaves this test out. */
#if !defined(__SANITIZE_ADDRESS__)
/* Exit status of the child in out_of_memory_is_a_clean_error: which
 * check failed, 0 when none did. */
static int oom_child(void)
{
    size_t chunk_len = 64u << 20;
    char *chunk = calloc(1, chunk_len);
    struct ld_buf b;
    struct rlimit lim;
    long pages = 0;
    int rc = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    ld_buf_init(&b, 2 * chunk_len);
    char line[128];
    char *end = line;
    if (f && fgets(line, sizeof(line), f))
        pages = strtol(line, &end, 10);
    if (!chunk || end == line || pages <= 0) {
        rc = 1;
        goto out;
    }
    if (ld_buf_append(&b, "kept", 4) != LD_OK) {
        rc = 2;
        goto out;
    }
    /* Room for a little more than what is mapped now, far from the block
     * the chunk needs. */
    lim.rlim_cur = lim.rlim_max =
        (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (16u << 20);
    if (setrlimit(RLIMIT_AS, &lim) != 0)
        rc = 3;
    else if (ld_buf_append(&b, chunk, chunk_len) != LD_ENOMEM)
        rc = 4;
    else if (b.len != 4 || strcmp(b.data, "kept") != 0 || b.err != LD_ENOMEM)
        rc = 5;
    else if (ld_buf_printf(&b, "more") != LD_ENOMEM)
        rc = 6;
out:
    if (f)
        fclose(f);
    ld_buf_free(&b);
    free(chunk);
    return rc;
}

/* In a child of its own, whose address space is then limited: the
 * allocator's failure must come back as LD_ENOMEM with the content as it
 * was. */
START_TEST(out_of_memory_is_a_clean_error)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(oom_child());
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST
#endif

static Suite *buf_suite(void)
{
    Suite *s = suite_create("buf");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, new_buffer_is_an_empty_string_without_storage);
    tcase_add_test(tc, append_over_the_cap_is_refused_and_changes_nothing);
    tcase_add_test(tc, storage_never_passes_the_cap);
    tcase_add_test(tc, printf_over_the_cap_is_refused_and_changes_nothing);
    tcase_add_test(tc, refused_printf_into_a_full_block_keeps_the_nul);
    tcase_add_test(tc, content_is_nul_terminated_at_every_step);
    tcase_add_test(tc, embedded_nuls_count_as_content);
    tcase_add_test(tc, reset_gives_back_the_memory_of_a_burst);
    tcase_add_test(tc, reset_keeps_a_small_block_for_reuse);
    tcase_add_test(tc, take_hands_the_string_over_and_empties_the_buffer);
#if !defined(__SANITIZE_ADDRESS__)
    tcase_add_test(tc, out_of_memory_is_a_clean_error);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(buf_suite());
}
