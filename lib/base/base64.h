/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base64: checks standard, padded base64 (RFC 4648 section 4), the form
 * Kubernetes uses for bytes in JSON and kubeconfig files, and says where
 * it goes wrong. Decoding is left to the caller (OpenSSL's EVP_DecodeBlock
 * does it once the text is known to be valid). Pure function.
 */
#ifndef LEADERD_BASE64_H
#define LEADERD_BASE64_H

#include <stddef.h>

/* The number of bytes the len bytes at s decode to, or -1 when they are not
 * standard padded base64: a byte outside A-Z a-z 0-9 + /, a '=' anywhere
 * but in the last two places, or a length that is not a multiple of 4. On
 * -1, *bad is the offset of the first byte that makes it invalid (for a
 * wrong length, the start of the incomplete last quantum), as Go's decoder
 * reports it. No allocation; thread-safe. */
long ld_base64_decoded_len(const char *s, size_t len, size_t *bad);

#endif
