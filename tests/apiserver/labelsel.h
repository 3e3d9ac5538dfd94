/* SPDX-License-Identifier: Apache-2.0 */
/*
 * labelsel: Kubernetes label selectors ("app=x,tier in (a,b),!canary") and
 * label key/value rules, as apimachinery's labels.Parse and
 * util/validation define them. A selector is parsed once into an immutable
 * object and then matched against any number of label sets; error texts are
 * worded like the real server's so a client sees the same 400 message.
 *
 * Grammar (comma = AND, blanks ' ', '\t', '\r', '\n' separate tokens):
 *   k=v  k==v  k!=v  k in (a,b)  k notin (a,b)  k  !k  k>5  k<5
 * Keys are qualified names ([prefix/]name, name at most 63 characters,
 * prefix a DNS-1123 subdomain); values are empty or at most 63 characters
 * of [-A-Za-z0-9_.] starting and ending with an alphanumeric. A key that is
 * absent satisfies "!=", "notin" and "!k" and nothing else.
 *
 * Pure functions; a parsed selector may be matched from several threads.
 */
#ifndef AS_LABELSEL_H
#define AS_LABELSEL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct as_labelsel;

/* Parses selector (NUL-terminated; NULL or "" selects everything). Returns
 * a selector the caller owns (free with as_labelsel_free), or NULL with the
 * reason in err (errlen bytes, always terminated): labels.Parse's wording,
 * e.g. "unable to parse requirement: found '', expected: in, notin, =, ==,
 * !=, gt, lt", or "out of memory". */
struct as_labelsel *as_labelsel_parse(const char *selector, char *err, size_t errlen);

/* True when labels (a JSON object of strings, borrowed; NULL or a non-object
 * means "no labels") satisfies every requirement of sel. A label whose value
 * is not a string counts as absent. */
bool as_labelsel_match(const struct as_labelsel *sel, const json_t *labels);

/* True when sel has no requirements (it matches every object). */
bool as_labelsel_empty(const struct as_labelsel *sel);

/* Frees sel. NULL-safe. */
void as_labelsel_free(struct as_labelsel *sel);

/* The rules a label key (validation.IsQualifiedName) or value
 * (IsValidLabelValue) breaks: up to max messages, static strings worded
 * like the real server's, stored in out; returns how many (0 = valid). */
size_t as_label_key_problems(const char *key, const char **out, size_t max);
size_t as_label_value_problems(const char *value, const char **out, size_t max);

#endif
