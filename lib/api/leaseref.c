/* SPDX-License-Identifier: Apache-2.0 */
/*
 * leaseref: "NAMESPACE/NAME" (see leaseref.h).
 */
#include "leaseref.h"

#include <stdio.h>

enum ld_err ld_lease_ref(char *buf, size_t len, const char *ns, const char *name)
{
    int n = snprintf(buf, len, "%s/%s", ns, name);
    return n >= 0 && (size_t)n < len ? LD_OK : LD_ETOOBIG;
}
