"""aml's packet headers as the fuzz targets' corpus generators write them (aml_wire.h's
layouts, AML_WIRE_VERSION 5): the packet types, and full (72-byte), short (8-byte) and medium
(24-byte) headers."""
import struct

T = dict(ONE=1, EAGER_FIRST=2, EAGER_CONT=3, RNDV_SCOUT=4, RNDV_DONE=5, CMPL=6, GET_REQ=7,
         RMW_REQ=8, RMW_REPLY=9, FENCE_REQ=10, FENCE_ACK=11, ADAPT_FIRST=12, ADAPT_DATA=13,
         ADAPT_TOKEN=14, RNDV_RTR=15, RNDV_FIN=16, ONE_SHORT=17, EAGER_SFIRST=18,
         EAGER_SCONT=19, ADAPT_SFIRST=20, ADAPT_SDATA=21, RNDV_SSCOUT=22, QUIESCE=23,
         CONNECT=24)


def full(t, src=1, seq=0, handler=0, uhdr_len=0, msg_len=0, msg_id=0, addr=0, cntr=0,
         aux0=0, aux1=0, proto=0, flags=0):
    return struct.pack("<BBBBHHIIIIQQQQQQ", T[t], proto, flags, 0, handler, 0, src, seq,
                       uhdr_len, 0, msg_len, msg_id, addr, cntr, aux0, aux1)


def short(t, src=1, seq=0, handler=0, uhdr_len=0):
    return struct.pack("<BBBBHH", T[t], handler, uhdr_len, src >> 16, src & 0xffff,
                       seq & 0xffff)


def medium(t, msg_len, off, msg_id, **kw):
    return short(t, **kw) + struct.pack("<IIQ", msg_len, off, msg_id)
