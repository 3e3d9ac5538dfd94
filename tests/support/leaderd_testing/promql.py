# SPDX-License-Identifier: Apache-2.0
"""What a PromQL expression reads: its metric names, the label matchers of
each selector, and the labels it groups or matches by (by, without, on,
ignoring, group_left, group_right). Enough of PromQL's lexical grammar for
the rules and the dashboard under deploy/monitoring, not an evaluator:
strings, durations, numbers, selectors, function calls and the keywords.
Grafana's variables ($var, ${var}, $__rate_interval) are replaced first
(grafana_expand). Standard library only; used by tests/monitoring/run.py and
tests/integration/test_monitoring.py."""
import re

# Words that are operators or modifiers, never metric names.
KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}
# Aggregation operators: `sum by (x) (...)` puts the grouping first.
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
# Followed by a parenthesised list of label names.
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}

TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<range>\[[^\]]*\])
  | (?P<number>(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
               (?:[smhdwy]|ms)*(?:\d+(?:[smhdwy]|ms))*)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=(){},@])
""", re.VERBOSE)


class Selector:
    """One vector selector: name (None for {__name__...} forms without a
    literal name) and matchers [(label, op, value)]."""

    def __init__(self, name, matchers):
        self.name = name
        self.matchers = matchers

    def __repr__(self):
        return "Selector(%r, %r)" % (self.name, self.matchers)


def _unquote(s):
    if s[0] == "`":
        return s[1:-1]
    body = s[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def tokens(expr):
    pos = 0
    out = []
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m:
            raise ValueError("cannot read PromQL at %r" % expr[pos:pos + 30])
        pos = m.end()
        kind = m.lastgroup
        if kind != "space":
            out.append((kind, m.group(kind)))
    return out


def parse(expr):
    """(selectors, grouping labels) of expr; raises ValueError on what it
    cannot read (an unbalanced brace, a matcher without a value)."""
    toks = tokens(expr)
    selectors = []
    grouping = set()
    i = 0
    depth = 0

    def matchers_at(j):
        """Reads {label op "value", ...} from toks[j] == '{'; returns (list, next index)."""
        out = []
        j += 1
        while True:
            if j >= len(toks):
                raise ValueError("unclosed { in %r" % expr)
            kind, text = toks[j]
            if text == "}":
                return out, j + 1
            if text == ",":
                j += 1
                continue
            if kind not in ("ident", "string") or j + 2 >= len(toks):
                raise ValueError("bad matcher near %r in %r" % (text, expr))
            label = _unquote(text) if kind == "string" else text
            op = toks[j + 1][1]
            vkind, value = toks[j + 2]
            if op not in ("=", "!=", "=~", "!~") or vkind != "string":
                raise ValueError("bad matcher %s%s%s in %r" % (label, op, value, expr))
            out.append((label, op, _unquote(value)))
            j += 3

    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1][1] if i + 1 < len(toks) else None
        if kind == "ident" and text in LABEL_LISTS:
            i += 1
            if nxt == "(":
                i += 1
                while i < len(toks) and toks[i][1] != ")":
                    if toks[i][0] == "ident":
                        grouping.add(toks[i][1])
                    i += 1
                i += 1
            continue
        if kind == "ident" and text.lower() in KEYWORDS:
            i += 1
            continue
        if kind == "ident" and (nxt == "(" or (text in AGGREGATIONS
                                                and nxt in ("by", "without"))):
            i += 1  # a function or an aggregation
            continue
        if kind == "ident":
            if nxt == "{":
                ms, i = matchers_at(i + 1)
            else:
                ms, i = [], i + 1
            selectors.append(Selector(text, ms))
            continue
        if text == "{":
            ms, i = matchers_at(i)
            names = [v for (l, op, v) in ms if l == "__name__" and op == "="]
            selectors.append(Selector(names[0] if names else None,
                                      [m for m in ms if m[0] != "__name__"]))
            continue
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced ) in %r" % expr)
        i += 1
    if depth != 0:
        raise ValueError("unbalanced ( in %r" % expr)
    return selectors, grouping


def grafana_expand(expr, variables=None):
    """expr with Grafana's variables replaced: $__rate_interval and friends
    by 5m, every other $var or ${var} by variables.get(var, ".*")."""
    variables = dict(variables or {})

    def sub(m):
        name = m.group(1) or m.group(2)
        if name.startswith("__") and name.endswith("interval"):
            return "5m"
        if name == "__range":
            return "1h"
        return variables.get(name, ".*")
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", sub, expr)


def dashboard_queries(dashboard):
    """[(panel title, expr)] of every target of every panel (rows' nested
    panels included) and every query variable of the templating list."""
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p.get("title", "?"), t["expr"]))
            walk(p.get("panels", []))
    walk(dashboard.get("panels", []))
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.match(r"^label_values\((.*),\s*(\w+)\)$", q or "")
        if m:
            out.append(("variable " + v["name"], m.group(1)))
            out.append(("variable " + v["name"], "sum by (%s) (%s)" % (m.group(2), m.group(1))))
        elif q:
            out.append(("variable " + v["name"], q))
    return out


def rule_exprs(text):
    """[(alert or record name, expr)] of a Prometheus rules file, read without
    a YAML library: each rule's `- alert: NAME` (or `- record:`) and its
    `expr:`, either on one line or as a block scalar (`expr: |`) of the
    lines indented deeper than the key. Enough for deploy/monitoring/rules.yaml
    (tests/monitoring/run.py checks it reads the same as a YAML parser)."""
    out = []
    lines = text.splitlines()
    name = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^\s*-\s+(?:alert|record):\s*(\S.*?)\s*$", line)
        if m:
            name = m.group(1).strip("'\"")
        m = re.match(r"^(\s*)expr:\s*(.*?)\s*$", line)
        if m and name is not None:
            indent, value = len(m.group(1)), m.group(2)
            if value in ("|", "|-", ">", ">-"):
                body = []
                i += 1
                while i < len(lines) and (not lines[i].strip() or
                                          len(lines[i]) - len(lines[i].lstrip()) > indent):
                    body.append(lines[i])
                    i += 1
                depth = min(len(b) - len(b.lstrip()) for b in body if b.strip())
                joiner = "\n" if value.startswith("|") else " "
                value = joiner.join(b[depth:] for b in body).strip()
                out.append((name, value))
                name = None
                continue
            out.append((name, value.strip("'\"")))
            name = None
        i += 1
    return out
