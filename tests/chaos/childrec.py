#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The exec child of the chaos suite (`leaderd ... -- python3 childrec.py FILE`).

It records its own life in FILE, one line per write(2) on an O_APPEND
descriptor, so the lines of every replica's children can share one file
without tearing:

    start IDENTITY TERM PID T    once, as soon as it runs
    beat IDENTITY TERM PID T     every PERIOD seconds
    stop IDENTITY TERM PID T     on SIGTERM, then exit 0

T is time.monotonic(), CLOCK_MONOTONIC, which every process on the machine
shares, so the records of different children compare directly (and with the
harness's samples and the API server's write log). A SIGKILLed child leaves
no stop line; harness.child_instances() ends its interval one PERIOD after
its last record. Standard library only; it never exits on its own (leaderd
would take that for the workload's exit and release the Lease).
"""
import os
import signal
import sys
import time

PERIOD = 0.02


def main():
    if len(sys.argv) != 2:
        print("usage: childrec.py FILE", file=sys.stderr)
        return 2
    ident = os.environ.get("LEADERD_IDENTITY", "?")
    term = os.environ.get("LEADERD_TERM", "?")
    pid = os.getpid()
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(kind):
        # The time is read just before the write: a record is never later
        # than the moment it claims.
        os.write(fd, f"{kind} {ident} {term} {pid} {time.monotonic():.6f}\n".encode())

    def on_term(_signo, _frame):
        record("stop")
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    record("start")
    while True:
        time.sleep(PERIOD)
        record("beat")


if __name__ == "__main__":
    sys.exit(main())
