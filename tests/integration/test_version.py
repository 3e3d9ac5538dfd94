# SPDX-License-Identifier: Apache-2.0
"""One version everywhere: `leaderd --version`, the Makefile's VERSION (which
tags the image, mk/image.mk), the image's version label in the Dockerfile,
and the newest released version in CHANGELOG.md agree. A release bumps them
together or this fails."""
import os
import re
import subprocess
import unittest

from leaderd_testing.cluster import LEADERD

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def read(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


class OneVersion(unittest.TestCase):
    def test_binary_makefile_image_and_changelog_agree(self):
        make = re.search(r"^VERSION\s*:=\s*(\S+)\s*$", read("Makefile"), re.M)
        self.assertIsNotNone(make, "no VERSION := in the Makefile")
        version = make.group(1)
        out = subprocess.run([LEADERD, "--version"], capture_output=True, text=True,
                             timeout=10)
        self.assertEqual(out.returncode, 0)
        self.assertEqual(out.stdout.strip(), "leaderd " + version)
        label = re.search(r'org\.opencontainers\.image\.version="([^"]+)"',
                          read("Dockerfile"))
        self.assertIsNotNone(label, "no image version label in the Dockerfile")
        self.assertEqual(label.group(1), version)
        self.assertIn("IMAGE      ?= localhost/leaderd:$(VERSION)", read("mk/image.mk"))
        released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$",
                              read("CHANGELOG.md"), re.M)
        self.assertTrue(released, "no released version in CHANGELOG.md")
        self.assertEqual(released[0], version,
                         "the newest version in CHANGELOG.md is not the binary's")


if __name__ == "__main__":
    unittest.main()
