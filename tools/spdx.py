#!/usr/bin/env python3
"""Every source file the project tracks names its licence in its first
lines, as SPDX-License-Identifier: Apache-2.0 (LICENSE).

  tools/spdx.py          lists the files without it; exit 1 if any
  tools/spdx.py --fix    adds it: a C comment on the first line, or a
                         '#' line after a shebang or at the top

Run by `make lint`."""
import subprocess
import sys

TAG = "SPDX-License-Identifier: Apache-2.0"
C_EXT = (".c", ".h")
HASH_EXT = (".py", ".sh", ".mk")


def tracked():
    out = subprocess.run(["git", "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in out.decode().split("\0"):
        if name.endswith(C_EXT + HASH_EXT) or name == "Makefile":
            yield name


def has_tag(text):
    return any(TAG in line for line in text.splitlines()[:3])


def with_tag(name, text):
    if name.endswith(C_EXT):
        return "/* %s */\n%s" % (TAG, text)
    lines = text.splitlines(keepends=True)
    at = 1 if lines and lines[0].startswith("#!") else 0
    lines.insert(at, "# %s\n" % TAG)
    return "".join(lines)


def main():
    fix = "--fix" in sys.argv[1:]
    missing = []
    for name in tracked():
        with open(name, encoding="utf-8") as f:
            text = f.read()
        if has_tag(text):
            continue
        if fix:
            with open(name, "w", encoding="utf-8") as f:
                f.write(with_tag(name, text))
        else:
            missing.append(name)
    for name in missing:
        print("spdx: %s: no '%s' in its first lines" % (name, TAG))
    print("spdx: %d files without a licence tag" % len(missing))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
