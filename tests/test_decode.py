"""perf -D style dump lines and the trace summary."""

from spe_emu.spe import packets as P
from spe_emu.spe.packets import encode
from spe_emu.tools.decode import DecodedLine, decode_lines, dump_lines, format_line, summarize


def record_bytes() -> bytes:
    return b"".join(encode(p) for p in [
        P.address_packet(P.ADDR_PC, 0x4000_0080, el=1, ns=1),
        P.op_type_packet(P.OP_CLASS_LDST, P.ldst_gp(store=False)),
        P.address_packet(P.ADDR_DATA_VA, 0x4800_1000),
        P.events_packet(1 << P.EV_RETIRED | 1 << P.EV_L1D_ACCESS | 1 << P.EV_TLB_ACCESS),
        P.counter_packet(P.COUNTER_TOTAL, 20),
        P.timestamp_packet(1000),
    ])


def test_format_line_matches_perf_layout():
    line = DecodedLine(0, bytes.fromhex("b0800000400000 00a0".replace(" ", "")),
                       "PC 0x40000080 el1 ns=1")
    # "." + "  %08x: " + " %02x" per byte + "   " per missing byte up to 16 + " " + text
    expected = ".  00000000:  b0 80 00 00 40 00 00 00 a0" + "   " * 7 + " PC 0x40000080 el1 ns=1"
    assert format_line(line) == expected
    assert format_line(DecodedLine(0x1234ABCD, b"\x01", "END")) == \
        ".  1234abcd:  01" + "   " * 15 + " END"
    # a packet longer than 16 bytes is printed whole, without padding
    assert format_line(DecodedLine(0, bytes(17), "PAD")) == ".  00000000: " + " 00" * 17 + " PAD"


def test_decode_lines_for_a_record():
    lines = list(decode_lines(record_bytes()))
    assert [(l.offset, l.raw.hex(" "), l.text) for l in lines] == [
        (0x00, "b0 80 00 00 40 00 00 00 a0", "PC 0x40000080 el1 ns=1"),
        (0x09, "49 00", "LD GP-REG"),
        (0x0B, "b2 00 10 00 48 00 00 00 00", "VA 0x48001000"),
        (0x14, "42 16", "EV RETIRED L1D-ACCESS TLB-ACCESS"),
        (0x16, "98 14 00", "LAT 20 TOT"),
        (0x19, "71 e8 03 00 00 00 00 00 00", "TS 1000"),
    ]


def test_padding_runs_share_lines_of_16_bytes():
    data = encode(P.end_packet()) + bytes(20) + encode(P.end_packet()) + bytes(3)
    assert [(l.offset, len(l.raw), l.text) for l in decode_lines(data)] == [
        (0, 1, "END"), (1, 16, "PAD"), (17, 4, "PAD"), (21, 1, "END"), (22, 3, "PAD")]


def test_bad_packet_and_truncated_tail_lines():
    data = b"\x20\x3f\x00" + encode(P.end_packet()) + b"\x98\x14"
    assert [(l.offset, l.raw, l.text) for l in decode_lines(data)] == [
        (0, b"\x20", "Bad packet!"),
        (1, b"\x3f\x00", "UNKNOWN 3f 00 0x0"),
        (3, b"\x01", "END"),
        (4, b"\x98", "Bad packet!"),                # cut off: one byte, resynchronise
        (5, b"\x14", "UNKNOWN 14 0x0"),
    ]


def test_dump_lines_header_and_body():
    out = list(dump_lines(record_bytes()[:11]))
    assert out == [
        ". ... ARM SPE data: size 0xb bytes",
        ".  00000000:  b0 80 00 00 40 00 00 00 a0" + "   " * 7 + " PC 0x40000080 el1 ns=1",
        ".  00000009:  49 00" + "   " * 14 + " LD GP-REG",
    ]


def test_summarize_counts():
    rec = record_bytes()
    data = rec + bytes(5) + b"\x44\x99" + rec + b"\x20\x20\x00" + rec[:4]
    assert summarize(data) == {
        "bytes": len(data),
        # the 0x20 0x00 after the bad byte is an Alignment; the cut-off tail b0 80 00 00 is a
        # Bad packet, then 80 00 (an unknown packet with a 1-byte payload) and a Padding byte
        "packets": 6 + 5 + 1 + 6 + 1 + 1 + 1,
        "records": 2,
        "bad_packets": 2,
        "unknown_packets": 2,
        "padding_bytes": 5 + 2 + 1,
        "truncated_bytes": 4,
    }
    assert summarize(b"") == {"bytes": 0, "packets": 0, "records": 0, "bad_packets": 0,
                              "unknown_packets": 0, "padding_bytes": 0, "truncated_bytes": 0}
