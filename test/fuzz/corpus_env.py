#!/usr/bin/env python3
"""Writes the named starting inputs of fuzz_env (corpus/env/): a first byte choosing the parser
(0: libmpioverlap's integer settings, 1: MPS_ARENA_BYTES, 2: a native hand-off descriptor),
then the setting's text or the descriptor (arena, page exponent, offset: 8 bytes each; length,
data bytes: 4 each). The files named by a hash beside them are libFuzzer's minimized corpus of
a long run."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "env")


def seed(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def desc(arena, page_log2, off, length, nbytes):
    return bytes([2]) + struct.pack("<QQQIi", arena, page_log2, off, length, nbytes)


os.makedirs(OUT, exist_ok=True)
for name, text in [("ov-42", "42"), ("ov-minus-zero", "-0"), ("ov-space", " 5"),
                   ("ov-plus", "+7"), ("ov-huge", "99999999999999999999"), ("ov-trailing", "5x")]:
    seed(name, bytes([0]) + text.encode())
for name, text in [("arena-64k", "65536"), ("arena-hex", "0x10000"), ("arena-space-minus", " -1"),
                   ("arena-minus-zero", "-0"), ("arena-over-max", "1099511627777"),
                   ("arena-octal", "0200000")]:
    seed(name, bytes([1]) + text.encode())
seed("desc-ok", desc(1 << 16, 12, 4096, 8192, 100))
seed("desc-past-end", desc(1 << 16, 12, 61440, 8192, 100))
seed("desc-wrap", desc(1 << 16, 12, (1 << 64) - 4096, 8192, 100))
seed("desc-unaligned", desc(1 << 16, 12, 100, 4096, 10))
seed("desc-bytes-over", desc(1 << 16, 12, 0, 4096, 5000))
