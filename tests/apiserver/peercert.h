/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peercert: the client certificate of an HTTPS connection (GnuTLS, under
 * libmicrohttpd). The daemon asks for one without requiring it
 * (MHD_OPTION_HTTPS_MEM_TRUST); this checks it against that trust and reads
 * its Subject CN, which kube-apiserver takes as the user name.
 */
#ifndef AS_PEERCERT_H
#define AS_PEERCERT_H

#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

/* Copies into cn (cnlen bytes) the Subject CN of the certificate the peer of
 * c presented in the TLS handshake, if it verifies against the daemon's
 * trusted CA for TLS client authentication (in its validity period, extended
 * key usage clientAuth or none). Returns false, with cn "", when the peer
 * sent no certificate, it does not verify, or its CN is missing, does not
 * fit or holds a NUL byte. Safe to call from any connection's thread. */
bool as_peer_cn(struct MHD_Connection *c, char *cn, size_t cnlen);

#endif
