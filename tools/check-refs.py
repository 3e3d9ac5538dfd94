#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`make lint`'s check that the tree stands on its own.

1. No tracked text file refers to a file outside the repository or to a path
   of one machine: a document next to the checkout, a build machine's home
   or work directory. The tree is read by people who have neither.
2. Every Markdown link to a relative path names a file or folder of the
   tree, and a link with a #fragment names a heading of that document (as
   GitHub makes anchors of headings).
3. Every other text file (code and its comments, YAML, scripts, make
   files) that names a document of the tree (under docs/, or a top-level
   one such as the README), names one that exists.

Each finding is one line, FILE:LINE: what; the last line counts them, and
the exit status is 1 when there is any. Standard library only.
"""
import os
import re
import subprocess
import sys

# Written in pieces so that this file does not match itself.
OUTSIDE = [
    (re.compile("CONTRACT" + r"\.md"), "names a document outside the repository"),
    (re.compile(r"\.\./" + "shared"), "names a folder outside the repository"),
    (re.compile("shared/" + "reference"), "names a folder outside the repository"),
    (re.compile(r"(?:^|[^\w.$}/-])/(?:" + "work|root|home" + r")/"),
     "names a path of one machine"),
]

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^()\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"`[^`]*`")
DOC_PATH = re.compile(r"(?<![\w./-])((?:docs/[\w./-]+|[A-Z][A-Z_]+)\.md)\b")


def tracked_files(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                         stdout=subprocess.PIPE).stdout
    return [p for p in out.decode().split("\0") if p]


def read_text(path):
    """The file's lines, or None for a binary file (a NUL byte or not UTF-8)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def slug(heading):
    """GitHub's anchor for a heading: lower case, markup and punctuation
    dropped (letters, digits, '-', '_' and spaces stay), spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in "-_ ")
    return text.replace(" ", "-")


def prose_lines(lines):
    """(number, line) of the lines outside fenced code blocks."""
    fenced = False
    for n, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def anchors(lines):
    seen = {}
    result = set()
    for _, line in prose_lines(lines):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else "%s-%d" % (base, count))
    for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', "\n".join(lines)):
        result.add(m.group(1))
    return result


def check_links(root, rel, lines, anchor_cache, findings):
    here = os.path.dirname(rel)
    for n, line in prose_lines(lines):
        text = INLINE_CODE.sub("", line)
        for m in list(LINK.finditer(text)) + list(IMAGE.finditer(text)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(here, path)) if path else rel
            if dest.startswith(".."):
                findings.append("%s:%d: link leaves the repository: %s" % (rel, n, target))
                continue
            full = os.path.join(root, dest)
            if not os.path.exists(full):
                findings.append("%s:%d: link to a missing file: %s" % (rel, n, target))
                continue
            if not frag or not dest.endswith(".md"):
                continue
            if dest not in anchor_cache:
                anchor_cache[dest] = anchors(read_text(full) or [])
            if frag not in anchor_cache[dest]:
                findings.append("%s:%d: no heading for #%s in %s" % (rel, n, frag, dest))


def check_doc_paths(root, rel, lines, findings):
    for n, line in enumerate(lines, 1):
        for m in DOC_PATH.finditer(line):
            if not os.path.exists(os.path.join(root, m.group(1))):
                findings.append("%s:%d: names a missing document: %s" % (rel, n, m.group(1)))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    root = os.path.abspath(root)
    findings = []
    anchor_cache = {}
    for rel in tracked_files(root):
        full = os.path.join(root, rel)
        if not os.path.isfile(full):
            continue  # deleted in the work tree, not yet in the index
        lines = read_text(full)
        if lines is None:
            continue
        for n, line in enumerate(lines, 1):
            for pattern, what in OUTSIDE:
                if pattern.search(line):
                    findings.append("%s:%d: %s: %s" % (rel, n, what, line.strip()[:100]))
        if rel.endswith(".md"):
            check_links(root, rel, lines, anchor_cache, findings)
        else:
            check_doc_paths(root, rel, lines, findings)
    for f in findings:
        print(f)
    print("check-refs: %d findings" % len(findings))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
