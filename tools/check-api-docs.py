#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Keeps docs/http-api.md true to the code, both ways:

- every metric name the daemon exports (cmd/leaderd/core/metrics.c) is
  documented, and every leaderd_* name the page shows is exported;
- every path the sidecar's HTTP server routes (cmd/leaderd/http/, spelled in
  http_paths.h) is
  documented;
- every status code the HTTP server and the write gate answer by
  themselves (cmd/leaderd/http, cmd/leaderd/proxy) appears on the page;
- every flag of the daemon (config.c's table, through docs/options.md, which
  `make man-check` keeps equal to it) that the page names exists.

Prints one line per finding and "check-api-docs: N findings"; exit 1 when N
is not 0. Run by `make lint`."""
import glob
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def sources(pattern):
    return "\n".join(read(os.path.relpath(p, ROOT))
                     for p in sorted(glob.glob(os.path.join(ROOT, pattern))))


def exported_metrics():
    return set(re.findall(r'"(leaderd_[a-z0-9_]+)', read("cmd/leaderd/core/metrics.c")))


def documented_metrics(page):
    names = set(re.findall(r"\b(leaderd_[a-z0-9_]+)", page))
    # Histograms' series are documented by their family's name.
    return {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}


def routed_paths():
    # The URLs are spelled once, in http_paths.h; any left in a .c count too.
    text = sources("cmd/leaderd/http/*.h") + sources("cmd/leaderd/http/*.c")
    paths = set(re.findall(r'"(/[a-z]+)(?:/|")', text))
    return {p for p in paths if len(p) > 1}


def answered_codes():
    text = sources("cmd/leaderd/http/*.c") + sources("cmd/leaderd/proxy/*.c")
    calls = r"(?:queue_error|queue|reply_error|answer|ld_pxe_verdict_printf|answer_code)"
    codes = set(re.findall(calls + r"\([^,()]*,\s*(\d{3})\b", text))
    return {c for c in codes if c != "200"}


def flags_named(page):
    return set(re.findall(r"`(--[a-z][a-z0-9-]+)", page))


def main():
    page = read("docs/http-api.md")
    options = read("docs/options.md")
    findings = []
    exported = exported_metrics()
    documented = documented_metrics(page)
    for m in sorted(exported - documented):
        findings.append("metric %s is exported but not in docs/http-api.md" % m)
    for m in sorted(documented - exported):
        findings.append("docs/http-api.md shows %s, which leaderd does not export" % m)
    for p in sorted(routed_paths()):
        if not re.search(re.escape(p) + r"\b", page):
            findings.append("route %s is served but not in docs/http-api.md" % p)
    for c in sorted(answered_codes()):
        if not re.search(r"\b%s\b" % c, page):
            findings.append("status %s is answered but not in docs/http-api.md" % c)
    for f in sorted(flags_named(page)):
        if f not in options:
            findings.append("docs/http-api.md names %s, which is no flag of leaderd" % f)
    for line in findings:
        print("check-api-docs: " + line)
    print("check-api-docs: %d findings" % len(findings))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
