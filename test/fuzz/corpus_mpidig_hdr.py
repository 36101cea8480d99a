#!/usr/bin/env python3
"""Writes the named starting inputs of fuzz_mpidig_hdr (corpus/mpidig_hdr/) in the layout
fuzz_mpidig_hdr.c reads: the handler's header shape (struct size, offset of its length field,
field size 0/4/8 as 0/1/2), a message length, the receiver's record size, the limit in units of
8 bytes, then the header. Shapes like MPIDIG's (a 72-byte header with an int length at 64).
The files named by a hash beside them are libFuzzer's minimized corpus of a long run."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "mpidig_hdr")


def seed(name, fixed, var_at, vsel, msg_len, rec, hdr, limit8=128):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(struct.pack("<HHBQQB", fixed, var_at, vsel, msg_len, rec, limit8) + hdr)


os.makedirs(OUT, exist_ok=True)
seed("send-plain", 72, 64, 1, 4096, 40, bytes(72))                  # nothing follows
seed("put-flat", 72, 64, 1, 0, 40, bytes(64) + struct.pack("<i", 100) + bytes(4) + bytes(100))
seed("short", 72, 64, 1, 0, 40, bytes(4))                           # 4 bytes of 72
seed("negative", 72, 64, 1, 0, 40, bytes(64) + struct.pack("<i", -1) + bytes(4))
seed("huge8", 80, 72, 2, 0, 40, bytes(72) + struct.pack("<q", 1 << 62))
seed("wrap", 16, 0, 0, (1 << 64) - 8, 40, bytes(16))                # allocation size wraps
