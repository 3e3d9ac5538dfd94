/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dnsname: the two Kubernetes object-name rules leaderd needs, as
 * apimachinery's pkg/util/validation defines them, kept in one place so the
 * configuration check and the API client can never disagree.
 *
 *   DNS-1123 label     [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 bytes
 *                      (IsDNS1123Label; namespaces).
 *   DNS-1123 subdomain labels of that shape joined by '.', at most 253
 *                      bytes in all; a part alone is NOT limited to 63
 *                      (IsDNS1123Subdomain; Lease names).
 *
 * Pure functions: no allocation, no I/O, no state; thread-safe.
 */
#ifndef LEADERD_DNSNAME_H
#define LEADERD_DNSNAME_H

#include <stdbool.h>

#define LD_DNS1123_LABEL_MAX 63
#define LD_DNS1123_SUBDOMAIN_MAX 253

/* True when the string s is a DNS-1123 label. NULL is false. */
bool ld_dns1123_label(const char *s);

/* True when the string s is a DNS-1123 subdomain. NULL is false. */
bool ld_dns1123_subdomain(const char *s);

#endif
