# SPDX-License-Identifier: Apache-2.0
"""leaderd_testing: the Python helpers shared by the integration tests
(tests/integration), the chaos suite (tests/chaos), the deployment and image
checks and the benchmarks and demos (tools/). Standard library only.

    apiserver  start, stop and steer the bundled test Lease API server
    cluster    leaderd replicas against it, safety polling, /proc figures
    figures    statistics the benchmarks print

How it is found: the package lives in tests/support. Every script that is
run directly (a runner, a benchmark, a demo, a test module that runs alone)
puts that directory first on sys.path, by a path relative to its own file,
before it imports anything from here:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "support"))  # tests/support
    from leaderd_testing.cluster import Replica

Modules that are imported (test modules, the chaos harness, this package)
never change sys.path. Inside the package, modules import each other
relatively (from .apiserver import ...).
"""
