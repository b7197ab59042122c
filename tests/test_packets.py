"""Packets: golden bytes from the §5 bit layouts, round trips, forward compatibility, records."""

import pytest
from hypothesis import given, strategies as st

from spe_emu.errors import SpeEmuError, TraceDecodeError
from spe_emu.spe import packets as P
from spe_emu.spe.packets import (
    BadPacket, Packet, PacketIncomplete, PacketType, Record, decode, describe, encode,
    iter_packets, iter_records,
)


def bits(text: str) -> int:
    """A header byte written as its bit layout, msb first ("10 11 0 000")."""
    value = int(text.replace(" ", ""), 2)
    assert len(text.replace(" ", "")) == 8
    return value


def le(value: int, size: int) -> bytes:
    return value.to_bytes(size, "little")


# ---------------------------------------------------------------------------------------------
# Golden bytes (header layouts from §5.2 / §5.3; payload little-endian, §5.1.3)


def test_pc_address_packet_short_header_el_ns_in_byte7():
    # §5.3.1 short header: 1 0 | SZ=11 | 0 | INDEX=000 ; byte 7 = NS<<7 | EL<<5
    p = P.address_packet(P.ADDR_PC, 0x4000_0080, el=1, ns=1)
    byte7 = (1 << 7) | (0b01 << 5)
    assert byte7 == 0xA0
    assert encode(p) == bytes([bits("10 11 0 000")]) + bytes([0x80, 0, 0, 0x40, 0, 0, 0, byte7])
    assert encode(p).hex(" ") == "b0 80 00 00 40 00 00 00 a0"
    assert (p.type, p.index, p.size, p.extended, p.header, p.length) == \
        (PacketType.ADDRESS, 0, 8, False, 0xB0, 9)


def test_branch_target_packet_el0_and_el3():
    p = P.address_packet(P.ADDR_BRANCH_TARGET, 0x4800_1234, el=0, ns=1)
    assert encode(p) == bytes([bits("10 11 0 001")]) + le(0x4800_1234, 7) + bytes([0x80])
    p = P.address_packet(P.ADDR_BRANCH_TARGET, 0x10, el=3, ns=0)
    assert encode(p) == bytes([0xB1]) + le(0x10, 7) + bytes([0b11 << 5])


def test_pc_drops_address_bits_63_56():
    p = P.address_packet(P.ADDR_PC, 0xFFFF_8000_0000_1000, el=1, ns=1)
    assert encode(p)[1:] == le(0x00FF_8000_0000_1000, 7) + bytes([0xA0])


def test_data_va_packet_top_byte_is_tag():
    p = P.address_packet(P.ADDR_DATA_VA, 0x4800_1000, tag=0x5A)
    assert encode(p) == bytes([bits("10 11 0 010")]) + le(0x4800_1000, 7) + bytes([0x5A])
    # without tag= the address's own top byte is kept
    p = P.address_packet(P.ADDR_DATA_VA, 0xFF00_0000_1234_5678)
    assert encode(p) == bytes([0xB2]) + le(0x1234_5678, 7) + bytes([0xFF])


def test_data_pa_packet_ns_bit_63():
    p = P.address_packet(P.ADDR_DATA_PA, 0x4400_0040, ns=1)
    assert encode(p) == bytes([bits("10 11 0 011")]) + le(0x4400_0040, 7) + bytes([0x80])
    assert encode(P.address_packet(P.ADDR_DATA_PA, 0x40, ns=0))[-1] == 0x00


def test_extended_address_header_splits_index():
    # §5.2.2: byte 0 = 0 0 1 0 0 0 INDEX[4:3]; byte 1 = 1 0 1 1 0 INDEX[2:0]
    index = 0b10_101
    p = P.address_packet(index, 0x1234)
    assert p.extended and p.length == 10
    assert encode(p)[:2] == bytes([bits("001000 10"), bits("10110 101")]) == b"\x22\xb5"
    assert encode(p)[2:] == le(0x1234, 8)
    # index 8 is the first one that needs the extended form
    assert encode(P.address_packet(8, 0))[:2] == bytes([0x21, 0xB0])
    assert not P.address_packet(7, 0).extended


def test_counter_packets_short_extended_and_saturating():
    # §5.3.4 short header: 1 0 | SZ=01 | 1 | INDEX ; 16-bit payload
    assert encode(P.counter_packet(P.COUNTER_TOTAL, 20)) == bytes([bits("10 01 1 000")]) + le(20, 2)
    assert encode(P.counter_packet(P.COUNTER_ISSUE, 3)) == bytes([0x99, 3, 0])
    assert encode(P.counter_packet(P.COUNTER_XLAT, 1)) == bytes([0x9A, 1, 0])
    assert encode(P.counter_packet(P.COUNTER_TOTAL, 0xFFE)) == bytes([0x98, 0xFE, 0x0F])
    assert encode(P.counter_packet(P.COUNTER_TOTAL, 0xFFF)) == bytes([0x98, 0xFF, 0x0F])
    assert encode(P.counter_packet(P.COUNTER_TOTAL, 100_000)) == bytes([0x98, 0xFF, 0x0F])
    assert encode(P.counter_packet(0, 100_000, bits=16)) == bytes([0x98, 0xFF, 0xFF])
    assert encode(P.counter_packet(0b01_011, 7)) == \
        bytes([bits("001000 01"), bits("10011 011"), 7, 0])


@pytest.mark.parametrize("events, header, size", [
    (0, 0x42, 1),
    (1 << P.EV_MISPRED, 0x42, 1),
    (1 << P.EV_LLC_ACCESS, 0x52, 2),
    (1 << P.EV_REMOTE_ACCESS | 1 << P.EV_RETIRED, 0x52, 2),
    (1 << 15, 0x52, 2),
    (1 << 24, 0x62, 4),
    (1 << 31, 0x62, 4),
    (1 << 48, 0x72, 8),
    (1 << 63, 0x72, 8),
])
def test_events_header_by_size(events, header, size):
    # §5.3.7: 0 1 | SZ | 0 0 1 0 with SZ = log2(bytes)
    assert header == bits("01 00 0010") | ({1: 0, 2: 1, 4: 2, 8: 3}[size] << 4)
    assert encode(P.events_packet(events)) == bytes([header]) + le(events, size)


def test_op_type_packets():
    # §5.3.8: 0 1 | SZ=00 | 1 0 | CLASS ; SUBCLASS byte
    assert encode(P.op_type_packet(P.OP_CLASS_OTHER, P.OTHER_UNCOND)) == \
        bytes([bits("01 00 10 00"), 0x00])
    assert encode(P.op_type_packet(P.OP_CLASS_OTHER, P.OTHER_COND)) == b"\x48\x01"
    assert encode(P.op_type_packet(P.OP_CLASS_LDST, P.ldst_gp(store=False))) == b"\x49\x00"
    assert encode(P.op_type_packet(P.OP_CLASS_LDST, P.ldst_gp(store=True))) == b"\x49\x01"
    assert encode(P.op_type_packet(P.OP_CLASS_LDST, P.ldst_simd_fp(store=True))) == \
        bytes([0x49, 0b0000010_1])
    assert encode(P.op_type_packet(P.OP_CLASS_LDST,
                                   P.ldst_extended(store=False, ar=True, excl=True))) == \
        bytes([0x49, 0b000_1_1_0_1_0])
    assert encode(P.op_type_packet(P.OP_CLASS_LDST, P.ldst_extended(store=True, at=True))) == \
        bytes([0x49, 0b000_0_0_1_1_1])
    assert encode(P.op_type_packet(P.OP_CLASS_BRANCH,
                                   P.branch_subclass(cond=True, indirect=False))) == b"\x4a\x01"
    assert encode(P.op_type_packet(P.OP_CLASS_BRANCH,
                                   P.branch_subclass(cond=False, indirect=True))) == b"\x4a\x02"


def test_context_data_source_timestamp_end_padding():
    # §5.3.3: 0 1 | SZ=10 | 0 1 | INDEX, 32-bit payload
    assert encode(P.context_packet(P.CONTEXT_EL1, 0x1234)) == \
        bytes([bits("01 10 01 00")]) + le(0x1234, 4)
    assert encode(P.context_packet(P.CONTEXT_EL2, 7)) == bytes([0x65]) + le(7, 4)
    # §5.3.5: 0 1 | SZ | 0 0 1 1
    assert encode(P.data_source_packet(0x5)) == bytes([bits("01 00 0011"), 0x05])
    assert encode(P.data_source_packet(0x1234, size=2)) == bytes([0x53, 0x34, 0x12])
    # §5.3.10: 0 1 | SZ=11 | 0 0 0 1, 64-bit payload
    assert encode(P.timestamp_packet(1000)) == bytes([bits("01 11 0001")]) + le(1000, 8)
    assert encode(P.end_packet()) == b"\x01"
    assert encode(P.padding_packet()) == b"\x00"


def test_alignment_command_fill():
    # §5.3.2: byte 0 = 0 0 1 0 SIZE, byte 1 = 0x00; next protocol byte aligned to 2**(SIZE+1)
    p = P.alignment_packet(0b0011, offset=5)          # 16-byte alignment
    assert p.size == 16 - 7 and p.length == 11
    assert encode(p) == bytes([bits("0010 0011"), 0x00]) + bytes(9)
    assert P.alignment_packet(0b0001, offset=2).size == 0     # 2 + 2 = 4, already aligned
    assert P.alignment_bytes(0b1111) == 64 * 1024
    buf = bytes(5) + encode(p)
    assert decode(buf, 5) == p
    with pytest.raises(PacketIncomplete):
        decode(buf[:-1], 5)


# ---------------------------------------------------------------------------------------------
# Round trips


addr_index = st.sampled_from([P.ADDR_PC, P.ADDR_BRANCH_TARGET])
u64 = st.integers(0, (1 << 64) - 1)

constructed = st.one_of(
    st.builds(lambda i, a, el, ns: P.address_packet(i, a, el=el, ns=ns),
              addr_index, u64, st.integers(0, 3), st.integers(0, 1)),
    st.builds(lambda a, t: P.address_packet(P.ADDR_DATA_VA, a, tag=t),
              u64, st.none() | st.integers(0, 255)),
    st.builds(lambda a, ns: P.address_packet(P.ADDR_DATA_PA, a, ns=ns), u64, st.integers(0, 1)),
    st.builds(P.address_packet, st.integers(4, 31), u64),
    st.builds(lambda i, v, b: P.counter_packet(i, v, bits=b),
              st.integers(0, 31), st.integers(0, 1 << 20), st.integers(1, 16)),
    st.builds(lambda v: P.events_packet(v & ~P.EVENTS_RAZ_MASK), u64),
    st.builds(P.op_type_packet, st.just(P.OP_CLASS_OTHER), st.integers(0, 1)),
    st.builds(lambda s, k: P.op_type_packet(P.OP_CLASS_LDST, k(s)),
              st.booleans(), st.sampled_from([P.ldst_gp, P.ldst_simd_fp])),
    st.builds(lambda s, ar, ex, at: P.op_type_packet(
        P.OP_CLASS_LDST, P.ldst_extended(s, ar=ar, excl=ex and not at, at=at)),
        st.booleans(), st.booleans(), st.booleans(), st.booleans()),
    st.builds(lambda c, i: P.op_type_packet(P.OP_CLASS_BRANCH, P.branch_subclass(c, i)),
              st.booleans(), st.booleans()),
    st.builds(P.context_packet, st.integers(0, 1), st.integers(0, (1 << 32) - 1)),
    st.builds(lambda s, v: P.data_source_packet(v % (1 << (8 * s)), s),
              st.sampled_from([1, 2]), st.integers(0, 0xFFFF)),
    st.builds(P.timestamp_packet, u64),
    st.just(P.end_packet()),
    st.just(P.padding_packet()),
)


@given(constructed)
def test_decode_encode_round_trip(packet):
    raw = encode(packet)
    assert len(raw) == packet.length
    assert decode(raw) == packet
    assert decode(b"\x00\x01" + raw + b"\xff", 2) == packet


@given(st.integers(0, 15), st.integers(0, 70000))
def test_alignment_round_trip(code, offset):
    p = P.alignment_packet(code, offset)
    assert (offset + p.length) % P.alignment_bytes(code) == 0
    assert decode(bytes(offset) + encode(p), offset) == p


@given(st.binary(min_size=1, max_size=20))
def test_any_bytes_decode_to_a_packet_that_re_encodes_identically(raw):
    try:
        packet = decode(raw)
    except PacketIncomplete as err:
        assert err.available == len(raw) < err.needed
        return
    except BadPacket:
        assert raw[0] & 0xE0 == 0x20 and raw[1] & 0xE0 == 0x20
        return
    if packet.type is PacketType.ALIGNMENT:
        assert encode(packet)[:2] == raw[:2]
    else:
        assert encode(packet) == raw[:packet.length]


def test_every_header_decodes_to_a_packet_the_validating_constructor_accepts():
    # decode() builds packets from precomputed tables without __post_init__; rebuilding each
    # through the validating constructor must give the same packet and the same bytes.
    headers = [bytes([b]) for b in range(256) if b & 0xE0 != 0x20]
    headers += [bytes([b0, b1]) for b0 in range(0x20, 0x40) for b1 in range(256)
                if b1 & 0xE0 != 0x20]
    kinds = set()
    for hdr in headers:
        # Alignment (second byte 0x00) may ask for up to 64 KiB of fill
        raw = hdr + bytes(range(1, 9)) + bytes(1 << 16 if hdr[1:] == b"\x00" else 0)
        p = decode(raw)
        rebuilt = Packet(p.type, p.index, p.payload, p.size, p.extended, p.header)
        assert rebuilt == p, hdr.hex()
        if p.type is PacketType.ALIGNMENT:
            assert encode(rebuilt)[:2] == hdr and p.length == P.alignment_bytes(p.index)
        else:
            assert encode(rebuilt) == raw[:p.length], hdr.hex()
        kinds.add(p.type)
    assert kinds == set(PacketType)


# ---------------------------------------------------------------------------------------------
# Forward compatibility (§5.1.4, D18.1.1), bad packets, truncation


@pytest.mark.parametrize("header, size", [
    (bytes([0x02]), 0), (bytes([0x1F]), 0),          # 0x00-0x1F: no payload
    (bytes([0x44]), 1), (bytes([0x8C]), 1),          # 8-bit payload
    (bytes([0x5C]), 2), (bytes([0xD7]), 2),          # 16-bit payload
    (bytes([0x6F]), 4), (bytes([0xE3]), 4),          # 32-bit payload
    (bytes([0x7A]), 8), (bytes([0xB8]), 8),          # 64-bit payload (0xB8: not address)
    (bytes([0x58]), 2),                              # op-type pattern with SZ != 0
    (bytes([0x24, 0xB0]), 8),                        # extended with byte-0 bits [4:2] != 0
    (bytes([0x30, 0x98]), 2),                        # ... bit 4 set, counter byte 1
    (bytes([0x20, 0x55]), 2),                        # extended, byte 1 not address/counter
    (bytes([0x30, 0x00]), 0),                        # alignment with byte-0 bit 4 set
    (bytes([0x21, 0x01]), 0),                        # extended, byte 1 in 0x00-0x1F
])
def test_unknown_packets_are_skipped_by_header_size(header, size):
    payload = bytes(range(0xA0, 0xA0 + size))
    buf = header + payload + encode(P.end_packet())
    p = decode(buf)
    assert p.type is PacketType.UNKNOWN
    assert p.size == size and p.length == len(header) + size
    assert p.payload == int.from_bytes(payload, "little")
    assert p.header == header[0]
    assert encode(p) == header + payload
    assert [(off, q.type) for off, q in iter_packets(buf)] == \
        [(0, PacketType.UNKNOWN), (len(header) + size, PacketType.END)]


def test_bad_packet_then_resync_one_byte_later():
    buf = bytes([0x20, 0x3F, 0x00]) + encode(P.end_packet())
    with pytest.raises(BadPacket) as info:
        decode(buf)
    assert info.value.offset == 0 and info.value.header == b"\x20\x3f"
    assert str(info.value) == "bad SPE packet header at offset 0x0: 20 3f"
    assert isinstance(info.value, TraceDecodeError) and isinstance(info.value, SpeEmuError)
    items = list(iter_packets(buf))
    assert isinstance(items[0][1], BadPacket) and items[0][0] == 0
    # byte 1 (0x3F 0x00) is an alignment command with byte-0 bit 4 set: reserved -> UNKNOWN
    assert [(off, p.type) for off, p in items[1:]] == \
        [(1, PacketType.UNKNOWN), (3, PacketType.END)]


def test_truncated_packet_resynchronises_one_byte_later_as_perf():
    full = encode(P.address_packet(P.ADDR_PC, 0x4800_0000, el=0, ns=1))
    buf = encode(P.end_packet()) + full[:5]          # b0 00 00 00 48: cut off
    with pytest.raises(PacketIncomplete) as info:
        decode(buf, 1)
    assert (info.value.offset, info.value.needed, info.value.available) == (1, 9, 5)
    assert str(info.value) == "truncated SPE packet at offset 0x1: needs 9 bytes, 5 available"
    items = list(iter_packets(buf))
    assert items[0] == (0, P.end_packet())
    # perf's decoder: "Bad packet!" for the cut-off header, then the next byte: three
    # Padding bytes, and 0x48 (an Operation Type header) that is cut off as well
    assert [(off, type(it).__name__ if not isinstance(it, Packet) else it.type.name)
            for off, it in items[1:]] == [(1, "PacketIncomplete"), (2, "PADDING"),
                                          (3, "PADDING"), (4, "PADDING"),
                                          (5, "PacketIncomplete")]


def test_lone_extended_prefix_needs_more_bytes():
    with pytest.raises(PacketIncomplete) as info:
        decode(b"\x21")
    assert (info.value.needed, info.value.available) == (2, 1)
    with pytest.raises(PacketIncomplete):
        decode(b"\x01", 1)


def test_packet_validation_errors():
    with pytest.raises(ValueError, match="needs the extended header"):
        Packet(PacketType.ADDRESS, index=9, payload=0, size=8)
    with pytest.raises(ValueError, match="does not match"):
        Packet(PacketType.END, header=0x02)
    with pytest.raises(ValueError, match="announces 8 payload bytes"):
        Packet(PacketType.TIMESTAMP, payload=1, size=4)
    with pytest.raises(ValueError, match="encodes END, not UNKNOWN"):
        Packet(PacketType.UNKNOWN, header=0x01)
    with pytest.raises(ValueError, match="reads-as-zero"):
        P.events_packet(1 << 11)
    with pytest.raises(ValueError, match="reserved"):
        P.op_type_packet(3, 0)
    with pytest.raises(ValueError, match="reserved for class 1"):
        P.op_type_packet(P.OP_CLASS_LDST, 0x40)
    with pytest.raises(ValueError, match="RES0"):
        P.ldst_extended(False, excl=True, at=True)
    with pytest.raises(ValueError, match="no tag"):
        P.address_packet(P.ADDR_PC, 0, tag=1)
    with pytest.raises(ValueError, match="negative"):
        P.counter_packet(0, -1)
    with pytest.raises(ValueError, match="context index 2 is reserved"):
        P.context_packet(2, 0)


# ---------------------------------------------------------------------------------------------
# describe(): perf's wording


@pytest.mark.parametrize("packet, text", [
    (P.address_packet(P.ADDR_PC, 0x4000_0080, el=1, ns=1), "PC 0x40000080 el1 ns=1"),
    (P.address_packet(P.ADDR_BRANCH_TARGET, 0x4800_0010, el=0, ns=1), "TGT 0x48000010 el0 ns=1"),
    (P.address_packet(P.ADDR_DATA_VA, 0x4800_1000), "VA 0x48001000"),
    (P.address_packet(P.ADDR_DATA_VA, 0x4800_1000, tag=0x0F), "VA 0xf00000048001000"),
    (P.address_packet(P.ADDR_DATA_PA, 0x4400_0000, ns=1), "PA 0x44000000 ns=1 ch=0 pat=0"),
    (P.address_packet(6, 0xABC), "ADDR 0xabc (6)"),
    (P.counter_packet(P.COUNTER_TOTAL, 20), "LAT 20 TOT"),
    (P.counter_packet(P.COUNTER_ISSUE, 3), "LAT 3 ISSUE"),
    (P.counter_packet(P.COUNTER_XLAT, 1), "LAT 1 XLAT"),
    (P.counter_packet(5, 9), "LAT 9 (5)"),
    (P.events_packet(0x7FF), "EV EXCEPTION-GEN RETIRED L1D-ACCESS L1D-REFILL TLB-ACCESS "
                             "TLB-REFILL NOT-TAKEN MISPRED LLC-ACCESS LLC-REFILL REMOTE-ACCESS"),
    (P.events_packet(0x16), "EV RETIRED L1D-ACCESS TLB-ACCESS"),
    (P.events_packet(0), "EV"),
    (P.op_type_packet(P.OP_CLASS_LDST, P.ldst_gp(False)), "LD GP-REG"),
    (P.op_type_packet(P.OP_CLASS_LDST, P.ldst_gp(True)), "ST GP-REG"),
    (P.op_type_packet(P.OP_CLASS_LDST, P.ldst_simd_fp(True)), "ST SIMD-FP"),
    (P.op_type_packet(P.OP_CLASS_LDST, P.ldst_extended(False, ar=True)), "LD AR"),
    (P.op_type_packet(P.OP_CLASS_LDST, P.ldst_extended(True, ar=True, excl=True)), "ST EXCL AR"),
    (P.op_type_packet(P.OP_CLASS_LDST, P.ldst_extended(False, ar=True, at=True)), "LD AT AR"),
    (P.op_type_packet(P.OP_CLASS_BRANCH, P.branch_subclass(True, True)), "B COND IND"),
    (P.op_type_packet(P.OP_CLASS_BRANCH, P.branch_subclass(False, False)), "B"),
    (P.op_type_packet(P.OP_CLASS_OTHER, P.OTHER_COND), "OTHER COND-SELECT"),
    (P.op_type_packet(P.OP_CLASS_OTHER, P.OTHER_UNCOND), "OTHER INSN-OTHER"),
    (P.context_packet(P.CONTEXT_EL1, 0x2A), "CONTEXT 0x2a el1"),
    (P.context_packet(P.CONTEXT_EL2, 0x2A), "CONTEXT 0x2a el2"),
    (P.data_source_packet(3), "DATA-SOURCE 3"),
    (P.timestamp_packet(1000), "TS 1000"),
    (P.end_packet(), "END"),
    (P.padding_packet(), "PAD"),
    (P.alignment_packet(1), "PAD"),
    (decode(b"\x4b\x07"), "OP-TYPE 0x7 (3)"),
    (decode(b"\x44\x99"), "UNKNOWN 44 0x99"),
    (decode(b"\x20\x55\x34\x12"), "UNKNOWN 20 55 0x1234"),
    # later architecture versions (Arm ARM D18 Operation Type / Events packets)
    (decode(b"\x48\x08"), "SVE-OTHER EVLEN 32"),                  # 0b0xxx1xx0, EVL 0
    (decode(b"\x48\x7e"), "SVE-OTHER EVLEN 4096 FP PRED"),        # EVL 0b111, FP, PRED
    (decode(b"\x49\x2d"), "ST EVLEN 128 PRED"),                    # 0bxxxx1x0x, EVL 0b010
    (decode(b"\x49\x98"), "LD EVLEN 64 SG"),                       # SG (bit 7)
    (decode(b"\x49\x10"), "LD UNSPEC-REG"),
    (decode(b"\x49\x31"), "ST NV-SYSREG"),
    (decode(b"\x52\x00\x08"), "EV ALIGNMENT"),                     # E[11]
    (decode(b"\x62\x02\x00\x06\x00"), "EV RETIRED SVE-PARTIAL-PRED SVE-EMPTY-PRED"),
])
def test_describe(packet, text):
    assert describe(packet) == text


# ---------------------------------------------------------------------------------------------
# Records (§5.1.2)


def full_record() -> list[Packet]:
    return [
        P.address_packet(P.ADDR_PC, 0x4800_0040, el=0, ns=1),
        P.op_type_packet(P.OP_CLASS_LDST, P.ldst_gp(store=False)),
        P.address_packet(P.ADDR_DATA_VA, 0x4800_2000, tag=0x0F),
        P.events_packet(1 << P.EV_RETIRED | 1 << P.EV_L1D_ACCESS | 1 << P.EV_LLC_ACCESS),
        P.counter_packet(P.COUNTER_TOTAL, 20),
        P.counter_packet(P.COUNTER_ISSUE, 3),
        P.counter_packet(P.COUNTER_XLAT, 1),
        P.timestamp_packet(1000),
    ]


def test_full_record_fields():
    pkts = full_record()
    buf = b"\x00\x00" + b"".join(encode(p) for p in pkts) + b"\x00"
    [rec] = list(iter_records(buf))
    assert rec.offset == 2
    assert rec.length == 9 + 2 + 9 + 3 + 3 * 3 + 9
    assert rec.packets == pkts
    assert (rec.pc, rec.el, rec.ns) == (0x4800_0040, 0, 1)
    assert (rec.op_class, rec.op_subclass) == (P.OP_CLASS_LDST, 0)
    assert (rec.data_va, rec.data_va_tag) == (0x4800_2000, 0x0F)
    assert rec.events == 0b1_0000_0110
    assert (rec.latency_total, rec.latency_issue, rec.latency_xlat) == (20, 3, 1)
    assert rec.timestamp == 1000
    assert rec.branch_target is None and rec.context is None and rec.data_pa is None


def test_records_end_at_end_or_timestamp_and_skip_padding():
    r1 = [P.address_packet(P.ADDR_PC, 0x4800_0000, el=0, ns=1),
          P.op_type_packet(P.OP_CLASS_BRANCH, P.branch_subclass(True, False)),
          P.address_packet(P.ADDR_BRANCH_TARGET, 0xFFFF_FF80_0000_0000, el=1, ns=1),
          P.context_packet(P.CONTEXT_EL1, 5), P.end_packet()]
    r2 = [P.address_packet(P.ADDR_PC, 0x4800_0004, el=0, ns=1), P.timestamp_packet(7)]
    head = b"".join(map(encode, r1)) + b"\x00\x00\x00"
    assert len(head) == 9 + 2 + 9 + 5 + 1 + 3
    align = P.alignment_packet(0b0011, len(head))           # 29 + 2 + 1 fill = 32
    assert align.size == 1
    buf = head + encode(align) + b"".join(map(encode, r2))
    recs = list(iter_records(buf))
    assert [r.offset for r in recs] == [0, 32]
    assert [r.length for r in recs] == [26, 18]
    assert recs[0].timestamp is None and recs[0].context == 5
    # bits [55:0] sign-extended from bit 55
    assert recs[0].branch_target == 0xFFFF_FF80_0000_0000 and recs[0].target_el == 1
    assert recs[1].pc == 0x4800_0004 and recs[1].timestamp == 7


def test_bad_packet_discards_partial_record_and_truncated_record_is_dropped():
    lost = encode(P.address_packet(P.ADDR_PC, 0x4800_0000, el=0, ns=1))
    good = [P.address_packet(P.ADDR_PC, 0x4800_0008, el=0, ns=1), P.end_packet()]
    tail = encode(P.address_packet(P.ADDR_PC, 0x4800_000C, el=0, ns=1))   # no End: cut off
    # offset 9: 0x20 0x20 is bad; offset 10: 0x20 0x00 is a 2-byte Alignment (SIZE 0, no fill)
    buf = lost + b"\x20\x20\x00" + b"".join(map(encode, good)) + tail
    assert [(off, type(item).__name__ if not isinstance(item, Packet) else item.type.name)
            for off, item in iter_packets(buf)] == [
        (0, "ADDRESS"), (9, "BadPacket"), (10, "ALIGNMENT"), (12, "ADDRESS"), (21, "END"),
        (22, "ADDRESS")]
    recs = list(iter_records(buf))
    assert [(r.offset, r.pc, r.packets) for r in recs] == [(12, 0x4800_0008, good)]


def test_record_from_packets_directly():
    rec = Record.from_packets(4, full_record())
    assert rec.offset == 4 and rec.length == 41 and rec.latency_total == 20
