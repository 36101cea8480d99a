#!/usr/bin/env python3
"""Writes the named starting inputs of fuzz_aml_rx (corpus/aml_rx/): well-formed packets of each kind from
rank 1, in and out of sequence, and a CONNECT request from outside the job, in the record
format fuzz_aml_rx.c reads. The layouts are aml_wire.h's (AML_WIRE_VERSION 5). The files
named by a hash beside them are libFuzzer's minimized corpus of a long run (fuzz_aml_rx -merge=1
NEW corpus/aml_rx RUN_CORPUS), which `make check` starts from."""
import os
import struct

from aml_packets import T, full, short, medium  # noqa: F401

RANK1, STRANGER = 1, 3      # fuzz_aml_rx's kinds: the transport says rank 1 / outside the job


def rec(kind, hdr, data=b""):
    return struct.pack("<BHH", kind, len(hdr), len(data)) + hdr + data


inputs = {
    "one_short": rec(RANK1, short("ONE_SHORT", uhdr_len=4) + b"UHDRdata..", b""),
    "one_full": rec(RANK1, full("ONE", uhdr_len=8, msg_len=16, proto=1) + b"uhdr8byt",
                    bytes(range(16))),
    "eager_short": rec(RANK1, medium("EAGER_SFIRST", 100, 0, 7, uhdr_len=8) + b"uhdr8byt",
                       b"a" * 50) +
                   rec(RANK1, medium("EAGER_SCONT", 100, 50, 7, seq=1), b"b" * 50),
    "eager_full": rec(RANK1, full("EAGER_FIRST", msg_len=64, msg_id=3, proto=2), b"c" * 32) +
                  rec(RANK1, full("EAGER_CONT", seq=1, msg_len=64, msg_id=3, addr=32, proto=2),
                      b"d" * 32),
    "adaptive": rec(RANK1, medium("ADAPT_SFIRST", 101, 0, 9), b"e" * 40) +
                rec(RANK1, medium("ADAPT_SDATA", 101, 40, 9), b"f" * 61),
    "adaptive_data_first": rec(RANK1, medium("ADAPT_SDATA", 80, 40, 11), b"g" * 40) +
                           rec(RANK1, medium("ADAPT_SFIRST", 80, 0, 11), b"h" * 40),
    "rndv_scout": rec(RANK1, full("RNDV_SCOUT", msg_len=4097, msg_id=5, addr=0x10000,
                                  aux0=16, proto=3), b"r" * 16) +
                  rec(RANK1, full("RNDV_SCOUT", seq=1, msg_len=4096, msg_id=6, addr=0x20000,
                                  aux0=16, proto=3), b"s" * 16),
    "rndv_put": rec(RANK1, full("RNDV_SCOUT", msg_len=5000, msg_id=8, flags=2, proto=3)),
    "fence": rec(RANK1, full("FENCE_REQ")),
    "quiesce": rec(RANK1, full("QUIESCE", aux0=1)),
    "get_req": rec(RANK1, full("GET_REQ", msg_len=8, addr=0x1000)),
    "rmw_req": rec(RANK1, full("RMW_REQ", addr=0x1000, aux0=1)),
    "out_of_order": rec(RANK1, short("ONE_SHORT", seq=1) + b"late") +
                    rec(RANK1, short("ONE_SHORT", seq=0) + b"first"),
    "rank2_by_header": rec(0, short("ONE_SHORT", src=2) + b"hi"),
    "connect_stranger": rec(STRANGER, full("CONNECT", src=0xffffffff, msg_len=0),
                            struct.pack("<IIIIIIQQIIIIQ", 5, 65536, 8, 256, 65536, 0,
                                        0x1234, 0x5678, 0, 1, 16, 0, 0) +
                            struct.pack("<Q", 0x1234) + b"x" * 8),
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "aml_rx")
os.makedirs(out, exist_ok=True)
for name, b in inputs.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(b)
