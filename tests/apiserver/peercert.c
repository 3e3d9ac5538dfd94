/* SPDX-License-Identifier: Apache-2.0 */
#include "peercert.h"

#include <string.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

bool as_peer_cn(struct MHD_Connection *c, char *cn, size_t cnlen)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_x509_crt_t crt = NULL;
    unsigned npeers = 0, status = 0;
    bool ok = false;
    if (cnlen == 0)
        return false;
    cn[0] = '\0';
    if (!ci || !ci->tls_session)
        return false;
    gnutls_session_t s = ci->tls_session;
    const gnutls_datum_t *peers = gnutls_certificate_get_peers(s, &npeers);
    if (!peers || npeers == 0)
        return false;
    /* Like kube-apiserver, which verifies for ExtKeyUsageClientAuth: the
     * server's own certificate from the same CA is no client credential. */
    gnutls_typed_vdata_st purpose = {
        .type = GNUTLS_DT_KEY_PURPOSE_OID,
        .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT,
    };
    if (gnutls_certificate_verify_peers(s, &purpose, 1, &status) < 0 || status != 0)
        return false;
    if (gnutls_x509_crt_init(&crt) < 0)
        return false;
    size_t len = cnlen;
    ok = gnutls_x509_crt_import(crt, &peers[0], GNUTLS_X509_FMT_DER) >= 0 &&
         gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn,
                                       &len) >= 0 &&
         len > 0 && len < cnlen && strlen(cn) == len;
    gnutls_x509_crt_deinit(crt);
    if (!ok)
        cn[0] = '\0';
    return ok;
}
