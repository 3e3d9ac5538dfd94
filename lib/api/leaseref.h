/* SPDX-License-Identifier: Apache-2.0 */
/*
 * leaseref: the one spelling of a Lease reference, "NAMESPACE/NAME", as log
 * lines, the state's snapshot and the exec child's environment show it.
 */
#ifndef LEADERD_LEASEREF_H
#define LEADERD_LEASEREF_H

#include <stddef.h>

#include "err.h"

/* Writes "ns/name" into buf (len bytes, len > 0; always terminated).
 * Returns LD_OK, or LD_ETOOBIG when it did not fit (buf then holds as much
 * as fitted). */
enum ld_err ld_lease_ref(char *buf, size_t len, const char *ns, const char *name);

#endif
