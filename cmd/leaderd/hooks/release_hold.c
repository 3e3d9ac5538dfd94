/* SPDX-License-Identifier: Apache-2.0 */
/*
 * release_hold: whether a release may be written now (see release_hold.h).
 */
#include "release_hold.h"

#include <stdbool.h>

int64_t ld_release_courtesy_ms(int64_t renew_deadline_ms)
{
    int64_t half = renew_deadline_ms / 2;
    return half < LD_RELEASE_COURTESY_MAX_MS ? half : LD_RELEASE_COURTESY_MAX_MS;
}

struct ld_release_hold ld_release_hold_judge(const struct ld_hook *hooks, size_t n,
                                             int64_t term_until_ms,
                                             int64_t courtesy_until_ms, int64_t now_ms)
{
    struct ld_release_hold out = {.verdict = LD_RELEASE_NOW, .until_ms = INT64_MAX};
    bool safety = false, courtesy = false, forbidden = false;
    bool courtesy_open = now_ms < courtesy_until_ms;
    for (size_t i = 0; i < n; i++) {
        const struct ld_hook *h = &hooks[i];
        if (h->forbids_release && h->forbids_release(h->ctx, now_ms))
            forbidden = true;
        if (!h->holds_release)
            continue;
        if (h->hold == LD_HOOK_HOLD_SAFETY)
            safety |= h->holds_release(h->ctx, now_ms);
        else if (courtesy_open)
            courtesy |= h->holds_release(h->ctx, now_ms);
    }
    if (forbidden) {
        out.verdict = LD_RELEASE_GIVE_UP;
        out.why = "an API write went out and its answer never came: the API server "
                  "may still apply it";
    } else if (safety && now_ms >= term_until_ms) {
        out.verdict = LD_RELEASE_GIVE_UP;
        out.why = "what must end before another leader starts (the command, API "
                  "writes in flight) outlasted the term's renew deadline";
    } else if (safety || courtesy) {
        out.verdict = LD_RELEASE_WAIT;
        if (safety)
            out.until_ms = term_until_ms;
        if (courtesy && courtesy_until_ms < out.until_ms)
            out.until_ms = courtesy_until_ms;
    }
    return out;
}
