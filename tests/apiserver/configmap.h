/* SPDX-License-Identifier: Apache-2.0 */
/*
 * configmap: decoding and validation of core/v1 ConfigMap bodies the way
 * kube-apiserver does it: a field of the wrong JSON type or binaryData that
 * is not base64 is 400 BadRequest, a broken rule 422 Invalid with causes[]
 * (ValidateConfigMap and ValidateConfigMapUpdate). Unknown fields are
 * dropped. Pure functions.
 */
#ifndef AS_CONFIGMAP_H
#define AS_CONFIGMAP_H

#include <stdbool.h>

#include <jansson.h>

#include "status.h"

/* kube's limit on data plus binaryData (corevalidation.MaxSecretSize). */
#define AS_CONFIGMAP_MAX_BYTES (1u << 20)

/* A normalised copy of in (borrowed): kind and apiVersion set, metadata as
 * as_decode_envelope leaves it, immutable (a bool; null dropped), data (a
 * map of strings) and binaryData (a map of base64 strings) kept when not
 * empty. Returns a new reference, or NULL with a 400 reply in err. */
json_t *as_configmap_normalize(json_t *in, struct as_reply *err);

/* ObjectMeta's rules, every data and binaryData key a config key
 * (IsConfigMapKey) present in only one of the two, at most
 * AS_CONFIGMAP_MAX_BYTES of values; on update (old, the stored object, not
 * NULL) an immutable ConfigMap keeps immutable, data and binaryData.
 * Returns true, or false with a 422 reply in err. */
bool as_configmap_validate(json_t *cm, json_t *old, struct as_reply *err);

#endif
