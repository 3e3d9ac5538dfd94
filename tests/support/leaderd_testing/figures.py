# SPDX-License-Identifier: Apache-2.0
"""Statistics the benchmarks (tools/bench*.py) print."""


def percentile(values, q):
    """The value at quantile q (0..1) of values, nearest rank; values must
    not be empty."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]
