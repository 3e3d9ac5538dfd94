/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_watch: the watch-stream line splitter and event decoder
 * (ld_watch_feed). The same bytes fed at once and fed in arbitrary pieces
 * must give the same events, one per complete non-blank line, each
 * well-formed for its type; an unfinished last line must stay buffered.
 *
 * Input: one byte seeding the chunk sizes, then the stream. When that byte
 * has its top bit set, the stream follows a line longer than
 * LD_WATCH_MAX_LINE, so the skip path runs.
 *
 * That line is fed through the real decoder once, at start-up, under
 * several chunkings; each run then starts from a copy of the state it left.
 * Feeding megabytes per run made this target about a hundred times slower
 * than the others (the prefix runs took 9 ms each, over half of all time)
 * and the decoder keeps no state outside struct ld_watch_decoder, so the
 * copy is the same decoder the long line would have left.
 */
#include "fuzz.h"

#include "watch.h"

/* What the callback saw, as text, so two runs compare with strcmp. */
struct log {
    char *p;
    size_t len, cap;
    size_t events;
};

/* The decoder after the over-long line, once per way of feeding it; all
 * must agree (see LLVMFuzzerInitialize). [0] had the line in one piece. */
#define PREFIX_WAYS 7
static struct ld_watch_decoder after_prefix[PREFIX_WAYS];
static char *prefix_log; /* the events the long line gave, as on_event logs them */

static void log_add(struct log *l, const char *s)
{
    size_t n = strlen(s);

    if (l->len + n + 1 > l->cap) {
        size_t cap = l->cap ? l->cap : 1024;
        while (cap < l->len + n + 1)
            cap *= 2;
        char *np = realloc(l->p, cap);
        FUZZ_CHECK(np != NULL);
        l->p = np;
        l->cap = cap;
    }
    memcpy(l->p + l->len, s, n + 1);
    l->len += n;
}

static void check_errinfo(const struct ld_errinfo *e)
{
    FUZZ_CHECK(e->code != LD_OK);
    FUZZ_CHECK(memchr(e->msg, '\0', sizeof e->msg) != NULL);
    FUZZ_CHECK(memchr(e->reason, '\0', sizeof e->reason) != NULL);
}

static void on_event(void *ctx, const struct ld_watch_event *ev)
{
    struct log *l = ctx;
    char head[512];
    char *enc = NULL;

    l->events++;
    switch (ev->type) {
    case LD_WATCH_ADDED:
    case LD_WATCH_MODIFIED:
    case LD_WATCH_DELETED:
        FUZZ_CHECK(ev->lease != NULL && ev->lease->name && ev->lease->spec.holder);
        FUZZ_CHECK(ev->resource_version == ev->lease->resource_version);
        enc = ld_lease_encode(ev->lease);
        FUZZ_CHECK(enc != NULL);
        break;
    case LD_WATCH_BOOKMARK:
        FUZZ_CHECK(ev->lease == NULL && ev->resource_version != NULL);
        break;
    case LD_WATCH_ERROR:
        FUZZ_CHECK(ev->lease == NULL);
        check_errinfo(&ev->error);
        break;
    case LD_WATCH_INVALID:
        FUZZ_CHECK(ev->lease == NULL);
        check_errinfo(&ev->error);
        FUZZ_CHECK(ev->error.msg[0] != '\0');
        break;
    default:
        FUZZ_CHECK(!"unknown event type");
    }
    snprintf(head, sizeof head, "%d %d %ld %lld [%s] [%s] rv=%.100s ", (int)ev->type,
             (int)ev->error.code, ev->error.http_status,
             (long long)ev->error.retry_after_ms, ev->error.reason, ev->error.msg,
             ev->resource_version ? ev->resource_version : "(null)");
    log_add(l, head);
    log_add(l, enc ? enc : "-");
    log_add(l, "\n");
    free(enc);
}

/* Events the stream must produce: one per complete line that is not empty
 * once trailing CR and spaces are cut; the first line is swallowed by the
 * over-long prefix when there is one. */
static size_t expected_events(const char *s, size_t n, bool prefix)
{
    size_t count = prefix ? 1 : 0, start = 0;
    bool first = true;

    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\n')
            continue;
        size_t end = i;
        while (end > start && (s[end - 1] == '\r' || s[end - 1] == ' '))
            end--;
        if (end > start && !(first && prefix))
            count++;
        first = false;
        start = i + 1;
    }
    return count;
}

/* Feeds data in pieces whose sizes come from a small xorshift generator. */
static void feed(struct ld_watch_decoder *d, const char *data, size_t size, uint32_t seed,
                 struct log *l)
{
    uint32_t x = seed | 1u;

    while (size > 0) {
        size_t piece = size;
        if (seed != 0) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            piece = 1 + x % (x & 0x100 ? 4u : 64u);
            if (piece > size)
                piece = size;
        }
        FUZZ_CHECK(ld_watch_feed(d, data, piece, on_event, l) == LD_OK);
        data += piece;
        size -= piece;
    }
}

/* A decoder in the state of src, with a buffer of its own. */
static void decoder_copy(struct ld_watch_decoder *dst, const struct ld_watch_decoder *src)
{
    *dst = *src;
    if (src->line.cap) {
        dst->line.data = malloc(src->line.cap);
        FUZZ_CHECK(dst->line.data != NULL);
        memcpy(dst->line.data, src->line.data, src->line.len + 1);
    }
}

static void run(const char *data, size_t size, uint32_t seed, bool prefix, struct log *l,
                size_t *pending)
{
    struct ld_watch_decoder d;

    ld_watch_decoder_init(&d);
    if (prefix) {
        decoder_copy(&d, &after_prefix[seed % PREFIX_WAYS]);
        log_add(l, prefix_log);
        l->events++;
    }
    feed(&d, data, size, seed, l);
    *pending = d.skipping ? SIZE_MAX : d.line.len;
    ld_watch_decoder_reset(&d);
    FUZZ_CHECK(d.line.len == 0 && !d.skipping);
    ld_watch_decoder_clear(&d);
    ld_watch_decoder_clear(&d);
}

/* Feeds the over-long line in two pieces cut at split (none when split is
 * the whole length) or, when split is 0, in pieces of up to 64 KiB. */
static void feed_long_line(struct ld_watch_decoder *d, const char *line, size_t len,
                           size_t split, struct log *l)
{
    uint32_t x = 2463534242u;

    if (split != 0) {
        FUZZ_CHECK(ld_watch_feed(d, line, split, on_event, l) == LD_OK);
        FUZZ_CHECK(ld_watch_feed(d, line + split, len - split, on_event, l) == LD_OK);
        return;
    }
    while (len > 0) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        size_t piece = 1 + x % (64u * 1024);
        if (piece > len)
            piece = len;
        FUZZ_CHECK(ld_watch_feed(d, line, piece, on_event, l) == LD_OK);
        line += piece;
        len -= piece;
    }
}

/* libFuzzer fixes the signature. */
/* NOLINTNEXTLINE(readability-non-const-parameter) */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const size_t len = LD_WATCH_MAX_LINE + 1;
    /* Cuts at the edges of the limit and of the buffer's growth. */
    const size_t splits[PREFIX_WAYS] = {len, 1, 4096, 4097, 64 * 1024 + 1, len - 1, 0};
    char *line = malloc(len), want[64];

    (void)argc;
    (void)argv;
    FUZZ_CHECK(line != NULL);
    memset(line, 'x', len);
    snprintf(want, sizeof want, "%d %d ", (int)LD_WATCH_INVALID, (int)LD_ETOOBIG);
    for (size_t i = 0; i < PREFIX_WAYS; i++) {
        struct ld_watch_decoder *d = &after_prefix[i];
        struct log l = {NULL, 0, 0, 0};

        ld_watch_decoder_init(d);
        feed_long_line(d, line, len, splits[i], &l);
        /* One ETOOBIG event, then nothing kept but the skipping. */
        FUZZ_CHECK(l.events == 1 && strncmp(l.p, want, strlen(want)) == 0);
        FUZZ_CHECK(d->skipping && d->line.len == 0);
        if (i == 0) {
            prefix_log = l.p;
        } else {
            FUZZ_CHECK(strcmp(l.p, prefix_log) == 0);
            free(l.p);
        }
    }
    free(line);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t flags = (uint32_t)fuzz_take(&data, &size, 1);
    bool prefix = (flags & 0x80) != 0;
    uint32_t seed = flags * 2654435761u;
    const char *s = (const char *)data;
    struct log whole = {NULL, 0, 0, 0}, pieces = {NULL, 0, 0, 0};
    size_t pend_whole, pend_pieces;

    run(s, size, 0, prefix, &whole, &pend_whole);
    run(s, size, seed, prefix, &pieces, &pend_pieces);

    FUZZ_CHECK(whole.events == expected_events(s, size, prefix));
    FUZZ_CHECK(pieces.events == whole.events);
    FUZZ_CHECK(whole.events == 0 || strcmp(whole.p, pieces.p) == 0);
    FUZZ_CHECK(pend_whole == pend_pieces);
    /* The unfinished last line is what stays buffered. */
    const char *nl = memrchr(s, '\n', size);
    size_t tail = nl ? size - (size_t)(nl - s) - 1 : size;
    if (!(prefix && !nl))
        FUZZ_CHECK(pend_whole == tail);
    free(whole.p);
    free(pieces.p);
    return 0;
}
