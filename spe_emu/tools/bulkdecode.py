"""The bulk SPE decoder of ``spe_emu/native/decode.c``: ctypes mirrors, tables, entry points.

:func:`dump_chunks` yields the text of ``spe-emu decode`` (the lines of
:func:`spe_emu.tools.decode.format_line`, each followed by a newline) and
:func:`scan_array` the records of :func:`spe_emu.spe.packets.iter_records` as rows of
fields (a numpy structured array). The C code takes every decision about headers and wording from the tables built here
out of :mod:`spe_emu.spe.packets` (its decode tables and :func:`~spe_emu.spe.packets.describe`),
so the Python decoder stays the reference; tests compare the two on fuzzed input.
"""

from __future__ import annotations

import ctypes
from typing import Iterator

from ..native import NativeBuildError, library
from ..spe import packets as P

TEXT = 48                     # SPE_TEXT
K_PREFIX, K_BAD = 0xFE, 0xFF  # SPE_K_PREFIX, SPE_K_BAD
ADDR_MODE_INSN, ADDR_MODE_VA, ADDR_MODE_PA, ADDR_MODE_RAW = 0, 1, 2, 3
LONGEST, LINE_SLACK = 65538, 1024   # SPE_LONGEST, SPE_LINE_SLACK (spe_dump's cap rule)
LINE_PER_BYTE = 80            # text bytes a 1-byte packet's line takes, at most
CHUNK = 4 << 20               # bytes of text per spe_dump call
ROWS = 1 << 16                # rows per spe_scan_records call

# SPE_HAS_* bits of a row's ``present``
HAS_PC, HAS_TARGET, HAS_VA, HAS_PA = 0x1, 0x2, 0x4, 0x8
HAS_LAT0, HAS_LAT1, HAS_LAT2, HAS_OP = 0x10, 0x20, 0x40, 0x80
HAS_CTX0, HAS_CTX1, HAS_DS, HAS_TS = 0x100, 0x200, 0x400, 0x800

_KINDS = list(P.PacketType)


class DecodeTables(ctypes.Structure):
    """Mirror of ``struct spe_decode_tables`` (decode.c)."""

    _fields_ = [("short_kind", ctypes.c_uint8 * 256), ("short_index", ctypes.c_uint8 * 256),
                ("short_size", ctypes.c_uint8 * 256),
                ("ext_kind", (ctypes.c_uint8 * 256) * 32),
                ("ext_index", (ctypes.c_uint8 * 256) * 32),
                ("ext_size", (ctypes.c_uint8 * 256) * 32),
                *((f"k_{t.name.lower()}", ctypes.c_uint8) for t in (
                    P.PacketType.PADDING, P.PacketType.END, P.PacketType.TIMESTAMP,
                    P.PacketType.EVENTS, P.PacketType.DATA_SOURCE, P.PacketType.CONTEXT,
                    P.PacketType.OP_TYPE, P.PacketType.ADDRESS, P.PacketType.COUNTER,
                    P.PacketType.ALIGNMENT, P.PacketType.UNKNOWN)),
                ("ext_lo_mask", ctypes.c_uint8),
                *((name, ctypes.c_uint8) for name in (
                    "addr_lsb", "addr_width", "el_lsb", "el_width", "ns_lsb", "tag_lsb",
                    "tag_width", "ch_lsb", "pat_lsb", "pat_width", "addr_pc", "addr_target",
                    "addr_va", "addr_pa")),
                ("pad1", ctypes.c_uint8 * 2),
                ("addr_mode", ctypes.c_uint8 * 32), ("addr_name", (ctypes.c_char * 8) * 32),
                ("event_names", (ctypes.c_char * TEXT) * 64),
                ("op_text", ((ctypes.c_char * TEXT) * 256) * 4),
                ("ts_prefix", ctypes.c_char * 16), ("ds_prefix", ctypes.c_char * 16),
                ("counter_prefix", ctypes.c_char * 16), ("context_prefix", ctypes.c_char * 16),
                ("counter_suffix", (ctypes.c_char * 16) * 32),
                ("context_suffix", (ctypes.c_char * 16) * 4),
                ("align_bytes", ctypes.c_uint32 * 16)]


class RecRow(ctypes.Structure):
    """Mirror of ``struct spe_rec_row``: one record's fields (:class:`~spe_emu.spe.packets.Record`
    without its packets); ``present`` has a HAS_* bit per field the record carries."""

    _fields_ = [*((name, ctypes.c_uint64) for name in (
                    "offset", "length", "pc", "target", "va", "pa", "events", "timestamp",
                    "data_source")),
                ("context", ctypes.c_uint32 * 2), ("present", ctypes.c_uint32),
                ("latency", ctypes.c_uint16 * 3),
                *((name, ctypes.c_uint8) for name in (
                    "el", "ns", "target_el", "target_ns", "va_tag", "pa_ns", "op_class",
                    "op_subclass"))]


def _lsb_width(f: tuple[int, int]) -> tuple[int, int]:
    return f[1], f[0] - f[1] + 1


def _fill_entry(entry, kinds, indexes, sizes, i: int) -> None:
    if entry is None:
        return
    kind, index, size, _extended = entry
    kinds[i] = _KINDS.index(kind)
    indexes[i] = index
    sizes[i] = size


def _text(value: str, size: int) -> bytes:
    data = value.encode()
    if len(data) >= size:
        raise NativeBuildError(f"decode tables: {value!r} does not fit {size} bytes")
    return data


def build_tables() -> DecodeTables:
    """The tables decode.c works from, out of spe_emu.spe.packets."""
    t = DecodeTables()
    t.ext_lo_mask = ~P.HDR_EXTENDED_PREFIX_MASK & 0xFF
    for size_code in range(len(t.align_bytes)):
        t.align_bytes[size_code] = P.alignment_bytes(size_code)
    for b in range(256):
        entry = P._SHORT_HEADERS[b]
        if entry is None:
            t.short_kind[b] = K_PREFIX
        _fill_entry(entry, t.short_kind, t.short_index, t.short_size, b)
        for lo in range(32):
            t.ext_kind[lo][b] = K_BAD
            _fill_entry(P._extended_headers()[lo][b], t.ext_kind[lo], t.ext_index[lo],
                        t.ext_size[lo], b)
    for code, kind in enumerate(_KINDS):
        setattr(t, f"k_{kind.name.lower()}", code)
    t.addr_lsb, t.addr_width = _lsb_width(P.ADDR_FIELD)
    t.el_lsb, t.el_width = _lsb_width(P.ADDR_EL)
    t.ns_lsb = P.ADDR_NS[1]
    t.tag_lsb, t.tag_width = _lsb_width(P.ADDR_TAG)
    t.ch_lsb = P.ADDR_CH[1]
    t.pat_lsb, t.pat_width = _lsb_width(P.ADDR_PAT)
    t.addr_pc, t.addr_target = P.ADDR_PC, P.ADDR_BRANCH_TARGET
    t.addr_va, t.addr_pa = P.ADDR_DATA_VA, P.ADDR_DATA_PA
    # Address wording per index, read back from describe() on a known payload
    probe_addr = 0x123456
    for i in range(32):
        text = P.describe(P._make(P.PacketType.ADDRESS, i, probe_addr, 8, i >= 8, 0))
        name, rest = text.split(" ", 1)
        if rest.endswith(f"({i})"):
            mode = ADDR_MODE_RAW
        elif " el" in rest:
            mode = ADDR_MODE_INSN
        elif " ch=" in rest:
            mode = ADDR_MODE_PA
        else:
            mode = ADDR_MODE_VA
        t.addr_mode[i] = mode
        t.addr_name[i].value = _text(name, 8)
    for bit in range(64):
        words = P.describe(P._make(P.PacketType.EVENTS, 0, 1 << bit, 8, False, 0)).split()
        t.event_names[bit].value = _text(" ".join(words[1:]), TEXT)
    for cls in range(4):
        for sub in range(256):
            t.op_text[cls][sub].value = _text(
                P.describe(P._make(P.PacketType.OP_TYPE, cls, sub, 1, False, 0)), TEXT)
    t.ts_prefix = _text(P.describe(P.timestamp_packet(0))[:-1], 16)
    t.ds_prefix = _text(P.describe(P.data_source_packet(0))[:-1], 16)
    lat = P.describe(P._make(P.PacketType.COUNTER, 0, 0, 2, False, 0))
    t.counter_prefix = _text(lat[:lat.index(" 0") + 1], 16)
    for i in range(32):
        text = P.describe(P._make(P.PacketType.COUNTER, i, 0, 2, i >= 8, 0))
        t.counter_suffix[i].value = _text(text[len(t.counter_prefix) + 1:], 16)
    ctx = P.describe(P._make(P.PacketType.CONTEXT, 0, 0, 4, False, 0))
    t.context_prefix = _text(ctx[:ctx.index("0x") + 2], 16)
    for i in range(4):
        text = P.describe(P._make(P.PacketType.CONTEXT, i, 0, 4, False, 0))
        t.context_suffix[i].value = _text(text[len(t.context_prefix) + 1:], 16)
    return t


_STATE: tuple[ctypes.CDLL, DecodeTables] | None = None


def _state() -> tuple[ctypes.CDLL, DecodeTables]:
    global _STATE
    if _STATE is None:
        lib = library()
        sizes = (ctypes.c_uint64.in_dll(lib, "spe_decode_tables_size").value,
                 ctypes.c_uint64.in_dll(lib, "spe_rec_row_size").value)
        if sizes != (ctypes.sizeof(DecodeTables), ctypes.sizeof(RecRow)):
            raise NativeBuildError("decode.c: the native structs do not match their mirrors")
        u64p = ctypes.POINTER(ctypes.c_uint64)
        lib.spe_dump.argtypes = (ctypes.POINTER(DecodeTables), ctypes.c_char_p,
                                 ctypes.c_uint64, u64p, ctypes.c_char_p, ctypes.c_uint64)
        lib.spe_dump.restype = ctypes.c_uint64
        lib.spe_scan_records.argtypes = (ctypes.POINTER(DecodeTables), ctypes.c_char_p,
                                         ctypes.c_uint64, u64p, ctypes.POINTER(RecRow),
                                         ctypes.c_uint64, u64p)
        lib.spe_scan_records.restype = ctypes.c_uint64
        _STATE = (lib, build_tables())
    return _STATE


def dump_chunks(data: bytes, chunk: int = CHUNK) -> Iterator[str]:
    """The dump lines of ``data`` (each ending in a newline), a few MiB of text at a time.
    Raises NativeBuildError when the library cannot be loaded."""
    lib, tables = _state()
    data = bytes(data)
    need = 3 * min(len(data), LONGEST) + LINE_SLACK
    out = ctypes.create_string_buffer(max(need, min(chunk, LINE_PER_BYTE * len(data))))
    pos = ctypes.c_uint64(0)
    while pos.value < len(data):
        n = lib.spe_dump(ctypes.byref(tables), data, len(data), ctypes.byref(pos), out,
                         len(out))
        yield out.raw[:n].decode("ascii")


def record_dtype():
    """The numpy structured dtype of a :class:`RecRow` (its fields, offsets and size)."""
    import numpy as np

    def fmt(ctype) -> object:
        if hasattr(ctype, "_length_"):
            return (fmt(ctype._type_), (ctype._length_,))
        return np.dtype(f"<u{ctypes.sizeof(ctype)}")

    return np.dtype({"names": [name for name, _ in RecRow._fields_],
                     "formats": [fmt(ctype) for _, ctype in RecRow._fields_],
                     "offsets": [getattr(RecRow, name).offset for name, _ in RecRow._fields_],
                     "itemsize": ctypes.sizeof(RecRow)})


def scan_array(data: bytes, rows_per_call: int = ROWS):
    """The records of ``data`` (as packets.iter_records finds them) as one numpy structured
    array of :func:`record_dtype` (one row per record, trace order; a field a record lacks
    reads 0: look at ``present``), and the bad or cut-off packets met.
    Raises NativeBuildError when the library cannot be loaded."""
    import numpy as np

    lib, tables = _state()
    data = bytes(data)
    dtype = record_dtype()
    # (the C scanner writes straight into the array, grown by doubling: records are at
    # least a few bytes, so a 32nd of the trace's size in rows rarely needs to grow)
    out = np.empty(len(data) // 32 + 1, dtype=dtype)
    pos, bad = ctypes.c_uint64(0), ctypes.c_uint64(0)
    n = 0
    while pos.value < len(data):
        if n == len(out):   # (not np.concatenate: it would pack the dtype, padding gone)
            grown = np.empty(2 * len(out), dtype=dtype)
            grown[:n] = out
            out = grown
        room = min(len(out) - n, rows_per_call)
        rows = ctypes.cast(out.ctypes.data + n * dtype.itemsize, ctypes.POINTER(RecRow))
        n += lib.spe_scan_records(ctypes.byref(tables), data, len(data), ctypes.byref(pos),
                                  rows, room, ctypes.byref(bad))
    return out[:n].copy() if n < len(out) // 2 else out[:n], bad.value
