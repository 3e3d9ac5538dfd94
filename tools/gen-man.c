/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gen-man: writes the man page leaderd(8) from its roff template and the
 * daemon's own table of flags (ld_config_option), so the page's OPTIONS and
 * its LEADERD_* variables list exactly what leaderd accepts, with the
 * defaults and help that --help prints. `make man` runs it.
 *
 *   gen-man TEMPLATE > PAGE
 *
 * The template is copied line by line, except: a line "@OPTIONS@" becomes an
 * entry per flag, a line "@ENVIRONMENT@" an entry per flag's variable, and
 * "@VERSION@" anywhere becomes leaderd's version. Every other variable
 * leaderd reads (ld_config_env_name) is described by hand and must have an
 * entry in the template (a line ".B NAME"). Exits 0, or 1 with one line on
 * stderr when the template or the table cannot make a correct page.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../cmd/leaderd/shell/config.h"

/* Longer lines than any roff source needs; one that does not fit is refused,
 * not split. */
#define LINE_MAX_LEN 4096
#define OPTIONS_LINE "@OPTIONS@"
#define ENVIRONMENT_LINE "@ENVIRONMENT@"
#define VERSION_MARK "@VERSION@"
/* Generated text lines stay within this many bytes, as man pages' do. */
#define TEXT_COLUMNS 78

/* Hand-described variables: how many there can be, and which the template
 * has an entry for. */
#define MAX_ENV 64

struct gen {
    const char *template_path;
    const char *env[MAX_ENV]; /* the variables not tied to a flag */
    bool described[MAX_ENV];
    size_t n_env;
    int options_lines;
    int environment_lines;
};

/* Roff treats '\\' as an escape, and '-' as a hyphen that may be typeset as
 * one while an option is typed with a minus sign. Text must be printable
 * ASCII: the page is read with and without a UTF-8 pre-processor. Writes
 * the escaped s into out (NUL-terminated); -1 when it does not fit or has
 * another character. */
static int escape(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c > 0x7e) {
            fprintf(stderr,
                    "gen-man: character 0x%02x in \"%s\" (printable ASCII only)\n", c, s);
            return -1;
        }
        if (n + 3 > cap) {
            fprintf(stderr, "gen-man: \"%s\" is too long\n", s);
            return -1;
        }
        if (c == '\\' || c == '-')
            out[n++] = '\\';
        out[n++] = c == '\\' ? 'e' : (char)c;
    }
    out[n] = '\0';
    return 0;
}

static int put_roff(const char *s)
{
    char buf[LINE_MAX_LEN];
    if (escape(s, buf, sizeof(buf)) != 0)
        return -1;
    fputs(buf, stdout);
    return 0;
}

/* text as filled lines of at most TEXT_COLUMNS bytes of roff (a longer
 * word gets a line of its own); a line that would start with '.' or '\''
 * (a request) starts with "\\&". */
static int put_filled(const char *text)
{
    char raw[LINE_MAX_LEN], word[LINE_MAX_LEN];
    size_t col = 0;
    for (const char *p = text; *p; p += strspn(p, " ")) {
        size_t rawlen = strcspn(p, " ");
        if (rawlen == 0)
            continue;
        memcpy(raw, p, rawlen);
        raw[rawlen] = '\0';
        p += rawlen;
        if (escape(raw, word, sizeof(word)) != 0)
            return -1;
        size_t len = strlen(word);
        if (col > 0 && col + 1 + len > TEXT_COLUMNS) {
            putchar('\n');
            col = 0;
        }
        if (col > 0) {
            putchar(' ');
            col++;
        } else if (word[0] == '.' || word[0] == '\'') {
            fputs("\\&", stdout);
            col += 2;
        }
        fputs(word, stdout);
        col += len;
    }
    if (col > 0)
        putchar('\n');
    return 0;
}

/* help as one sentence: --help's line breaks (a newline and the next
 * line's indent) become spaces, an initial plain lower-case word is
 * capitalised (not a name such as "leaseDurationSeconds"), a full stop ends
 * it. */
static int put_sentence(const char *help)
{
    char text[LINE_MAX_LEN];
    size_t n = 0;
    for (const char *p = help; *p; p++) {
        if (n + 2 >= sizeof(text)) {
            fprintf(stderr, "gen-man: help text longer than %d bytes\n", LINE_MAX_LEN);
            return -1;
        }
        if (*p == '\n') {
            while (p[1] == ' ')
                p++;
            text[n++] = ' ';
        } else {
            text[n++] = *p;
        }
    }
    if (n == 0) {
        fputs("gen-man: empty help text\n", stderr);
        return -1;
    }
    if (text[n - 1] != '.')
        text[n++] = '.';
    text[n] = '\0';
    size_t word = strcspn(text, " ,;:");
    if (text[0] >= 'a' && text[0] <= 'z' &&
        strspn(text, "abcdefghijklmnopqrstuvwxyz'") >= word)
        text[0] = (char)(text[0] - 'a' + 'A');
    return put_filled(text);
}

/* A macro's argument: no quotes or spaces, which would end it. */
static int put_arg(const char *s)
{
    if (strpbrk(s, "\" ")) {
        fprintf(stderr, "gen-man: \"%s\" cannot be a macro argument\n", s);
        return -1;
    }
    return put_roff(s);
}

/* One entry of OPTIONS: the flag and its value's name, the help, then the
 * variable and the default. */
static int put_option(const struct ld_config_option *o)
{
    fputs(".TP\n", stdout);
    fputs(o->metavar ? ".BI " : ".B ", stdout);
    if (put_arg(o->flag) != 0)
        return -1;
    if (o->metavar) {
        fputs(" \" ", stdout);
        if (put_arg(o->metavar) != 0)
            return -1;
        putchar('"');
    }
    putchar('\n');
    if (put_sentence(o->help) != 0)
        return -1;
    if (!o->env)
        return 0;
    fputs(".br\nEnvironment: \\fB", stdout);
    if (put_roff(o->env) != 0)
        return -1;
    fputs("\\fR", stdout);
    if (o->def) {
        /* \% keeps a path or an address from being hyphenated. */
        fputs(";\ndefault: \\fB\\%", stdout);
        if (put_roff(o->def) != 0)
            return -1;
        fputs("\\fR", stdout);
    }
    fputs(".\n", stdout);
    return 0;
}

static int put_options(void)
{
    for (size_t i = 0; i < ld_config_option_count(); i++) {
        if (put_option(ld_config_option(i)) != 0)
            return -1;
    }
    return 0;
}

static int put_environment(void)
{
    for (size_t i = 0; i < ld_config_option_count(); i++) {
        const struct ld_config_option *o = ld_config_option(i);
        if (!o->env)
            continue;
        fputs(".TP\n.B ", stdout);
        if (put_arg(o->env) != 0)
            return -1;
        fputs("\nThe value of \\fB", stdout);
        if (put_roff(o->flag) != 0)
            return -1;
        fputs("\\fR when the flag is not given.\n", stdout);
    }
    return 0;
}

/* The variables leaderd reads that are not a flag's: the template's to
 * describe. */
static int collect_env(struct gen *g)
{
    const char *name;
    for (size_t i = 0; (name = ld_config_env_name(i)) != NULL; i++) {
        bool is_flag = false;
        for (size_t j = 0; j < ld_config_option_count(); j++) {
            const char *env = ld_config_option(j)->env;
            is_flag = is_flag || (env && strcmp(env, name) == 0);
        }
        if (is_flag)
            continue;
        if (g->n_env == MAX_ENV) {
            fprintf(stderr, "gen-man: more than %d variables\n", MAX_ENV);
            return -1;
        }
        g->env[g->n_env++] = name;
    }
    return 0;
}

/* A template line with every VERSION_MARK replaced; a ".B NAME" line
 * counts as NAME's entry. */
static void put_line(struct gen *g, const char *line)
{
    const char *mark;
    for (size_t i = 0; i < g->n_env; i++) {
        if (strncmp(line, ".B ", 3) == 0 && strcmp(line + 3, g->env[i]) == 0)
            g->described[i] = true;
    }
    while ((mark = strstr(line, VERSION_MARK)) != NULL) {
        fwrite(line, 1, (size_t)(mark - line), stdout);
        fputs(LEADERD_VERSION, stdout);
        line = mark + strlen(VERSION_MARK);
    }
    puts(line);
}

static int copy_template(struct gen *g, FILE *in)
{
    char line[LINE_MAX_LEN];
    unsigned lineno = 0;
    while (fgets(line, sizeof(line), in)) {
        size_t len = strlen(line);
        lineno++;
        if (len > 0 && line[len - 1] == '\n') {
            line[--len] = '\0';
        } else if (!feof(in)) {
            fprintf(stderr, "gen-man: %s:%u: line longer than %d bytes\n",
                    g->template_path, lineno, LINE_MAX_LEN - 2);
            return -1;
        }
        int rc = 0;
        if (strcmp(line, OPTIONS_LINE) == 0) {
            g->options_lines++;
            rc = put_options();
        } else if (strcmp(line, ENVIRONMENT_LINE) == 0) {
            g->environment_lines++;
            rc = put_environment();
        } else {
            put_line(g, line);
        }
        if (rc != 0)
            return -1;
    }
    if (ferror(in)) {
        fprintf(stderr, "gen-man: cannot read %s\n", g->template_path);
        return -1;
    }
    return 0;
}

/* What the template must have had: each placeholder once, an entry for
 * every hand-described variable. */
static int check_template(const struct gen *g)
{
    if (g->options_lines != 1 || g->environment_lines != 1) {
        fprintf(stderr,
                "gen-man: %s needs one line " OPTIONS_LINE
                " and one line " ENVIRONMENT_LINE "\n",
                g->template_path);
        return -1;
    }
    for (size_t i = 0; i < g->n_env; i++) {
        if (!g->described[i]) {
            fprintf(stderr,
                    "gen-man: %s has no entry \".B %s\", a variable leaderd reads\n",
                    g->template_path, g->env[i]);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct gen g;
    FILE *in = NULL;
    int status = 1;
    memset(&g, 0, sizeof(g));
    if (argc != 2) {
        fputs("usage: gen-man TEMPLATE > PAGE\n", stderr);
        goto out;
    }
    g.template_path = argv[1];
    in = fopen(g.template_path, "r");
    if (!in) {
        perror(g.template_path);
        goto out;
    }
    if (collect_env(&g) != 0 || copy_template(&g, in) != 0 || check_template(&g) != 0)
        goto out;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("gen-man: stdout");
        goto out;
    }
    status = 0;
out:
    if (in)
        fclose(in);
    return status;
}
