/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_lease: ld_lease_decode on arbitrary bytes. Whatever decodes must
 * satisfy the decoder's promises, survive ld_lease_copy, and survive an
 * encode -> decode round trip unchanged (a leader rewrites every Lease it
 * read, so a lossy round trip would silently change the election record).
 */
#include "fuzz.h"

#include <jansson.h>

#include "lease.h"

static bool str_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

static void check_decoded(const struct ld_lease *l)
{
    FUZZ_CHECK(l->name && l->name[0] != '\0');
    FUZZ_CHECK(l->namespace_ != NULL);
    FUZZ_CHECK(l->spec.holder != NULL);
    FUZZ_CHECK(strlen(l->spec.holder) <= LD_LEASE_MAX_HOLDER);
    FUZZ_CHECK(l->spec.duration_s >= 0);
    FUZZ_CHECK(l->spec.transitions >= 0);
    FUZZ_CHECK(json_is_object(l->object));
    FUZZ_CHECK(l->spec.has_acquire || l->spec.acquire_us == 0);
    FUZZ_CHECK(l->spec.has_renew || l->spec.renew_us == 0);
}

static void check_same(const struct ld_lease *a, const struct ld_lease *b)
{
    FUZZ_CHECK(str_eq(a->name, b->name));
    FUZZ_CHECK(str_eq(a->namespace_, b->namespace_));
    FUZZ_CHECK(str_eq(a->resource_version, b->resource_version));
    FUZZ_CHECK(ld_lease_spec_equal(&a->spec, &b->spec));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ld_lease l, again, copy;
    struct ld_errinfo err;
    char *text = NULL, *text2 = NULL;

    ld_lease_init(&l);
    ld_lease_init(&again);
    ld_lease_init(&copy);
    ld_errinfo_clear(&err);
    if (ld_lease_decode((const char *)data, size, &l, &err) != LD_OK) {
        /* On error the output is left cleared and the reason is named. */
        FUZZ_CHECK(l.name == NULL && l.spec.holder == NULL && l.object == NULL);
        FUZZ_CHECK(err.code != LD_OK && err.msg[0] != '\0');
        FUZZ_CHECK(memchr(err.msg, '\0', sizeof err.msg) != NULL);
        goto out;
    }
    check_decoded(&l);

    FUZZ_CHECK(ld_lease_copy(&copy, &l) == LD_OK);
    check_same(&l, &copy);

    /* Re-decoding a lease from its own stored object is allowed. */
    FUZZ_CHECK(ld_lease_from_json(copy.object, &copy, &err) == LD_OK);
    check_decoded(&copy);
    check_same(&l, &copy);

    text = ld_lease_encode(&l);
    FUZZ_CHECK(text != NULL);
    ld_errinfo_clear(&err);
    if (ld_lease_decode(text, strlen(text), &again, &err) != LD_OK) {
        fprintf(stderr, "re-decode failed: %s\nencoded: %.2000s\n", err.msg, text);
        FUZZ_CHECK(!"encode -> decode failed");
    }
    check_decoded(&again);
    check_same(&l, &again);

    /* A second round trip must be a fixed point, byte for byte. */
    text2 = ld_lease_encode(&again);
    FUZZ_CHECK(text2 != NULL);
    FUZZ_CHECK(strcmp(text, text2) == 0);
out:
    free(text);
    free(text2);
    ld_lease_clear(&l);
    ld_lease_clear(&again);
    ld_lease_clear(&copy);
    return 0;
}
