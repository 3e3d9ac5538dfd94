/* SPDX-License-Identifier: Apache-2.0 */
/*
 * text: an owned string field, copied only when it changes (see text.h).
 */
#include "text.h"

#include <stdlib.h>
#include <string.h>

bool ld_text_set(char **dst, const char *v)
{
    if (!v)
        v = "";
    if (*dst && strcmp(*dst, v) == 0)
        return true;
    char *copy = strdup(v);
    if (!copy)
        return false;
    free(*dst);
    *dst = copy;
    return true;
}
