#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Renders the man page docs/leaderd.8 as Markdown, docs/options.md, so that
every flag is one click from the README. It reads only the subset of man(7)
that tools/gen-man.c and the template docs/leaderd.8.in use, and refuses
anything else rather than guess.

  tools/man2md.py docs/leaderd.8 > docs/options.md

`make man` writes docs/options.md beside the page; `make man-check` (in
`make lint`) fails when the committed one differs."""
import re
import sys

ESCAPES = {r"\-": "-", r"\(lq": "\u201c", r"\(rq": "\u201d", r"\e": "\\", r"\&": "",
           r"\(em": "\u2014", r"\(en": "\u2013", r"\ ": " ", r"\%": ""}
FONTS = {"B": "**", "I": "*", "R": "", "P": ""}
# Alternating-font macros: the fonts of their odd and even arguments.
ALTERNATING = {"BR": "BR", "BI": "BI", "IR": "IR", "RB": "RB", "RI": "RI", "IB": "IB"}


def plain(text):
    """A text with its roff escapes turned into characters, inline font
    changes (\\fB...\\fR) into Markdown; a font still open at the end of
    the text is closed there."""
    current = [""]

    def one(m):
        esc = m.group(0)
        if esc.startswith("\\f"):
            mark = FONTS[esc[2]]
            closing, current[0] = current[0], mark
            return closing + mark
        if esc not in ESCAPES:
            raise ValueError("unknown escape %s in %r" % (esc, text))
        return ESCAPES[esc]
    out = re.sub(r"\\f[BIRP]|\\\(..|\\.", one, text)
    return out + current[0]


def args(rest):
    """The arguments of a macro line: words, or "quoted strings"."""
    return [a[1:-1] if a.startswith('"') else a
            for a in re.findall(r'"[^"]*"|\S+', rest)]


def styled(word, f):
    """word in font f; spaces at its ends stay outside the marks, as
    Markdown wants them."""
    w = plain(word)
    mark = FONTS[f]
    core = w.strip()
    if not core or not mark:
        return w
    lead, trail = w[: len(w) - len(w.lstrip())], w[len(w.rstrip()):]
    return lead + mark + core + mark + trail


class Page:
    def __init__(self):
        self.out = []
        self.para = []
        self.code = None
        self.term_next = False
        self.terms = []
        self.in_item = False  # text belongs to the last list item

    def text(self, s):
        if self.code is not None:
            self.code.append(plain(s))
        elif self.term_next:
            self.terms.append(s)
            self.term_next = False
            self.flush_terms()
        else:
            self.para.append(s)

    def flush_terms(self):
        self.out.append("- " + " / ".join(self.terms))
        self.terms = []
        self.in_item = True

    def flush(self):
        if self.para:
            body = " ".join(self.para).replace("  \n ", "  \n")
            if self.in_item:
                self.out[-1] += "  \n  " + body.replace("  \n", "  \n  ")
            else:
                self.out.append(body)
            self.para = []

    def block(self, line):
        self.flush()
        self.in_item = False
        self.out.append(line)

    def macro(self, name, rest):
        if name in ("", "\\\"", "nh", "ad", "RS", "RE"):
            return
        if name == "TH":
            a = args(rest)
            self.block("# %s(%s)" % (a[0].lower(), a[1]))
            self.block("<!-- Generated from docs/leaderd.8 by tools/man2md.py "
                       "(`make man`); edit docs/leaderd.8.in or the flag table in "
                       "cmd/leaderd/shell/config.c, never this file. -->")
        elif name == "SH":
            self.block("## " + plain(" ".join(args(rest))).title())
        elif name == "SS":
            self.block("### " + plain(" ".join(args(rest))))
        elif name in ("PP", "IP"):
            self.flush()
            self.in_item = False
        elif name in ("TP", "TQ"):
            self.flush()
            if name == "TQ" and self.out and self.out[-1].startswith("- "):
                self.terms = [self.out.pop()[2:]]
            self.term_next = True
        elif name in FONTS:
            self.text(styled(rest.strip('"') if rest.count('"') == 2 else rest, name))
        elif name in ALTERNATING:
            fonts = ALTERNATING[name]
            words = args(rest)
            self.text("".join(styled(w, fonts[i % 2]) for i, w in enumerate(words)))
        elif name == "br":
            if self.para:
                self.para[-1] += "  \n"
        elif name == "EX":
            self.flush()
            self.code = []
        elif name == "EE":
            self.out.append("```\n" + "\n".join(self.code) + "\n```")
            self.code = None
        else:
            raise ValueError("unsupported macro .%s" % name)

    def render(self, lines):
        for line in lines:
            if line.startswith(".\\\""):
                continue
            if line.startswith("."):
                m = re.match(r"\.(\S*)\s*(.*)", line)
                self.macro(m.group(1), m.group(2))
            else:
                self.text(plain(line))
        self.flush()
        return "\n\n".join(self.out) + "\n"


def main():
    with open(sys.argv[1], encoding="ascii") as f:
        lines = f.read().splitlines()
    try:
        sys.stdout.write(Page().render(lines))
    except ValueError as e:
        print("man2md: %s: %s" % (sys.argv[1], e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
