/* SPDX-License-Identifier: Apache-2.0 */
#include "labelsel.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QNAME_RE "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
#define QNAME_MSG                                                                        \
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "  \
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "      \
    "regex used for validation is '" QNAME_RE "')"
#define DNS_MSG                                                                          \
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "            \
    "characters, '-' or '.', and must start and end with an alphanumeric character "     \
    "(e.g. 'example.com', regex used for validation is "                                 \
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
#define VALUE_MSG                                                                        \
    "a valid label must be an empty string or consist of alphanumeric characters, '-', " \
    "'_' or '.', and must start and end with an alphanumeric character (e.g. "           \
    "'MyValue',  or 'my_value',  or '12345', regex used for validation is '(" QNAME_RE   \
    ")?')"
#define BINARY_OPS "in, notin, =, ==, !=, gt, lt"
#define NAME_MAX_LEN 63
#define PREFIX_MAX_LEN 253
#define VALUE_MAX_LEN 63

enum tok {
    T_EOS,
    T_CLOSE,
    T_COMMA,
    T_NOT,
    T_DEQ,
    T_EQ,
    T_GT,
    T_ID,
    T_IN,
    T_LT,
    T_NEQ,
    T_NOTIN,
    T_OPEN,
};

struct token {
    enum tok t;
    char *lit; /* owned; "" for end of string */
};

enum op { OP_IN, OP_NOTIN, OP_EQ, OP_NEQ, OP_EXISTS, OP_NOT_EXISTS, OP_GT, OP_LT };

struct req {
    char *key;
    enum op op;
    char **vals; /* sorted, distinct */
    size_t nvals;
    int64_t num; /* the bound of OP_GT / OP_LT */
};

struct as_labelsel {
    struct req *reqs;
    size_t n;
};

struct parser {
    struct token *toks;
    size_t n, pos;
    char *err;
    size_t errlen;
    bool oom;
};

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_special(char c)
{
    return c && strchr("=!(),><", c) != NULL;
}

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], the whole string. */
static bool qname_ok(const char *s, size_t n)
{
    if (n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
        return false;
    for (size_t i = 1; i + 1 < n; i++)
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

/* The DNS-1123 subdomain pattern alone; the length rule is checked apart. */
static bool dns_subdomain_ok(const char *s, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        if (i == start)
            return false;
        for (size_t j = start; j < i; j++) {
            char c = s[j];
            bool lower = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
            if (!lower && !(c == '-' && j > start && j + 1 < i))
                return false;
        }
        start = i + 1;
    }
    return true;
}

static void add_problem(const char **out, size_t max, size_t *k, const char *msg)
{
    if (*k < max)
        out[*k] = msg;
    (*k)++;
}

size_t as_label_key_problems(const char *key, const char **out, size_t max)
{
    size_t k = 0;
    const char *slash = strchr(key, '/');
    const char *name = key;
    if (slash && strchr(slash + 1, '/')) {
        add_problem(out, max, &k,
                    "a qualified name " QNAME_MSG
                    " with an optional DNS subdomain prefix "
                    "and '/' (e.g. 'example.com/MyName')");
        return k < max ? k : max;
    }
    if (slash) {
        size_t plen = (size_t)(slash - key);
        name = slash + 1;
        if (plen == 0) {
            add_problem(out, max, &k, "prefix part must be non-empty");
        } else {
            if (plen > PREFIX_MAX_LEN)
                add_problem(out, max, &k,
                            "prefix part must be no more than 253 characters");
            if (!dns_subdomain_ok(key, plen))
                add_problem(out, max, &k, "prefix part " DNS_MSG);
        }
    }
    size_t nlen = strlen(name);
    if (nlen == 0)
        add_problem(out, max, &k, "name part must be non-empty");
    else if (nlen > NAME_MAX_LEN)
        add_problem(out, max, &k, "name part must be no more than 63 characters");
    if (!qname_ok(name, nlen))
        add_problem(out, max, &k, "name part " QNAME_MSG);
    return k < max ? k : max;
}

size_t as_label_value_problems(const char *value, const char **out, size_t max)
{
    size_t k = 0;
    size_t n = strlen(value);
    if (n > VALUE_MAX_LEN)
        add_problem(out, max, &k, "must be no more than 63 characters");
    if (n > 0 && !qname_ok(value, n))
        add_problem(out, max, &k, VALUE_MSG);
    return k < max ? k : max;
}

/* Go's strconv.ParseInt(s, 10, 64): optional sign, decimal digits only. */
static bool parse_int64(const char *s, int64_t *out)
{
    bool neg = *s == '-';
    if (*s == '+' || *s == '-')
        s++;
    if (!*s)
        return false;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (limit - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* Appends s quoted the way Go's %q does for the ASCII range; other bytes
 * pass through (label text is expected to be UTF-8). */
static void quote(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Records an allocation failure; returns false for the caller to pass on. */
static bool oom(struct parser *p)
{
    p->oom = true;
    return false;
}

static void fail(struct parser *p, const char *fmt, const char *lit)
{
    snprintf(p->err, p->errlen, fmt, lit);
}

/* Splits text into tokens, the last one T_EOS. */
static bool lex(struct parser *p, const char *text)
{
    size_t cap = strlen(text) + 1; /* each token takes at least one byte */
    p->toks = calloc(cap, sizeof *p->toks);
    if (!p->toks)
        return false;
    const char *s = text;
    while (p->n < cap) {
        while (is_blank(*s))
            s++;
        struct token *t = &p->toks[p->n];
        size_t len;
        if (!*s) {
            t->t = T_EOS;
            len = 0;
        } else if (is_special(*s)) {
            len = (s[1] == '=' && (s[0] == '=' || s[0] == '!')) ? 2 : 1;
            static const char sym[] = "=!(),><";
            static const enum tok one[] = {T_EQ,    T_NOT, T_OPEN, T_CLOSE,
                                           T_COMMA, T_GT,  T_LT};
            t->t = len == 2 ? (s[0] == '=' ? T_DEQ : T_NEQ) : one[strchr(sym, *s) - sym];
        } else {
            len = 0;
            while (s[len] && !is_special(s[len]) && !is_blank(s[len]))
                len++;
            t->t = T_ID;
            if (len == 2 && strncmp(s, "in", 2) == 0)
                t->t = T_IN;
            else if (len == 5 && strncmp(s, "notin", 5) == 0)
                t->t = T_NOTIN;
        }
        t->lit = strndup(s, len);
        if (!t->lit)
            return false;
        p->n++;
        if (t->t == T_EOS)
            return true;
        s += len;
    }
    return false; /* unreachable: every token but the last eats a byte */
}

/* The next token; in value position the keywords are plain words. */
static const struct token *peek(const struct parser *p, bool values, enum tok *t)
{
    const struct token *k = &p->toks[p->pos];
    *t = k->t;
    if (values && (*t == T_IN || *t == T_NOTIN))
        *t = T_ID;
    return k;
}

static const struct token *next(struct parser *p, bool values, enum tok *t)
{
    const struct token *k = peek(p, values, t);
    if (k->t != T_EOS)
        p->pos++;
    return k;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds v to r's values unless present. */
static bool add_value(struct req *r, const char *v)
{
    for (size_t i = 0; i < r->nvals; i++)
        if (strcmp(r->vals[i], v) == 0)
            return true;
    char **nv = realloc(r->vals, (r->nvals + 1) * sizeof *nv);
    if (!nv)
        return false;
    r->vals = nv;
    r->vals[r->nvals] = strdup(v);
    if (!r->vals[r->nvals])
        return false;
    r->nvals++;
    return true;
}

static void req_clear(struct req *r)
{
    free(r->key);
    for (size_t i = 0; i < r->nvals; i++)
        free(r->vals[i]);
    free(r->vals);
    memset(r, 0, sizeof *r);
}

/* "( v1, v2, ... )" after in/notin; empty entries are the value "". */
static bool parse_values(struct parser *p, struct req *r)
{
    enum tok t;
    const struct token *k = next(p, true, &t);
    if (t != T_OPEN) {
        fail(p, "found '%s' expected: '('", k->lit);
        return false;
    }
    k = peek(p, true, &t);
    if (t == T_CLOSE) {
        next(p, true, &t);
        return add_value(r, "") || oom(p);
    }
    if (t != T_ID && t != T_COMMA) {
        fail(p, "found '%s', expected: ',', ')' or identifier", k->lit);
        return false;
    }
    const char *first_lit = k->lit;
    /* Each pass consumes one token, so the token count bounds the loop. */
    for (size_t guard = 0; guard < p->n; guard++) {
        k = next(p, true, &t);
        if (t == T_ID) {
            if (!add_value(r, k->lit))
                return oom(p);
            const struct token *k2 = peek(p, true, &t);
            if (t == T_COMMA)
                continue;
            if (t == T_CLOSE)
                break;
            fail(p, "found '%s', expected: ',' or ')'", k2->lit);
            return false;
        }
        if (t == T_COMMA) {
            /* "(,", ",," and ",)" all stand for the empty value. */
            enum tok t2;
            peek(p, true, &t2);
            if (r->nvals == 0 || t2 == T_CLOSE || t2 == T_COMMA) {
                if (!add_value(r, ""))
                    return oom(p);
            }
            if (t2 == T_CLOSE)
                break;
            if (t2 == T_COMMA)
                next(p, true, &t2);
            continue;
        }
        fail(p, "found '%s', expected: ',', or identifier", k->lit);
        return false;
    }
    next(p, true, &t);
    if (t != T_CLOSE) {
        fail(p, "found '%s', expected: ')'", first_lit);
        return false;
    }
    return true;
}

/* The value after =, ==, !=, > or <; nothing before ',' or the end is "". */
static bool parse_exact(struct parser *p, struct req *r)
{
    enum tok t;
    const struct token *k = peek(p, true, &t);
    if (t == T_EOS || t == T_COMMA)
        return add_value(r, "") || oom(p);
    next(p, true, &t);
    if (t != T_ID) {
        fail(p, "found '%s', expected: identifier", k->lit);
        return false;
    }
    return add_value(r, k->lit) || oom(p);
}

/* NewRequirement's checks on the values, aggregated like apimachinery's
 * ErrorList: one error bare, several (distinct) in brackets. */
static bool check_values(struct parser *p, struct req *r)
{
    char *buf = NULL;
    size_t len = 0;
    size_t nerr = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return oom(p);
    qsort(r->vals, r->nvals, sizeof *r->vals, cmp_str);
    if (r->op == OP_GT || r->op == OP_LT) {
        if (!parse_int64(r->vals[0], &r->num)) {
            fputs(nerr++ ? ", " : "", f);
            fputs("values[0]: Invalid value: ", f);
            quote(f, r->vals[0]);
            fputs(": for 'Gt', 'Lt' operators, the value must be an integer", f);
        }
    }
    for (size_t i = 0; i < r->nvals; i++) {
        const char *why[2];
        size_t n = as_label_value_problems(r->vals[i], why, 2);
        if (n == 0)
            continue;
        fputs(nerr++ ? ", " : "", f);
        fprintf(f, "values[%zu][%s]: Invalid value: ", i, r->key);
        quote(f, r->vals[i]);
        fprintf(f, ": %s%s%s", why[0], n > 1 ? "; " : "", n > 1 ? why[1] : "");
    }
    bool ok = fclose(f) == 0;
    if (!ok || !buf) {
        free(buf);
        return oom(p);
    }
    if (nerr == 1)
        snprintf(p->err, p->errlen, "%s", buf);
    else if (nerr > 1)
        snprintf(p->err, p->errlen, "[%s]", buf);
    free(buf);
    return nerr == 0;
}

/* validateLabelKey as labels.Parse calls it: the reasons joined by "; ",
 * and, the error having no field path, "<nil>" where the path would be. */
static bool check_key(struct parser *p, const char *key)
{
    const char *why[4];
    size_t n = as_label_key_problems(key, why, 4);
    char *buf = NULL;
    size_t len = 0;
    if (n == 0)
        return true;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return oom(p);
    fputs("<nil>: Invalid value: ", f);
    quote(f, key);
    fputs(": ", f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%s", i ? "; " : "", why[i]);
    if (fclose(f) == 0 && buf)
        snprintf(p->err, p->errlen, "%s", buf);
    else
        p->oom = true;
    free(buf);
    return false;
}

static bool parse_requirement(struct parser *p, struct req *r)
{
    enum tok t;
    bool negated = false;
    const struct token *k = next(p, true, &t);
    if (t == T_NOT) {
        negated = true;
        k = next(p, true, &t);
    }
    if (t != T_ID) {
        fail(p, "found '%s', expected: identifier", k->lit);
        return false;
    }
    if (!check_key(p, k->lit))
        return false;
    r->key = strdup(k->lit);
    if (!r->key)
        return oom(p);
    peek(p, true, &t);
    if (negated || t == T_EOS || t == T_COMMA) {
        r->op = negated ? OP_NOT_EXISTS : OP_EXISTS;
        return true;
    }
    k = next(p, false, &t);
    bool ok;
    switch (t) {
    case T_IN:
    case T_NOTIN:
        r->op = t == T_IN ? OP_IN : OP_NOTIN;
        ok = parse_values(p, r);
        break;
    case T_EQ:
    case T_DEQ:
    case T_NEQ:
    case T_GT:
    case T_LT:
        r->op = t == T_NEQ ? OP_NEQ : t == T_GT ? OP_GT : t == T_LT ? OP_LT : OP_EQ;
        ok = parse_exact(p, r);
        break;
    default:
        fail(p, "found '%s', expected: " BINARY_OPS, k->lit);
        return false;
    }
    return ok && check_values(p, r);
}

/* Puts pre in front of the recorded error, cutting its tail if needed. */
static void prefix_error(struct parser *p, const char *pre)
{
    size_t pl = strlen(pre);
    if (p->errlen <= pl + 1)
        return;
    size_t have = strnlen(p->err, p->errlen - 1);
    if (have > p->errlen - 1 - pl)
        have = p->errlen - 1 - pl;
    memmove(p->err + pl, p->err, have);
    memcpy(p->err, pre, pl);
    p->err[pl + have] = '\0';
}

static int cmp_req(const void *a, const void *b)
{
    return strcmp(((const struct req *)a)->key, ((const struct req *)b)->key);
}

static bool parse_all(struct parser *p, struct as_labelsel *sel)
{
    enum tok t;
    /* Each requirement takes at least one token. */
    for (size_t guard = 0; guard < p->n; guard++) {
        const struct token *k = peek(p, true, &t);
        if (t == T_EOS)
            return true;
        if (t != T_ID && t != T_NOT) {
            fail(p, "found '%s', expected: !, identifier, or 'end of string'", k->lit);
            return false;
        }
        struct req *nr = realloc(sel->reqs, (sel->n + 1) * sizeof *nr);
        if (!nr)
            return oom(p);
        sel->reqs = nr;
        struct req *r = &sel->reqs[sel->n];
        memset(r, 0, sizeof *r);
        sel->n++;
        if (!parse_requirement(p, r)) {
            if (!p->oom)
                prefix_error(p, "unable to parse requirement: ");
            return false;
        }
        k = next(p, true, &t);
        if (t == T_EOS)
            return true;
        if (t != T_COMMA) {
            fail(p, "found '%s', expected: ',' or 'end of string'", k->lit);
            return false;
        }
        k = peek(p, true, &t);
        if (t != T_ID && t != T_NOT) {
            fail(p, "found '%s', expected: identifier after ','", k->lit);
            return false;
        }
    }
    return oom(p); /* unreachable: the guard outlasts the tokens */
}

struct as_labelsel *as_labelsel_parse(const char *selector, char *err, size_t errlen)
{
    char inner[4096] = "";
    struct parser p = {.err = inner, .errlen = sizeof inner};
    struct as_labelsel *sel = calloc(1, sizeof *sel);
    bool ok = false;
    if (!sel || !lex(&p, selector ? selector : "")) {
        p.oom = true;
        goto out;
    }
    ok = parse_all(&p, sel);
    if (ok && sel->n > 1)
        qsort(sel->reqs, sel->n, sizeof *sel->reqs, cmp_req);
out:
    for (size_t i = 0; i < p.n; i++)
        free(p.toks[i].lit);
    free(p.toks);
    if (ok)
        return sel;
    snprintf(err, errlen, "%s", p.oom ? "out of memory" : inner);
    as_labelsel_free(sel);
    return NULL;
}

static bool has_value(const struct req *r, const char *v)
{
    return bsearch(&v, r->vals, r->nvals, sizeof *r->vals, cmp_str) != NULL;
}

static bool req_match(const struct req *r, const json_t *labels)
{
    const char *v = json_string_value(json_object_get(labels, r->key));
    int64_t num;
    switch (r->op) {
    case OP_IN:
    case OP_EQ:
        return v && has_value(r, v);
    case OP_NOTIN:
    case OP_NEQ:
        return !v || !has_value(r, v);
    case OP_EXISTS:
        return v != NULL;
    case OP_NOT_EXISTS:
        return v == NULL;
    case OP_GT:
    case OP_LT:
        if (!v || !parse_int64(v, &num))
            return false;
        return r->op == OP_GT ? num > r->num : num < r->num;
    }
    return false;
}

bool as_labelsel_match(const struct as_labelsel *sel, const json_t *labels)
{
    if (!json_is_object(labels))
        labels = NULL;
    for (size_t i = 0; i < sel->n; i++)
        if (!req_match(&sel->reqs[i], labels))
            return false;
    return true;
}

bool as_labelsel_empty(const struct as_labelsel *sel)
{
    return sel->n == 0;
}

void as_labelsel_free(struct as_labelsel *sel)
{
    if (!sel)
        return;
    for (size_t i = 0; i < sel->n; i++)
        req_clear(&sel->reqs[i]);
    free(sel->reqs);
    free(sel);
}
