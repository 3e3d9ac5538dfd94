# SPDX-License-Identifier: Apache-2.0
"""Fake DNS server for resolver-check.sh, on 127.0.0.1:53 inside that script's
network namespace: A 10.96.0.1 for kubernetes.default.svc.cluster.local (no AAAA),
NXDOMAIN for every other name; appends each query's name and type to LOG, whose
first line ("ready") says the socket is bound. Stops after SECONDS.
Usage: resolver-check-dns.py SECONDS LOG"""
import socket
import struct
import sys
import time

ZONE = {"kubernetes.default.svc.cluster.local.": "10.96.0.1"}
TYPES = {1: "A", 28: "AAAA"}


def main(seconds, log_path):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 53))
    sock.settimeout(0.5)
    end = time.monotonic() + seconds
    with open(log_path, "a", buffering=1) as log:
        log.write("ready\n")
        while time.monotonic() < end:
            try:
                data, peer = sock.recvfrom(512)
            except socket.timeout:
                continue
            qid = struct.unpack(">H", data[:2])[0]
            pos, labels = 12, []
            while pos < len(data) and data[pos] and len(labels) < 64:
                labels.append(data[pos + 1:pos + 1 + data[pos]].decode(errors="replace"))
                pos += 1 + data[pos]
            qtype = struct.unpack(">H", data[pos + 1:pos + 3])[0]
            name = ".".join(labels) + "."
            question = data[12:pos + 5]
            log.write("%s %s\n" % (name, TYPES.get(qtype, qtype)))
            if name in ZONE and qtype == 1:
                answer = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 30, 4) + \
                    socket.inet_aton(ZONE[name])
                sock.sendto(struct.pack(">HHHHHH", qid, 0x8180, 1, 1, 0, 0) + question + answer,
                            peer)
            elif name in ZONE:
                sock.sendto(struct.pack(">HHHHHH", qid, 0x8180, 1, 0, 0, 0) + question, peer)
            else:
                sock.sendto(struct.pack(">HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question, peer)


if __name__ == "__main__":
    main(float(sys.argv[1]), sys.argv[2])
