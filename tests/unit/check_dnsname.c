/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_dnsname: the DNS-1123 label and subdomain rules at their edges
 * (63/64 bytes, 253/254 in all, '-' and '.' at either end, empty parts,
 * case, digits), and against apimachinery's own regular expressions on
 * every short string over an alphabet that reaches each branch.
 */
#include <check.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

#include "dnsname.h"
#include "support/run_suite.h"

/* n copies of c followed by tail, in buf (size bytes). */
static const char *fill(char *buf, size_t size, char c, size_t n, const char *tail)
{
    ck_assert_uint_lt(n + strlen(tail), size);
    memset(buf, c, n);
    snprintf(buf + n, size - n, "%s", tail);
    return buf;
}

START_TEST(label_length_edges)
{
    char b[300];
    ck_assert(ld_dns1123_label(fill(b, sizeof(b), 'a', 1, "")));
    ck_assert(ld_dns1123_label(fill(b, sizeof(b), 'a', 63, "")));
    ck_assert(!ld_dns1123_label(fill(b, sizeof(b), 'a', 64, "")));
    ck_assert(!ld_dns1123_label(fill(b, sizeof(b), 'a', 254, "")));
    ck_assert(!ld_dns1123_label(""));
    ck_assert(!ld_dns1123_label(NULL));
}
END_TEST

START_TEST(label_shape)
{
    static const char *const good[] = {"a",    "0",       "123",     "a-b",
                                       "a--b", "my-name", "123-abc", "kube-system"};
    static const char *const bad[] = {"-a",  "a-",  "-",   "A",   "aB",
                                      "a.b", "a_b", "a b", "a/b", "\xc3\xa4"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        ck_assert_msg(ld_dns1123_label(good[i]), "%s refused", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!ld_dns1123_label(bad[i]), "%s accepted", bad[i]);
}
END_TEST

START_TEST(subdomain_total_length_edges)
{
    char b[300];
    ck_assert(ld_dns1123_subdomain(fill(b, sizeof(b), 'a', 253, "")));
    ck_assert(!ld_dns1123_subdomain(fill(b, sizeof(b), 'a', 254, "")));
    /* 249 + ".b.c" = 253, then one more. */
    ck_assert(ld_dns1123_subdomain(fill(b, sizeof(b), 'a', 249, ".b.c")));
    ck_assert(!ld_dns1123_subdomain(fill(b, sizeof(b), 'a', 250, ".b.c")));
    ck_assert(!ld_dns1123_subdomain(""));
    ck_assert(!ld_dns1123_subdomain(NULL));
}
END_TEST

START_TEST(subdomain_parts_longer_than_a_label)
{
    char b[300];
    /* IsDNS1123Subdomain bounds only the total; a part of 64 or more is fine. */
    ck_assert(ld_dns1123_subdomain(fill(b, sizeof(b), 'a', 63, ".b")));
    ck_assert(ld_dns1123_subdomain(fill(b, sizeof(b), 'a', 64, ".b")));
    ck_assert(ld_dns1123_subdomain(fill(b, sizeof(b), 'a', 64, "")));
    ck_assert(ld_dns1123_subdomain(fill(b, sizeof(b), '7', 200, ".x-y.z")));
}
END_TEST

START_TEST(subdomain_shape)
{
    static const char *const good[] = {"a",   "a.b",   "example.com", "a-b.c-d",
                                       "0.0", "1.2.3", "123",         "a--b.c"};
    static const char *const bad[] = {".a",   "a.",   ".",   "a..b", "-a.b", "a-.b",
                                      "a.-b", "a.b-", "A.b", "a.B",  "a_b",  "a/b",
                                      "a b",  "a.b.", "..",  "a:b"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        ck_assert_msg(ld_dns1123_subdomain(good[i]), "%s refused", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!ld_dns1123_subdomain(bad[i]), "%s accepted", bad[i]);
}
END_TEST

/* apimachinery's dns1123LabelFmt and dns1123SubdomainFmt, anchored. */
#define LABEL_RE "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
#define SUBDOMAIN_RE LABEL_RE "(\\." LABEL_RE ")*"

START_TEST(agrees_with_apimachinery_regexps)
{
    static const char alphabet[] = "a0-.A_";
    const size_t k = sizeof(alphabet) - 1;
    regex_t label, sub;
    ck_assert_int_eq(regcomp(&label, "^" LABEL_RE "$", REG_EXTENDED | REG_NOSUB), 0);
    ck_assert_int_eq(regcomp(&sub, "^" SUBDOMAIN_RE "$", REG_EXTENDED | REG_NOSUB), 0);
    char s[8];
    size_t checked = 0;
    /* Every string of 1..5 symbols: 6 + 36 + ... + 7776 cases. */
    for (size_t len = 1; len <= 5; len++) {
        size_t total = 1;
        for (size_t i = 0; i < len; i++)
            total *= k;
        for (size_t n = 0; n < total; n++) {
            size_t v = n;
            for (size_t i = 0; i < len; i++, v /= k)
                s[i] = alphabet[v % k];
            s[len] = '\0';
            bool want_label = regexec(&label, s, 0, NULL, 0) == 0;
            bool want_sub = regexec(&sub, s, 0, NULL, 0) == 0;
            ck_assert_msg(ld_dns1123_label(s) == want_label, "label \"%s\"", s);
            ck_assert_msg(ld_dns1123_subdomain(s) == want_sub, "subdomain \"%s\"", s);
            checked++;
        }
    }
    regfree(&label);
    regfree(&sub);
    ck_assert_uint_eq(checked, 6 + 36 + 216 + 1296 + 7776);
}
END_TEST

static Suite *dnsname_suite(void)
{
    Suite *s = suite_create("dnsname");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, label_length_edges);
    tcase_add_test(tc, label_shape);
    tcase_add_test(tc, subdomain_total_length_edges);
    tcase_add_test(tc, subdomain_parts_longer_than_a_label);
    tcase_add_test(tc, subdomain_shape);
    tcase_add_test(tc, agrees_with_apimachinery_regexps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(dnsname_suite());
}
