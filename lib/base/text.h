/* SPDX-License-Identifier: Apache-2.0 */
/*
 * text: an owned, NUL-terminated string field kept equal to a value seen
 * again and again (a holder's name, a resourceVersion), copied only when
 * it changes.
 */
#ifndef LEADERD_TEXT_H
#define LEADERD_TEXT_H

#include <stdbool.h>

/* Makes *dst (owned: NULL or from malloc) a copy of v (NULL counts as "");
 * no copy when it already is one. Out of memory: *dst keeps its old value
 * and false is returned (the caller's next pass tries again). */
bool ld_text_set(char **dst, const char *v);

#endif
