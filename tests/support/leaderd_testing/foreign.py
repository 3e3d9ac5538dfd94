# SPDX-License-Identifier: Apache-2.0
"""Binaries of another architecture than the machine's (the image's arm64
leaderd): what an ELF file's header says, and the user-mode emulator that runs
it. Debian's qemu-user-static runs a static binary given on its command line,
without binfmt_misc registration (which needs privileges a CI runner may lack).

Under qemu-user the process the kernel sees is the emulator: /proc/PID/status
counts qemu's own code, its translated-code buffer and the guest's memory
together, so its VmRSS is not the guest binary's figure on a real arm64 node."""
import os
import platform
import shutil
import struct

# ELF e_machine values of the architectures the image is built for.
MACHINES = {62: "amd64", 183: "arm64"}
EMULATORS = {"arm64": "qemu-aarch64-static"}
NATIVE = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())

PT_INTERP = 3


def elf_header(path):
    """{"arch", "type", "interp"} of a 64-bit little-endian ELF file, or None:
    arch from e_machine ("amd64", "arm64" or the number), type "EXEC" or "DYN"
    (a PIE), interp whether it names a program interpreter (a dynamic link)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return None
        e_type, e_machine = struct.unpack_from("<HH", head, 16)
        e_phoff, = struct.unpack_from("<Q", head, 32)
        e_phentsize, e_phnum = struct.unpack_from("<HH", head, 54)
        interp = False
        for i in range(e_phnum):
            f.seek(e_phoff + i * e_phentsize)
            p_type, = struct.unpack("<I", f.read(4))
            interp = interp or p_type == PT_INTERP
    return {"arch": MACHINES.get(e_machine, e_machine),
            "type": {2: "EXEC", 3: "DYN"}.get(e_type, e_type), "interp": interp}


def emulator(arch):
    """The path of the emulator for arch, or None when it is not installed."""
    name = EMULATORS.get(arch)
    return shutil.which(name) if name else None


def wrapper_for(path):
    """The argv prefix that runs the binary at path here: [] for the machine's
    own architecture, [emulator] for another; raises when there is none."""
    head = elf_header(path)
    if head is None or head["arch"] == NATIVE:
        return []
    qemu = emulator(head["arch"])
    if qemu is None:
        raise RuntimeError("%s is an %s binary and %s is not installed (qemu-user-static)"
                           % (os.path.basename(path), head["arch"],
                              EMULATORS.get(head["arch"], "no emulator")))
    return [qemu]
