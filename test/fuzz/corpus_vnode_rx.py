#!/usr/bin/env python3
"""Writes the named starting inputs of fuzz_vnode_rx (corpus/vnode_rx/): a configuration byte,
then operations of the peers (well-formed records carrying aml packets, hand-made and malformed
ones, writes into ring control blocks, the summary bitmap and export slots) and of the victim
(polls, sends, sleeps, direct access), in the format fuzz_vnode_rx.c reads. Ring geometry:
8 KiB rings (512 units of 16 bytes), records of up to 1608 bytes; the aml layouts are
aml_wire.h's (AML_WIRE_VERSION 5), as in corpus_aml_rx.py. The files named by a hash beside
them are what a run found, merged by libFuzzer (fuzz_vnode_rx -merge=1 -use_counters=0
corpus/vnode_rx RUN_CORPUS: edges, not hit counts, or the corpus grows past 600 files), which
`make check` starts from."""
import os
import struct

from aml_packets import T, full, short, medium  # noqa: F401

NUNITS, MAX_PKT, MARK = 512, 1608, lambda idx: 0x8000 | (idx & 0x7fff)
PAD_HLEN = 0xffff
SHORT, LONG = 4, 16


def peer_va(local):
    """a peer's memory as the fuzz target's single copy sees it"""
    return (local + 1) << 32


def key(slot, gen):
    """vnode_share.c's export key"""
    return gen << 8 | slot | 0x80


# ---- aml's rkeys ----------------------------------------------------------------------

def vrange(addr, length, k=0):
    """aml_vnode.c's rkey: the range a peer advertised, and its export key"""
    return struct.pack("<QQQ", addr, length, k)


# ---- the fuzz target's operations -----------------------------------------------------

def config(size=2, last=False, put=False, fence=False, intr=False):
    return bytes([{2: 0, 3: 1, 10: 3}[size] | last << 2 | put << 3 | fence << 4 | intr << 5])


def op(code, arg=0):
    return bytes([code | arg << 3])


def send(hdr, data=b"", peer=0):
    return op(0, peer) + struct.pack("<HH", len(hdr), len(data)) + hdr + data


def rec(fl, word, length=0, hlen=0, src=0, body=b"", peer=0):
    return op(1, peer) + struct.pack("<BIIHHH", fl, word, length, hlen, src, len(body)) + body


FIX_MARK, LONG_HDR = 1, 2
ADV_READ, ADV_NONE, ADV_UNITS, ADV_END = 0 << 2, 1 << 2, 2 << 2, 3 << 2

R_UNITS, R_IN_CTL, R_OUT_CTL, R_SUMMARY, R_RANKS, R_XSLOT_VICTIM, R_XSLOT_PEER = range(7)
# vnode_xslot_t: state, addr, len, raddr, rlen, chunk, claimer (32), write (32), xoff, next, done
X_STATE, X_ADDR, X_LEN, X_RADDR, X_NEXT, X_DONE = 0, 8, 16, 24, 64, 72
X_FREE, X_OPEN, X_CLAIMED, X_BUSY = range(4)
CTL_TAIL, CTL_DIRECT, CTL_TX_WAIT = 0, 64, 128


def poke(region, off, data, peer=0, deferred=False):
    return op(2, peer << 1 | deferred) + struct.pack("<BHB", region, off, len(data)) + data


def poll(k=1):
    return op(3, k - 1)


def vsend(length, uhdr=b"", peer=0):
    return op(4, peer) + struct.pack("<I", length)[:3] + bytes([len(uhdr)]) + uhdr


def drain(peer=0):
    return op(5, peer)


ARM, ACCEPT, REJECT = op(6, 0), op(6, 1), op(6, 2)


def xkey(addr, length, vaddr, vlen, vkey, raddr, n, put=False, peer=0):
    return op(7, peer << 1 | put) + struct.pack("<QQQQQQH", addr, length, vaddr, vlen, vkey,
                                                 raddr, n)


def one_short(seq, body=b"", src=1, handler=0, uhdr=b""):
    return short("ONE_SHORT", src=src, seq=seq, handler=handler, uhdr_len=len(uhdr)) + uhdr + body


def shorts(n, size=244, src=1, peer=0, seq0=0, every=10):
    """n compact one-packet messages of size inline bytes (252-byte records: 16 units each),
    the victim polling after every `every`"""
    b = b""
    for i in range(n):
        b += send(one_short(seq0 + i, bytes([i & 0xff]) * size, src=src), peer=peer)
        if (i + 1) % every == 0:
            b += poll(4)
    return b


def slot(state, addr=None, length=None):
    b = struct.pack("<Q", state)
    if addr is not None:
        b += struct.pack("<QQ", addr, length)
    return b


def claim(raddr, rlen, chunk, claimer, write=0, xoff=0, nxt=0, done=0):
    """a claimer's fields of a slot, from X_RADDR on"""
    return struct.pack("<QQQIIQQQ", raddr, rlen, chunk, claimer, write, xoff, nxt, done)


inputs = {
    # well-formed records
    "short_records": config() + send(one_short(0, b"hello", uhdr=b"UHDR")) +
    send(one_short(1, b"x" * 20)) + send(one_short(2)) + poll(),
    "long_record": config() + send(full("ONE", uhdr_len=8, msg_len=400, proto=1) + b"uhdr8byt",
                                   bytes(range(256)) + bytes(144)) + poll(),
    "eager": config() + send(medium("EAGER_SFIRST", 1000, 0, 7, uhdr_len=8) + b"uhdr8byt",
                             b"a" * 500) +
    send(medium("EAGER_SCONT", 1000, 500, 7, seq=1), b"b" * 500) + poll(2),
    "wrap_pad": config() + shorts(100) + poll(4),
    "victim_last": config(size=3, last=True) + send(one_short(0, b"from0", src=0), peer=0) +
    send(one_short(0, b"from1", src=1), peer=1) + poll(),
    "summary_ten": config(size=10) + send(one_short(0, b"nine", src=9), peer=8) +
    send(one_short(0, b"four", src=4), peer=3) + poll() +
    send(one_short(1, b"nine", src=9), peer=8) + poll(2),
    "summary_nine": config(size=10) +
    b"".join(shorts(20, size=20, src=p + 1, peer=p, every=100) for p in range(9)) + poll(8) +
    poll(8),
    "demote_idle": config(size=10) + send(one_short(0, b"once")) + poll() +
    poll(8) * 520 + send(one_short(1, b"again")) + poll(),
    "summary_bits": config(size=10) + poke(R_SUMMARY, 0, struct.pack("<Q", 0xfc03)) + poll() +
    send(one_short(0, b"two", src=2), peer=1) + poll(),
    "tx_wait": config() + poke(R_IN_CTL, CTL_TX_WAIT, struct.pack("<I", 1)) +
    send(one_short(0, b"x")) + poll(),
    "victim_sends": config() + vsend(100, b"uhdr8byt") + vsend(2000) + vsend(0) + drain() +
    poll(),
    "victim_sends_full": config() + b"".join(vsend(1000) for _ in range(12)) + drain() +
    poll(2) + drain(),
    "out_tail": config() + poke(R_OUT_CTL, CTL_TAIL, struct.pack("<Q", 1 << 40)) +
    vsend(1000) + vsend(1000) + poll() + drain(),
    "out_direct": config(size=10) + poke(R_OUT_CTL, CTL_DIRECT, struct.pack("<I", 1), peer=2) +
    vsend(10, peer=2) + vsend(10, peer=3) + drain(peer=2) + drain(peer=3),
    # the peer sleeps (sleeping ARMED, sleepy): the victim's packets ring its doorbell
    "wake_peer": config() + poke(R_RANKS, 32 + 20, struct.pack("<III", 1, 0, 1)) + vsend(8) +
    vsend(8) + drain(),
    "interrupt": config(intr=True) + poll() + ARM + send(one_short(0, b"wake")) + ARM + poll(),
    "fence_always": config(size=3, fence=True) + send(one_short(0, b"f")) + vsend(8) + poll() +
    drain(),
    # single copy, the victim pulling from a peer's range
    "rndv_plain": config() + send(full("RNDV_SCOUT", msg_len=5000, msg_id=1, addr=peer_va(1),
                                       aux0=24, proto=3), vrange(peer_va(1), 8192)) +
    poll() + drain(),
    "rndv_shared": config() +
    poke(R_XSLOT_PEER, 0, slot(1 << 2 | X_OPEN, peer_va(1), 65536)) +
    send(full("RNDV_SCOUT", msg_len=65536, msg_id=1, addr=peer_va(1), aux0=24, proto=3),
         vrange(peer_va(1), 65536, key(0, 1))) + poll() + drain(),
    # the exporter takes the second chunk while the victim copies the first (nothing at the
    # header handler, then that): the victim's copy completes once the exporter says it is done
    "rndv_shared_race": config() +
    poke(R_XSLOT_PEER, 0, slot(1 << 2 | X_OPEN, peer_va(1), 65536)) +
    poke(R_UNITS, 0, b"", deferred=True) +
    poke(R_XSLOT_PEER, X_NEXT, struct.pack("<Q", 1 << 32 | 2), deferred=True) +
    send(full("RNDV_SCOUT", msg_len=65536, msg_id=1, addr=peer_va(1), aux0=24, proto=3),
         vrange(peer_va(1), 65536, key(0, 1))) + poll() +
    poke(R_XSLOT_PEER, X_DONE, struct.pack("<Q", 65536)) + poll(),
    "rndv_shared_busy": config() +
    poke(R_XSLOT_PEER, 0, slot(1 << 2 | X_BUSY, peer_va(1), 65536)) +
    send(full("RNDV_SCOUT", msg_len=65536, msg_id=1, addr=peer_va(1), aux0=24, proto=3),
         vrange(peer_va(1), 65536, key(0, 1))) + poll() + drain(),
    "rndv_deferred": config() +
    send(full("RNDV_SCOUT", msg_len=4097, msg_id=1, addr=peer_va(1), aux0=24, proto=3),
         vrange(peer_va(1), 8192)) +
    send(full("RNDV_SCOUT", seq=1, msg_len=70001, msg_id=2, addr=peer_va(1), aux0=24, proto=3),
         vrange(peer_va(1), 70001)) + poll() + ACCEPT + REJECT + poll() + drain(),
    # single copy, a peer copying the victim's exported buffer with the victim's help
    "victim_export_help": config() + vsend(65536) +
    poke(R_XSLOT_VICTIM, X_RADDR, claim(peer_va(1), 65536, 32768, 1)) +
    poke(R_XSLOT_VICTIM, X_STATE, slot(1 << 2 | X_BUSY)) + poll() + drain() +
    send(full("RNDV_DONE", msg_id=1)) + poll(),
    # a claimer's 1-byte chunks: refused (whole pages only), not a system call per byte
    "help_byte_chunks": config() + vsend(65536) +
    poke(R_XSLOT_VICTIM, X_RADDR, claim(peer_va(1), 65536, 1, 1)) +
    poke(R_XSLOT_VICTIM, X_STATE, slot(1 << 2 | X_BUSY)) + poll(),
    "victim_export_write": config(size=3) + vsend(40000, peer=1) +
    poke(R_XSLOT_VICTIM, X_RADDR, claim(peer_va(2), 40000, 20480, 2, write=1), peer=1) +
    poke(R_XSLOT_VICTIM, X_STATE, slot(1 << 2 | X_BUSY), peer=1) + poll() + drain(peer=1),
    "victim_put": config(put=True) + vsend(65536) + drain() +
    poke(R_XSLOT_PEER, 0, slot(1 << 2 | X_OPEN, peer_va(1), 65536)) +
    send(full("RNDV_RTR", msg_len=65536, msg_id=1, addr=peer_va(1), aux0=24),
         vrange(peer_va(1), 65536, key(0, 1))) + poll() + drain() +
    send(full("RNDV_DONE", seq=1, msg_id=1)) + poll(),
    "victim_put_landing": config(put=True) +
    send(full("RNDV_SCOUT", msg_len=8000, msg_id=1, flags=2, proto=3)) + poll() + drain() +
    poke(R_XSLOT_VICTIM, X_RADDR, claim(peer_va(1), 8000, 4096, 1, write=1)) +
    poke(R_XSLOT_VICTIM, X_STATE, slot(1 << 2 | X_BUSY)) + poll() +
    send(full("RNDV_FIN", seq=1, msg_id=1)) + poll() + drain(),
    "xkey_get": config() + xkey(peer_va(1), 65536, peer_va(1), 65536, 0, peer_va(1) + 64, 1000) +
    poll(),
    "xkey_shared_put": config() + poke(R_XSLOT_PEER, 0, slot(3 << 2 | X_OPEN, peer_va(1), 65536)) +
    xkey(peer_va(1), 65536, peer_va(1), 65536, key(0, 3), peer_va(1), 8192, put=True) + poll(),
    # malformed records, each at the victim's next unit
    "bad_mark": config() + rec(0, MARK(7) | 8 << 16 | 8 << 24) + poll(),
    "short_hlen": config() + rec(FIX_MARK, 8 << 16 | 9 << 24, body=b"x" * 8) + poll(),
    "long_short_len": config() + rec(FIX_MARK | LONG_HDR, 0, 100, 8, 1, b"y" * 100) + poll(),
    "long_src": config() + rec(FIX_MARK | LONG_HDR, 0, 300, 8, 5, b"z" * 300) + poll(),
    "long_too_long": config() + rec(FIX_MARK | LONG_HDR, 0, MAX_PKT + 1, 8, 1) + poll(),
    "pad_at_start": config() + rec(FIX_MARK | LONG_HDR, 0, NUNITS * 16 - 16, PAD_HLEN, 1) +
    poll(),
    "pad_bad_len": config() + shorts(30) + rec(FIX_MARK | LONG_HDR, 0, 100, PAD_HLEN, 1) +
    poll(),
    "pad_ok": config() + shorts(30) + rec(FIX_MARK | LONG_HDR, 0, 32 * 16 - 16, PAD_HLEN, 1) +
    send(one_short(30, b"after the pad")) + poll(),
    "past_end": config() + shorts(30) +
    rec(FIX_MARK | LONG_HDR, 0, MAX_PKT, 72, 1, full("ONE", seq=30, msg_len=MAX_PKT - 72)) +
    poll(),
    "stale_unit": config() + send(one_short(0, b"ok")) + poke(R_UNITS, 0, b"\x01\x02\x03\x04") +
    poll(),
    "race_record": config() + poke(R_UNITS, 8160, struct.pack("<I", 0xffffffff), deferred=True) +
    send(one_short(0, b"first")) + send(one_short(1, b"second")) + poll(),
    "wrong_src_pkt": config(size=3) + send(one_short(0, b"two", src=2)) + poll(),
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "vnode_rx")
os.makedirs(out, exist_ok=True)
for name, b in inputs.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(b)
