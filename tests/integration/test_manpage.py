# SPDX-License-Identifier: Apache-2.0
"""The man page, docs/leaderd.8, against the binary it describes: every flag
`leaderd --help` lists is in the page's OPTIONS with the same value name,
variable and default (and no other flag is), every variable leaderd reads is
in its ENVIRONMENT, its version is the binary's, and groff formats it without
a warning. That the committed page is what tools/gen-man.c writes from
cmd/leaderd/shell/config.c is `make man-check`'s to say (`make lint` runs it).

groff comes with Debian's groff-base; without it these tests fail, unless
LEADERD_ALLOW_SKIP=1 lets them be skipped."""
import os
import re
import shutil
import subprocess
import unittest

from leaderd_testing.apiserver import REPO
from leaderd_testing.cluster import LEADERD

PAGE = os.path.join(REPO, "docs", "leaderd.8")
SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "ENVIRONMENT", "SIGNALS",
            "EXIT STATUS", "FILES", "EXAMPLES", "SEE ALSO"]
# Read when neither a flag nor its variable gives the value, and set for the
# command after "--".
FALLBACK_VARIABLES = ["POD_NAME", "POD_NAMESPACE", "POD_UID", "KUBECONFIG",
                      "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"]
COMMAND_VARIABLES = ["LEADERD_LEASE", "LEADERD_IDENTITY", "LEADERD_TERM"]
# Where man(1) puts a tag of a tagged paragraph, and its text.
TAG_INDENT = 7
TEXT_INDENT = 14


def run_help():
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEADERD_")}
    p = subprocess.run([LEADERD, "--help"], capture_output=True, text=True, env=env,
                       timeout=10)
    if p.returncode != 0:
        raise AssertionError(f"leaderd --help exited {p.returncode}: {p.stderr}")
    return p.stdout


def help_flags(text):
    """{flag: (value name or None, variable or None, default or None)} from
    --help's "Flags:" list, in its order."""
    flags = {}
    flag = None
    for line in text.splitlines():
        m = re.fullmatch(r"  (--[a-z0-9-]+)(?: (\S+))?", line)
        if m:
            flag = m.group(1)
            flags[flag] = (m.group(2), None, None)
            continue
        m = re.fullmatch(r" {8}env (\S+?)(?:, default (\S+))?", line)
        if m and flag:
            flags[flag] = (flags[flag][0], m.group(1), m.group(2))
    return flags


def render(page):
    """The page as plain text, as man shows it, and groff's complaints."""
    p = subprocess.run(["groff", "-man", "-Tascii", "-P-cbou", "-ww", page],
                       capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"),
                       timeout=30)
    if p.returncode != 0:
        raise AssertionError(f"groff exited {p.returncode}: {p.stderr}")
    return p.stdout, p.stderr


def sections(text):
    """{heading: [lines]} of a rendered page, and the headings in order."""
    out, order, current = {}, [], None
    for line in text.splitlines():
        if re.fullmatch(r"[A-Z][A-Z ]*[A-Z]", line):
            current = line
            order.append(line)
            out[current] = []
        elif current:
            out[current].append(line)
    return out, order


def indent(line):
    return len(line) - len(line.lstrip(" "))


def blocks(lines):
    """The runs of non-blank lines; a subsection's heading is one of its own."""
    block = []
    for line in lines + [""]:
        if line.strip() and indent(line) < TAG_INDENT:
            if block:
                yield block
            yield [line]
            block = []
        elif line.strip():
            block.append(line)
        elif block:
            yield block
            block = []


def subsections(lines):
    """{heading: [lines]} of a section's subsections."""
    out, current = {}, None
    for line in lines:
        if line.strip() and indent(line) < TAG_INDENT:
            current = line.strip()
            out[current] = []
        elif current:
            out[current].append(line)
    return out


def tagged(lines):
    """{tag: text} of a section's tagged paragraphs. Tags start at
    TAG_INDENT, their text at TEXT_INDENT; several tags may share one text
    (.TQ), a short tag shares its line with the text, and an indented block
    after a blank line continues the text. Plain paragraphs are left out."""
    entries, tags = {}, []
    for block in blocks(lines):
        n_head = 0
        while n_head < len(block) and indent(block[n_head]) == TAG_INDENT:
            n_head += 1
        rest = [line.strip() for line in block[n_head:]]
        if any(indent(line) < TEXT_INDENT for line in block[n_head:]):
            tags = []
            continue
        if n_head == 0:
            for tag in tags:
                entries[tag] = " ".join([entries[tag]] + rest).strip()
            continue
        heads = [line.strip() for line in block[:n_head]]
        first = block[0]
        short = first[TAG_INDENT:TEXT_INDENT]
        if (n_head == 1 and len(first) > TEXT_INDENT and short.endswith(" ")
                and " " not in short.strip() and first[TEXT_INDENT] != " "):
            heads, rest = [short.strip()], [first[TEXT_INDENT:].strip()] + rest
        elif not rest:
            tags = []
            continue
        tags = heads
        for tag in tags:
            entries[tag] = " ".join(rest)
    return entries


class ManPage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not shutil.which("groff"):
            why = "groff is not installed (Debian: apt-get install groff-base)"
            if os.environ.get("LEADERD_ALLOW_SKIP") == "1":
                raise unittest.SkipTest(why)
            raise AssertionError(why + "; LEADERD_ALLOW_SKIP=1 skips these tests instead")
        cls.help = run_help()
        cls.text, cls.warnings = render(PAGE)
        cls.sections, cls.order = sections(cls.text)

    def test_formats_without_warnings(self):
        self.assertEqual(self.warnings, "")
        p = subprocess.run(["groff", "-man", "-ww", "-z", PAGE], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual((p.returncode, p.stderr), (0, ""))

    def test_has_the_sections_of_a_daemons_page_in_order(self):
        self.assertEqual(self.order, SECTIONS)

    def test_every_flag_is_in_options_with_its_value_variable_and_default(self):
        flags = help_flags(self.help)
        self.assertIn("--lease-name", flags)
        self.assertEqual(flags["--listen"][2], "0.0.0.0:4040")
        options = tagged(self.sections["OPTIONS"])
        by_flag = {tag.split(" ")[0]: (tag, text) for tag, text in options.items()}
        self.assertEqual(list(by_flag), list(flags))
        for flag, (metavar, env, default) in flags.items():
            with self.subTest(flag=flag):
                tag, text = by_flag[flag]
                self.assertEqual(tag, f"{flag} {metavar}" if metavar else flag)
                m = re.search(r"Environment: (\S+?)(?:; default: (\S+))?\.$", text)
                if env is None:
                    self.assertIsNone(m, text)
                    continue
                self.assertIsNotNone(m, text)
                self.assertEqual((m.group(1), m.group(2)), (env, default))

    def test_every_variable_is_in_environment(self):
        parts = subsections(self.sections["ENVIRONMENT"])
        self.assertEqual(list(parts), ["Read by leaderd", "Set for the command after --"])
        read = tagged(parts["Read by leaderd"])
        flag_vars = [v for _, v, _ in help_flags(self.help).values() if v]
        self.assertGreater(len(flag_vars), 10)
        self.assertEqual(sorted(read), sorted(flag_vars + FALLBACK_VARIABLES))
        for flag, (_, env, _) in help_flags(self.help).items():
            if env:
                self.assertIn(flag, read[env])
        for name in FALLBACK_VARIABLES:
            self.assertNotEqual(read[name], "", name)
        command = tagged(parts["Set for the command after --"])
        self.assertEqual(sorted(command), sorted(COMMAND_VARIABLES))

    def test_version_is_the_binarys(self):
        p = subprocess.run([LEADERD, "--version"], capture_output=True, text=True,
                           timeout=10)
        self.assertEqual(p.returncode, 0)
        version = p.stdout.strip()
        footer = [line for line in self.text.splitlines() if line.strip()][-1]
        self.assertTrue(footer.startswith(version + " "), (footer, version))

    def test_service_account_files_are_in_files(self):
        flags = help_flags(self.help)
        sa_dir = flags["--service-account-dir"][2]
        files = tagged(self.sections["FILES"])
        for name in ("token", "ca.crt", "namespace"):
            self.assertIn(f"{sa_dir}/{name}", files)


if __name__ == "__main__":
    unittest.main()
