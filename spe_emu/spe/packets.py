"""SPE profile format: bytes <-> packets <-> text, and packets -> records.

Implements chapter 5 of the SPE supplement (DDI 0586A, "Profile Format") and the header ->
payload-size rule of the Arm ARM (D18.1.1). Three layers, as in Linux perf's arm-spe decoder:

* bytes <-> :class:`Packet`: :func:`encode`, :func:`decode` (raises :class:`PacketIncomplete`
  when the buffer ends inside a packet and :class:`BadPacket` for a header that is not
  well formed), :func:`iter_packets` (skips one byte and resynchronises after a bad header);
* :class:`Packet` -> text: :func:`describe` (the wording of ``perf report -D``);
* packets -> :class:`Record`: :func:`iter_records` (a record ends at an End or a Timestamp
  packet, §5.1.2; Padding and Alignment between records are skipped, §5.1.4).

Every field is declared once as an ``(msb, lsb)`` pair and read or written only through
:func:`_get` / :func:`_put`; header values that identify a packet are named constants.
Byte order (§5.1.3): header bytes first, payload little-endian.
"""

from __future__ import annotations

import enum
import functools
import struct
from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

from ..errors import TraceDecodeError


class PacketType(enum.Enum):
    """Packet kinds of §5.2 (plus UNKNOWN: well formed per D18.1.1 but not defined)."""

    PADDING = "padding"          # §5.3.9
    END = "end"                  # §5.3.6
    TIMESTAMP = "timestamp"      # §5.3.10
    EVENTS = "events"            # §5.3.7
    DATA_SOURCE = "data-source"  # §5.3.5
    CONTEXT = "context"          # §5.3.3
    OP_TYPE = "op-type"          # §5.3.8
    ADDRESS = "address"          # §5.3.1
    COUNTER = "counter"          # §5.3.4
    ALIGNMENT = "alignment"      # §5.3.2
    UNKNOWN = "unknown"          # §5.1.4: skipped by the size its header encodes


# --------------------------------------------------------------------------------------------
# Field values (§5.3)

# Address packet INDEX (§5.3.1).
ADDR_PC = 0
ADDR_BRANCH_TARGET = 1
ADDR_DATA_VA = 2
ADDR_DATA_PA = 3
ADDR_PREV_BRANCH = 4   # previous branch target (FEAT_SPE_PBT; Arm ARM D18.2 Address packet)

# Counter packet INDEX (§5.3.4).
COUNTER_MAX = 0xFFF  # a 12-bit Counter packet value saturates here (§5.3.4)
COUNTER_TOTAL = 0
COUNTER_ISSUE = 1
COUNTER_XLAT = 2

# Operation Type packet CLASS (§5.3.8).
class OpClass(enum.IntEnum):
    """The Operation Type packet's CLASS (§5.3.8): what kind of operation a record is of
    (an int: compares and serialises as its value)."""
    OTHER = 0
    LOAD_STORE = 1
    BRANCH = 2


OP_CLASS_OTHER = OpClass.OTHER
OP_CLASS_LDST = OpClass.LOAD_STORE
OP_CLASS_BRANCH = OpClass.BRANCH

# Data Source packet values as Arm's Neoverse and Cortex cores encode them (§5.3.5 leaves them
# IMPLEMENTATION DEFINED; Linux perf's arm_spe_common_data_source: L1D, L2, PEER_CORE,
# LOCAL_CLUSTER, SYS_CACHE, PEER_CLUSTER, REMOTE, DRAM), the encoding spe_emu's model uses
# (spe.records.DATA_SOURCE).
DATA_SOURCE_NAMES = {0x0: "L1D", 0x8: "L2", 0x9: "peer-core", 0xA: "local-cluster",
                     0xB: "sys-cache", 0xC: "peer-cluster", 0xD: "remote", 0xE: "DRAM"}


def data_source_name(value: int) -> str:
    """The name of a Data Source packet value (:data:`DATA_SOURCE_NAMES`), or the value in
    hex for one that encoding does not define."""
    return DATA_SOURCE_NAMES.get(value, f"{value:#x}")


# Context packet INDEX (§5.3.3).
CONTEXT_EL1 = 0
CONTEXT_EL2 = 1

# Events packet bit numbers E[n] (§5.3.7).
EV_EXCEPTION_GEN = 0
EV_RETIRED = 1
EV_L1D_ACCESS = 2
EV_L1D_REFILL = 3
EV_TLB_ACCESS = 4
EV_TLB_WALK = 5
EV_NOT_TAKEN = 6
EV_MISPRED = 7
EV_LLC_ACCESS = 8
EV_LLC_MISS = 9
EV_REMOTE_ACCESS = 10
# Events of later architecture versions (Arm ARM D18 "Events packet"; RAZ in format version 0
# as the supplement describes it, but a reader decodes them): FEAT_SPEv1p1 and SVE.
EV_ALIGNMENT = 11
EV_SVE_PARTIAL_PRED = 17
EV_SVE_EMPTY_PRED = 18

#: Events payload bits that read-as-zero in every SZ (§5.3.7): byte 1 bit 3, byte 2, bytes 5:4.
EVENTS_RAZ_MASK = (1 << 11) | (0xFF << 16) | (0xFFFF << 32)

# Operation Type SUBCLASS values (§5.3.8).
OTHER_UNCOND = 0x00          # Other: unconditional instruction
OTHER_COND = 0x01            # Other: conditional instruction or select
BRANCH_COND = 0x01           # Branch: COND, bit 0
BRANCH_INDIRECT = 0x02       # Branch: indirect (0b0000001x), bit 1
LDST_ST = 0x01               # Load/store: LDST, bit 0 (1 = store)
LDST_GP = 0x00               # general-purpose registers: 0b0000000x
LDST_EXTENDED = 0x02         # atomic / acquire-release / exclusive: 0b000xxx1x
LDST_AT = 0x04               # extended: AT, bit 2
LDST_EXCL = 0x08             # extended: EXCL, bit 3 (RES0 when AT == 1)
LDST_AR = 0x10               # extended: AR, bit 4
LDST_SIMD_FP = 0x04          # SIMD&FP registers: 0b0000010x (bit 1 clear)
# Later architecture versions (Arm ARM D18 "Operation Type packet"; reserved in the
# supplement's format version 0, decoded by readers):
LDST_UNSPEC_REG = 0x10       # unspecified registers: 0b0001000x
LDST_NV_SYSREG = 0x30        # FEAT_NV2 system register access: 0b0011000x
LDST_SVE = 0x08              # SVE load/store: 0bxxxx1x0x (bit 3 set, bit 1 clear)
OTHER_SVE = 0x08             # SVE vector operation (class Other): 0b0xxx1xx0
# FEAT_SPE_FPF (Arm ARM D18 "Operation Type packet", class Other, 0b00000xxx): Advanced SIMD
# and floating-point flags; FEAT_SPE_CRR (class Branch): CR, bits 4:3 (Linux perf
# arm-spe-pkt-decoder.h SPE_OP_PKT_OTHER_ASE/FP, SPE_OP_PKT_CR_MASK).
OTHER_ASE = 0x04             # Other: Advanced SIMD operation, bit 2
OTHER_FP = 0x02              # Other: floating-point operation, bit 1
BRANCH_CR = (4, 3)           # Branch: call/return, bits 4:3
CR_CALL, CR_RETURN, CR_OTHER = 0b01, 0b10, 0b11
"""BRANCH_CR values: branch with link (BL, BLR...), procedure return (RET...), any other
branch (0b00: no call/return information, FEAT_SPE_CRR not implemented)."""
_OTHER_FLAGS_MASK = 0xF8     # Other, not SVE: bits 7:3 zero
SVE_EVL = (6, 4)             # SVE: effective vector length, 32 << EVL bits
SVE_PRED = (2, 2)            # SVE: predicated
SVE_FP = (1, 1)              # SVE (class Other): floating-point
SVE_SG = (7, 7)              # SVE (load/store): gather/scatter
SVE_EVL_UNIT = 32            # bits: EVLEN = SVE_EVL_UNIT << EVL

# Masks that pick the subclass pattern out of the payload byte (bit 0 is LDST/COND).
_LDST_KIND_MASK = 0xFE       # GP and SIMD&FP: every bit except LDST
_LDST_EXTENDED_MASK = 0xE2   # extended: bits 7:5 zero and bit 1 set
_BRANCH_KIND_MASK = 0xFE     # branch: every bit except COND
_LDST_SVE_MASK = 0x0A        # SVE load/store: bit 3 set, bit 1 clear
_OTHER_SVE_MASK = 0x89       # SVE other: bit 7 clear, bit 3 set, bit 0 clear


# --------------------------------------------------------------------------------------------
# Header encodings (§5.2, D18.1.1). Fields are (msb, lsb) pairs.

HDR_PADDING = 0x00
HDR_END = 0x01
HDR_TIMESTAMP = 0x71
HDR_EXTENDED_PREFIX = 0x20       # 0b001xxxxx: first byte of a 16-bit header
HDR_EXTENDED_PREFIX_MASK = 0xE0
HDR_EVENTS = 0x42                # 0b01xx0010
HDR_DATA_SOURCE = 0x43           # 0b01xx0011
HDR_SZ_ANY_MASK = 0xCF           # matches Events / Data Source whatever SZ
HDR_CONTEXT = 0x64               # 0b011001xx
HDR_OP_TYPE = 0x48               # 0b010010xx
HDR_LOW2_ANY_MASK = 0xFC         # matches Context / Operation Type whatever INDEX/CLASS
HDR_ADDRESS = 0xB0               # 0b10110xxx (short, or byte 1 of extended)
HDR_COUNTER = 0x98               # 0b10011xxx (short, or byte 1 of extended)
HDR_LOW3_ANY_MASK = 0xF8         # matches Address / Counter whatever INDEX[2:0]
HDR1_ALIGNMENT = 0x00            # byte 1 of the Alignment command

HDR_SZ = (5, 4)                  # payload size: 1 << SZ bytes
HDR_LOW2 = (1, 0)                # Context INDEX, Operation Type CLASS
HDR_SHORT_INDEX = (2, 0)         # Address/Counter INDEX (short), INDEX[2:0] (extended byte 1)
EXT0_INDEX_HI = (1, 0)           # extended byte 0: INDEX[4:3]
EXT0_RAZ = (4, 2)                # extended byte 0, Address/Counter: reads-as-zero
EXT0_ALIGN_RAZ = (4, 4)          # extended byte 0, Alignment: reads-as-zero
EXT0_ALIGN_SIZE = (3, 0)         # extended byte 0, Alignment: SIZE
INDEX_HI = (4, 3)                # INDEX[4:3] of a 5-bit Address/Counter index
INDEX_LO = (2, 0)                # INDEX[2:0]

# Address payload fields (§5.3.1).
ADDR_FIELD = (55, 0)             # ADDR, bytes 6:0
ADDR_NS = (63, 63)               # NS (instruction addresses and PA)
ADDR_EL = (62, 61)               # EL (instruction addresses)
ADDR_TAG = (63, 56)              # TAG, byte 7 (data VA)
ADDR_SIGN_BIT = 55
ADDR_CH = (62, 62)               # CH, data PA (FEAT_SPEv1p1; reads as zero in version 0)
ADDR_PAT = (59, 56)              # PAT, data PA (FEAT_SPEv1p1; reads as zero in version 0)

_SIZE_TO_SZ = {1: 0, 2: 1, 4: 2, 8: 3}
_SHORT_INDEX_LIMIT = 8           # indexes 0..7 fit a short Address/Counter header
_EXT_INDEX_LIMIT = 32            # 5-bit index of the extended header


def _mask(f: tuple[int, int]) -> int:
    msb, lsb = f
    return ((1 << (msb - lsb + 1)) - 1) << lsb


def _get(value: int, f: tuple[int, int]) -> int:
    """Field ``f`` = (msb, lsb) of ``value``."""
    return (value & _mask(f)) >> f[1]


def _put(f: tuple[int, int], v: int) -> int:
    """``v`` placed in field ``f``; ValueError when it does not fit."""
    msb, lsb = f
    if v < 0 or v >> (msb - lsb + 1):
        raise ValueError(f"value {v:#x} does not fit bits [{msb}:{lsb}]")
    return v << lsb


def _is_extended_prefix(byte: int) -> bool:
    return byte & HDR_EXTENDED_PREFIX_MASK == HDR_EXTENDED_PREFIX


def payload_size_for_header(byte: int) -> int:
    """Payload bytes announced by a header byte (D18.1.1).

    0x00-0x1F: no payload; 0x40-0xFF: ``1 << SZ`` bytes (SZ = bits 5:4). For the extended
    prefix 0x20-0x3F the size is in the second header byte: ValueError.
    """
    if not 0 <= byte <= 0xFF:
        raise ValueError(f"header byte {byte:#x} out of range")
    if _is_extended_prefix(byte):
        raise ValueError(f"header byte {byte:#04x} is an extended prefix; "
                         "the payload size is in the second header byte")
    if byte < HDR_EXTENDED_PREFIX:
        return 0
    return 1 << _get(byte, HDR_SZ)


def alignment_bytes(size_code: int) -> int:
    """Alignment in bytes requested by an Alignment command SIZE field (§5.3.2): 2**(SIZE+1)
    (0b0001 -> 4, 0b0011 -> 16, 0b1111 -> 64 KiB)."""
    if not 0 <= size_code <= 0xF:
        raise ValueError(f"alignment SIZE {size_code} is not a 4-bit value")
    return 1 << (size_code + 1)


# --------------------------------------------------------------------------------------------
# Errors


class PacketIncomplete(TraceDecodeError):
    """The buffer ends inside a packet: more bytes are needed to decode it.

    Attributes: ``offset`` (start of the packet), ``needed`` (bytes the packet occupies, as far
    as known from the header bytes seen), ``available`` (bytes left from ``offset``).
    """

    def __init__(self, offset: int, needed: int, available: int):
        self.offset = offset
        self.needed = needed
        self.available = available
        super().__init__(f"truncated SPE packet at offset {offset:#x}: "
                         f"needs {needed} bytes, {available} available")


class BadPacket(TraceDecodeError):
    """The bytes at ``offset`` are not a well-formed header (D18.1.1).

    The only malformed header in format version 0 is an extended prefix (0x20-0x3F) whose
    second byte is itself an extended prefix. Attributes: ``offset``, ``header`` (the bytes).
    """

    def __init__(self, offset: int, header: bytes):
        self.offset = offset
        self.header = bytes(header)
        super().__init__(f"bad SPE packet header at offset {offset:#x}: "
                         f"{self.header.hex(' ')}")


# --------------------------------------------------------------------------------------------
# The packet


@dataclass(frozen=True)
class Packet:
    """One decoded or to-be-encoded packet (§5.1.1).

    Fields:
        type: the :class:`PacketType`.
        index: Address/Counter INDEX (0..31), Context INDEX (0..3), Operation Type CLASS
            (0..3), Alignment SIZE code (0..15); for UNKNOWN packets with a 16-bit header the
            second header byte; otherwise 0.
        payload: the payload bytes as a little-endian unsigned integer (0 when none; for an
            Alignment command the skipped bytes are UNKNOWN and payload is 0).
        size: payload bytes (0, 1, 2, 4 or 8); for an Alignment command the number of
            skipped bytes that follow the 2-byte command.
        extended: the 16-bit header form (Address/Counter extended format, Alignment, or an
            UNKNOWN packet with an extended prefix).
        header: the first header byte. Derived from the other fields when left 0; must be
            given for UNKNOWN packets. ValueError if inconsistent.

    ``length`` is the number of bytes the packet occupies (header bytes + ``size``).
    """

    type: PacketType
    index: int = 0
    payload: int = 0
    size: int = 0
    extended: bool = False
    header: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.type, PacketType):
            raise ValueError(f"packet type {self.type!r} is not a PacketType")
        if self.type is PacketType.ALIGNMENT:
            if self.payload != 0:
                raise ValueError("an Alignment command has no payload value")
            if not 0 <= self.index <= 0xF:
                raise ValueError(f"alignment SIZE {self.index} is not a 4-bit value")
            if not 0 <= self.size < alignment_bytes(self.index):
                raise ValueError(f"alignment fill of {self.size} bytes is not below the "
                                 f"alignment of {alignment_bytes(self.index)} bytes")
        else:
            if self.size not in (0, 1, 2, 4, 8):
                raise ValueError(f"payload size {self.size} is not 0, 1, 2, 4 or 8 bytes")
            if not 0 <= self.payload < (1 << (8 * self.size)):
                raise ValueError(f"payload {self.payload:#x} does not fit {self.size} bytes")
        hdr = _derive_header(self)
        if self.header == 0 and hdr[0] != 0 and self.type is not PacketType.UNKNOWN:
            object.__setattr__(self, "header", hdr[0])
        elif self.header != hdr[0]:
            raise ValueError(f"header {self.header:#04x} does not match the packet "
                             f"(expected {hdr[0]:#04x})")
        # The header must classify back to this packet: one source of truth with decode().
        kind = _classify(hdr)
        if kind is not self.type:
            raise ValueError(f"header {hdr.hex(' ')} encodes {kind.name}, not {self.type.name}")
        if self.type is not PacketType.ALIGNMENT:
            wanted = payload_size_for_header(hdr[-1])
            if wanted != self.size:
                raise ValueError(f"header {hdr.hex(' ')} announces {wanted} payload bytes, "
                                 f"packet has {self.size}")

    @property
    def length(self) -> int:
        """Bytes occupied: 1 or 2 header bytes plus the payload (or alignment fill)."""
        return (2 if self.extended else 1) + self.size


def _derive_header(p: Packet) -> bytes:
    """The header bytes of ``p`` (1 or 2); ValueError for impossible index/size combinations."""
    t = p.type
    if t is PacketType.UNKNOWN:
        if p.extended:
            if not _is_extended_prefix(p.header):
                raise ValueError(f"extended UNKNOWN packet needs a prefix header, "
                                 f"not {p.header:#04x}")
            if not 0 <= p.index <= 0xFF:
                raise ValueError(f"second header byte {p.index:#x} out of range")
            return bytes((p.header, p.index))
        if p.index != 0:
            raise ValueError("a short UNKNOWN packet has no index")
        return bytes((p.header,))
    if t is PacketType.ALIGNMENT:
        if not p.extended:
            raise ValueError("the Alignment command has a 16-bit header")
        return bytes((HDR_EXTENDED_PREFIX | _put(EXT0_ALIGN_SIZE, p.index), HDR1_ALIGNMENT))
    if t in (PacketType.ADDRESS, PacketType.COUNTER):
        base = HDR_ADDRESS if t is PacketType.ADDRESS else HDR_COUNTER
        if not 0 <= p.index < _EXT_INDEX_LIMIT:
            raise ValueError(f"{t.name} index {p.index} is not a 5-bit value")
        if p.extended:
            return bytes((HDR_EXTENDED_PREFIX | _put(EXT0_INDEX_HI, _get(p.index, INDEX_HI)),
                          base | _put(HDR_SHORT_INDEX, _get(p.index, INDEX_LO))))
        if p.index >= _SHORT_INDEX_LIMIT:
            raise ValueError(f"{t.name} index {p.index} needs the extended header")
        return bytes((base | _put(HDR_SHORT_INDEX, p.index),))
    if p.extended:
        raise ValueError(f"{t.name} packets have an 8-bit header")
    if t is PacketType.PADDING:
        hdr = HDR_PADDING
    elif t is PacketType.END:
        hdr = HDR_END
    elif t is PacketType.TIMESTAMP:
        hdr = HDR_TIMESTAMP
    elif t in (PacketType.EVENTS, PacketType.DATA_SOURCE):
        if p.size not in _SIZE_TO_SZ:
            raise ValueError(f"{t.name} payload size {p.size} is not 1, 2, 4 or 8")
        base = HDR_EVENTS if t is PacketType.EVENTS else HDR_DATA_SOURCE
        hdr = base | _put(HDR_SZ, _SIZE_TO_SZ[p.size])
    elif t in (PacketType.CONTEXT, PacketType.OP_TYPE):
        base = HDR_CONTEXT if t is PacketType.CONTEXT else HDR_OP_TYPE
        hdr = base | _put(HDR_LOW2, p.index)
    else:  # pragma: no cover - every PacketType is handled above
        raise AssertionError(t)
    if t not in (PacketType.CONTEXT, PacketType.OP_TYPE) and p.index != 0:
        raise ValueError(f"{t.name} packets have no index")
    return bytes((hdr,))


def _classify(hdr: bytes) -> PacketType:
    """Packet type of well-formed header bytes (§5.2.1, §5.2.2); UNKNOWN if not defined."""
    b0 = hdr[0]
    if len(hdr) == 2:
        b1 = hdr[1]
        if b1 == HDR1_ALIGNMENT and _get(b0, EXT0_ALIGN_RAZ) == 0:
            return PacketType.ALIGNMENT
        if _get(b0, EXT0_RAZ) == 0:
            if b1 & HDR_LOW3_ANY_MASK == HDR_ADDRESS:
                return PacketType.ADDRESS
            if b1 & HDR_LOW3_ANY_MASK == HDR_COUNTER:
                return PacketType.COUNTER
        return PacketType.UNKNOWN
    if b0 == HDR_PADDING:
        return PacketType.PADDING
    if b0 == HDR_END:
        return PacketType.END
    if b0 == HDR_TIMESTAMP:
        return PacketType.TIMESTAMP
    if b0 & HDR_SZ_ANY_MASK == HDR_EVENTS:
        return PacketType.EVENTS
    if b0 & HDR_SZ_ANY_MASK == HDR_DATA_SOURCE:
        return PacketType.DATA_SOURCE
    if b0 & HDR_LOW2_ANY_MASK == HDR_CONTEXT:
        return PacketType.CONTEXT
    if b0 & HDR_LOW2_ANY_MASK == HDR_OP_TYPE:
        return PacketType.OP_TYPE
    if b0 & HDR_LOW3_ANY_MASK == HDR_ADDRESS:
        return PacketType.ADDRESS
    if b0 & HDR_LOW3_ANY_MASK == HDR_COUNTER:
        return PacketType.COUNTER
    return PacketType.UNKNOWN


# --------------------------------------------------------------------------------------------
# bytes <-> Packet


def header_bytes(packet: Packet) -> bytes:
    """The 1 or 2 header bytes of ``packet`` (§5.2)."""
    return _derive_header(packet)


def encode(packet: Packet) -> bytes:
    """Bytes of ``packet``: header bytes, then the payload little-endian (§5.1.3).

    An Alignment command is followed by ``packet.size`` zero bytes (their value is UNKNOWN to
    a reader, §5.3.2).
    """
    hdr = _derive_header(packet)
    if packet.type is PacketType.ALIGNMENT:
        return hdr + bytes(packet.size)
    return hdr + packet.payload.to_bytes(packet.size, "little")


def decode(buf: bytes, offset: int = 0) -> Packet:
    """Decode the packet starting at ``buf[offset]``.

    Any header that is well formed under the D18.1.1 size rule decodes; types the supplement
    does not define come back as ``PacketType.UNKNOWN`` with the announced size, so a reader
    can skip ``packet.length`` bytes (§5.1.4). An Alignment command's fill is computed from
    ``offset``, i.e. ``buf[0]`` is taken to be aligned to at least the requested alignment.

    Raises:
        PacketIncomplete: ``buf`` ends before the packet does (including ``offset == len``).
        BadPacket: an extended prefix followed by another extended prefix.
    """
    end = len(buf)
    avail = end - offset
    if offset < 0 or avail < 0:
        raise ValueError(f"offset {offset} outside a buffer of {end} bytes")
    if avail == 0:
        raise PacketIncomplete(offset, 1, 0)
    b0 = buf[offset]
    entry = _SHORT_HEADERS[b0]
    if entry is None:  # extended prefix
        if avail < 2:
            raise PacketIncomplete(offset, 2, avail)
        b1 = buf[offset + 1]
        entry = _extended_headers()[b0 & ~HDR_EXTENDED_PREFIX_MASK][b1]
        if entry is None:
            raise BadPacket(offset, bytes((b0, b1)))
    kind, index, size, extended = entry
    if kind is PacketType.ALIGNMENT:
        fill = -(offset + 2) % alignment_bytes(index)
        if avail < 2 + fill:
            raise PacketIncomplete(offset, 2 + fill, avail)
        return _make(PacketType.ALIGNMENT, index, 0, fill, True, b0)
    hlen = 2 if extended else 1
    if size == 0 and not extended:
        return _SHORT_ZERO_SIZE[b0]          # Padding, End, ...: one shared immutable object
    need = hlen + size
    if avail < need:
        raise PacketIncomplete(offset, need, avail)
    payload = int.from_bytes(buf[offset + hlen:offset + need], "little")
    return _make(kind, index, payload, size, extended, b0)


def _make(kind: PacketType, index: int, payload: int, size: int, extended: bool,
          header: int) -> Packet:
    """A Packet from fields decode() has already checked (skips __post_init__)."""
    packet = object.__new__(Packet)
    packet.__dict__.update(type=kind, index=index, payload=payload, size=size,
                           extended=extended, header=header)
    return packet


def _header_entry(hdr: bytes) -> tuple[PacketType, int, int, bool]:
    """(type, index, payload size, extended) for well-formed header bytes (decode tables)."""
    kind = _classify(hdr)
    b0 = hdr[0]
    extended = len(hdr) == 2
    if kind is PacketType.ALIGNMENT:
        return kind, _get(b0, EXT0_ALIGN_SIZE), 0, True
    size = payload_size_for_header(hdr[-1])
    if kind in (PacketType.ADDRESS, PacketType.COUNTER):
        index = _get(hdr[-1], HDR_SHORT_INDEX)
        if extended:
            index |= _put(INDEX_HI, _get(b0, EXT0_INDEX_HI))
    elif kind in (PacketType.CONTEXT, PacketType.OP_TYPE):
        index = _get(b0, HDR_LOW2)
    elif kind is PacketType.UNKNOWN and extended:
        index = hdr[1]
    else:
        index = 0
    return kind, index, size, extended


# Decode tables, built once from _classify() and the D18.1.1 size rule: entry per first
# header byte (None: extended prefix), and per (prefix low 5 bits, second byte) (None: bad;
# built at the first extended header: 8192 entries take a run's start-up 35 ms).
_SHORT_HEADERS = [None if _is_extended_prefix(b) else _header_entry(bytes((b,)))
                  for b in range(256)]


@functools.cache
def _extended_headers() -> list[list[tuple | None]]:
    return [[None if _is_extended_prefix(b1)
             else _header_entry(bytes((HDR_EXTENDED_PREFIX | lo, b1)))
             for b1 in range(256)] for lo in range(32)]


_SHORT_ZERO_SIZE = {b: _make(e[0], e[1], 0, 0, False, b)
                    for b, e in enumerate(_SHORT_HEADERS) if e is not None and e[2] == 0}


def iter_packets(buf: bytes) -> Iterator[tuple[int, Union[Packet, TraceDecodeError]]]:
    """Walk ``buf``: yield ``(offset, Packet)`` for each packet.

    After a bad header yields ``(offset, BadPacket)`` and resumes one byte later. A packet
    the buffer ends inside yields ``(offset, PacketIncomplete)`` and decoding also resumes
    one byte later, as perf's decoder does (nothing tells a cut-off packet from a corrupted
    header; the bytes after it may still hold packets, e.g. Padding).
    """
    pos = 0
    end = len(buf)
    while pos < end:
        try:
            packet = decode(buf, pos)
        except (BadPacket, PacketIncomplete) as err:
            yield pos, err
            pos += 1
            continue
        yield pos, packet
        pos += packet.length


# --------------------------------------------------------------------------------------------
# Constructors (§5.3)


def _check_range(name: str, value: int, limit: int) -> int:
    if not isinstance(value, int) or not 0 <= value < limit:
        raise ValueError(f"{name} {value!r} out of range 0..{limit - 1:#x}")
    return int(value)


def address_packet(index: int, addr: int, *, el: Optional[int] = None,
                   ns: Optional[int] = None, tag: Optional[int] = None) -> Packet:
    """Address packet (§5.3.1), short header for index < 8, extended otherwise.

    * ADDR_PC / ADDR_BRANCH_TARGET / ADDR_PREV_BRANCH: payload = addr[55:0] | EL << 61 |
      NS << 63 (``el`` 0..3, ``ns`` 0/1; None means 0). ``tag`` is not allowed.
    * ADDR_DATA_VA: byte 7 is the top-byte tag: ``tag`` if given, else addr[63:56].
    * ADDR_DATA_PA: payload = addr[55:0] | NS << 63; ``el``/``tag`` not allowed.
    * other (IMPLEMENTATION DEFINED) indexes: payload = addr, no ``el``/``ns``/``tag``.

    ``addr`` is a 64-bit unsigned value; bits [63:56] are dropped for PC/TGT/PA.
    Raises ValueError for out-of-range values or a field the index does not carry.
    """
    _check_range("address index", index, _EXT_INDEX_LIMIT)
    _check_range("address", addr, 1 << 64)
    if index in (ADDR_PC, ADDR_BRANCH_TARGET, ADDR_PREV_BRANCH):
        if tag is not None:
            raise ValueError("instruction addresses carry no tag")
        payload = (_get(addr, ADDR_FIELD)
                   | _put(ADDR_EL, _check_range("EL", el or 0, 4))
                   | _put(ADDR_NS, _check_range("NS", int(ns or 0), 2)))
    elif index == ADDR_DATA_VA:
        if el is not None or ns is not None:
            raise ValueError("a data virtual address carries no EL or NS")
        top = _get(addr, ADDR_TAG) if tag is None else _check_range("tag", tag, 0x100)
        payload = _get(addr, ADDR_FIELD) | _put(ADDR_TAG, top)
    elif index == ADDR_DATA_PA:
        if el is not None or tag is not None:
            raise ValueError("a data physical address carries no EL or tag")
        payload = _get(addr, ADDR_FIELD) | _put(ADDR_NS, _check_range("NS", int(ns or 0), 2))
    else:
        if el is not None or ns is not None or tag is not None:
            raise ValueError(f"address index {index} carries no EL, NS or tag")
        payload = addr
    return Packet(PacketType.ADDRESS, index=index, payload=payload, size=8,
                  extended=index >= _SHORT_INDEX_LIMIT)


def counter_packet(index: int, value: int, *, bits: int = 12) -> Packet:
    """Counter packet (§5.3.4): 16-bit payload holding a ``bits``-wide saturating count.

    ``value`` >= 2**bits - 1 encodes 2**bits - 1 (0xFFF for the 12-bit counter: saturated).
    Short header for index < 8, extended otherwise. ValueError for a negative value.
    """
    _check_range("counter index", index, _EXT_INDEX_LIMIT)
    if not 1 <= bits <= 16:
        raise ValueError(f"counter width {bits} is not 1..16 bits")
    if value < 0:
        raise ValueError(f"counter value {value} is negative")
    return Packet(PacketType.COUNTER, index=index, payload=min(value, (1 << bits) - 1),
                  size=2, extended=index >= _SHORT_INDEX_LIMIT)


def events_packet(bits: int) -> Packet:
    """Events packet (§5.3.7): payload = ``bits`` (bit n = E[n]), in the smallest SZ of 1, 2,
    4 or 8 bytes that holds the highest set bit. ValueError for a bit that reads-as-zero
    (E[11], E[23:16], E[47:32])."""
    _check_range("events", bits, 1 << 64)
    if bits & EVENTS_RAZ_MASK:
        raise ValueError(f"events {bits:#x} set reads-as-zero bits {bits & EVENTS_RAZ_MASK:#x}")
    size = next(n for n in (1, 2, 4, 8) if bits < (1 << (8 * n)))
    return Packet(PacketType.EVENTS, payload=bits, size=size)


def op_type_packet(cls: int, subclass: int) -> Packet:
    """Operation Type packet (§5.3.8): CLASS in the header, SUBCLASS the payload byte.

    ValueError for a reserved CLASS or a SUBCLASS the class does not define (use
    :func:`ldst_gp`, :func:`ldst_simd_fp`, :func:`ldst_extended`, :func:`branch_subclass`,
    :func:`other_subclass` to build one).
    """
    _check_range("subclass", subclass, 0x100)
    if cls == OP_CLASS_OTHER:
        ok = subclass & _OTHER_FLAGS_MASK == 0
    elif cls == OP_CLASS_LDST:
        ok = (ldst_is_gp(subclass) or ldst_is_simd_fp(subclass)
              or (ldst_is_extended(subclass)
                  and not (subclass & LDST_AT and subclass & LDST_EXCL)))
    elif cls == OP_CLASS_BRANCH:
        ok = subclass & ~_mask(BRANCH_CR) & _BRANCH_KIND_MASK in (0, BRANCH_INDIRECT)
    else:
        raise ValueError(f"operation class {cls!r} is reserved")
    if not ok:
        raise ValueError(f"subclass {subclass:#04x} is reserved for class {cls}")
    return Packet(PacketType.OP_TYPE, index=cls, payload=subclass, size=1)


def context_packet(index: int, value: int) -> Packet:
    """Context packet (§5.3.3): CONTEXT_EL1 (CONTEXTIDR_EL1) or CONTEXT_EL2, 32-bit value."""
    if index not in (CONTEXT_EL1, CONTEXT_EL2):
        raise ValueError(f"context index {index!r} is reserved")
    return Packet(PacketType.CONTEXT, index=index,
                  payload=_check_range("context", value, 1 << 32), size=4)


def data_source_packet(value: int, size: int = 1) -> Packet:
    """Data Source packet (§5.3.5): IMPLEMENTATION DEFINED SOURCE in 1 or 2 bytes."""
    if size not in (1, 2):
        raise ValueError(f"data source size {size} is not 1 or 2 bytes")
    return Packet(PacketType.DATA_SOURCE,
                  payload=_check_range("data source", value, 1 << (8 * size)), size=size)


def timestamp_packet(ts: int) -> Packet:
    """Timestamp packet (§5.3.10): 64-bit timestamp; ends a record."""
    return Packet(PacketType.TIMESTAMP, payload=_check_range("timestamp", ts, 1 << 64), size=8)


def end_packet() -> Packet:
    """End packet (§5.3.6): ends a record without a timestamp."""
    return Packet(PacketType.END)


def padding_packet() -> Packet:
    """Padding (§5.3.9): one 0x00 byte."""
    return Packet(PacketType.PADDING)


def alignment_packet(size_code: int, offset: int = 0) -> Packet:
    """Alignment command (§5.3.2) to 2**(size_code+1) bytes, written at buffer ``offset``.

    The packet's ``size`` is the fill that follows the 2-byte command so that the next
    protocol byte lands on the boundary (``offset`` counted from an address aligned at least
    that much, e.g. the 4 KiB-aligned buffer base).
    """
    fill = -(_check_range("offset", offset, 1 << 64) + 2) % alignment_bytes(size_code)
    return Packet(PacketType.ALIGNMENT, index=size_code, size=fill, extended=True)


# Operation Type subclass builders and tests (§5.3.8).

def ldst_gp(store: bool) -> int:
    """Load/store SUBCLASS for general-purpose registers (0b0000000x)."""
    return LDST_GP | (LDST_ST if store else 0)


def ldst_simd_fp(store: bool) -> int:
    """Load/store SUBCLASS for SIMD&FP registers (0b0000010x)."""
    return LDST_SIMD_FP | (LDST_ST if store else 0)


def ldst_extended(store: bool, *, ar: bool = False, excl: bool = False, at: bool = False) -> int:
    """Load/store SUBCLASS for atomic, acquire/release or exclusive (0b000xxx1x).
    ValueError for EXCL together with AT (EXCL is RES0 when AT == 1)."""
    if excl and at:
        raise ValueError("EXCL is RES0 for an atomic (AT == 1) operation")
    return (LDST_EXTENDED | (LDST_ST if store else 0) | (LDST_AR if ar else 0)
            | (LDST_EXCL if excl else 0) | (LDST_AT if at else 0))


def branch_subclass(cond: bool, indirect: bool) -> int:
    """Branch SUBCLASS: COND in bit 0, indirect in bit 1."""
    return (BRANCH_COND if cond else 0) | (BRANCH_INDIRECT if indirect else 0)


def other_subclass(cond: bool) -> int:
    """Other SUBCLASS: 0x01 conditional instruction or select, 0x00 otherwise."""
    return OTHER_COND if cond else OTHER_UNCOND


def ldst_is_gp(subclass: int) -> bool:
    return subclass & _LDST_KIND_MASK == LDST_GP


def ldst_is_simd_fp(subclass: int) -> bool:
    return subclass & _LDST_KIND_MASK == LDST_SIMD_FP


def ldst_is_extended(subclass: int) -> bool:
    return subclass & _LDST_EXTENDED_MASK == LDST_EXTENDED


def ldst_is_sve(subclass: int) -> bool:
    """Load/store SUBCLASS 0bxxxx1x0x: an SVE load or store (EVL, PRED, SG fields)."""
    return subclass & _LDST_SVE_MASK == LDST_SVE


def other_is_sve(subclass: int) -> bool:
    """Other-class SUBCLASS 0b0xxx1xx0: an SVE vector operation (EVL, PRED, FP fields)."""
    return subclass & _OTHER_SVE_MASK == OTHER_SVE


def sve_evlen(subclass: int) -> int:
    """Effective vector length in bits of an SVE operation's SUBCLASS (32 << EVL)."""
    return SVE_EVL_UNIT << _get(subclass, SVE_EVL)


def branch_is_indirect(subclass: int) -> bool:
    return subclass & ~_mask(BRANCH_CR) & _BRANCH_KIND_MASK == BRANCH_INDIRECT


def branch_with_cr(subclass: int, cr: int) -> int:
    """Branch SUBCLASS with its CR field (bits 4:3, FEAT_SPE_CRR) set to ``cr`` (CR_*)."""
    return subclass & ~_mask(BRANCH_CR) | _put(BRANCH_CR, cr)


def other_with_simd_fp(subclass: int, ase: bool, fp: bool) -> int:
    """Other SUBCLASS with the FEAT_SPE_FPF flags: ASE (bit 2) and FP (bit 1)."""
    return subclass | (OTHER_ASE if ase else 0) | (OTHER_FP if fp else 0)


# --------------------------------------------------------------------------------------------
# Packet -> text (the wording of Linux perf's arm-spe packet decoder, `perf report -D`)

_EVENT_NAMES = (
    (EV_EXCEPTION_GEN, "EXCEPTION-GEN"),
    (EV_RETIRED, "RETIRED"),
    (EV_L1D_ACCESS, "L1D-ACCESS"),
    (EV_L1D_REFILL, "L1D-REFILL"),
    (EV_TLB_ACCESS, "TLB-ACCESS"),
    (EV_TLB_WALK, "TLB-REFILL"),
    (EV_NOT_TAKEN, "NOT-TAKEN"),
    (EV_MISPRED, "MISPRED"),
    (EV_LLC_ACCESS, "LLC-ACCESS"),
    (EV_LLC_MISS, "LLC-REFILL"),
    (EV_REMOTE_ACCESS, "REMOTE-ACCESS"),
    (EV_ALIGNMENT, "ALIGNMENT"),
    (EV_SVE_PARTIAL_PRED, "SVE-PARTIAL-PRED"),
    (EV_SVE_EMPTY_PRED, "SVE-EMPTY-PRED"),
)

_COUNTER_NAMES = {COUNTER_TOTAL: "TOT", COUNTER_ISSUE: "ISSUE", COUNTER_XLAT: "XLAT"}
# (index 4, the previous branch target, prints raw as perf 6.1 prints it: "ADDR 0x.. (4)")
_ADDRESS_NAMES = {ADDR_PC: "PC", ADDR_BRANCH_TARGET: "TGT"}

# Names used for the raw fallback "<NAME> 0x<payload> (<index>)" of reserved indexes.
_RAW_NAMES = {PacketType.ADDRESS: "ADDR", PacketType.COUNTER: "LAT",
              PacketType.CONTEXT: "CONTEXT", PacketType.OP_TYPE: "OP-TYPE"}


def _raw(packet: Packet) -> str:
    return f"{_RAW_NAMES[packet.type]} 0x{packet.payload:x} ({packet.index})"


def _describe_op_type(packet: Packet) -> str:
    sub = packet.payload
    if packet.index == OP_CLASS_OTHER:
        if other_is_sve(sub):
            return " ".join(["SVE-OTHER", f"EVLEN {sve_evlen(sub)}"]
                            + (["FP"] if _get(sub, SVE_FP) else [])
                            + (["PRED"] if _get(sub, SVE_PRED) else []))
        return " ".join(["OTHER"] + [name for bit, name in ((OTHER_ASE, "ASE"),
                                                             (OTHER_FP, "FP")) if sub & bit]
                        + ["COND-SELECT" if sub & OTHER_COND else "INSN-OTHER"])
    if packet.index == OP_CLASS_LDST:
        words = ["ST" if sub & LDST_ST else "LD"]
        if ldst_is_extended(sub):
            words += [name for bit, name in ((LDST_AT, "AT"), (LDST_EXCL, "EXCL"),
                                             (LDST_AR, "AR")) if sub & bit]
        elif ldst_is_simd_fp(sub):
            words.append("SIMD-FP")
        elif ldst_is_gp(sub):
            words.append("GP-REG")
        elif sub & _LDST_KIND_MASK == LDST_UNSPEC_REG:
            words.append("UNSPEC-REG")
        elif sub & _LDST_KIND_MASK == LDST_NV_SYSREG:
            words.append("NV-SYSREG")
        elif ldst_is_sve(sub):
            words.append(f"EVLEN {sve_evlen(sub)}")
            words += [name for f, name in ((SVE_PRED, "PRED"), (SVE_SG, "SG")) if _get(sub, f)]
        return " ".join(words)
    if packet.index == OP_CLASS_BRANCH:
        words = ["B"]
        if sub & BRANCH_COND:
            words.append("COND")
        if branch_is_indirect(sub):
            words.append("IND")
        cr = _get(sub, BRANCH_CR)
        if cr:
            words.append({CR_CALL: "CALL", CR_RETURN: "RET", CR_OTHER: "NOT-CALL-RET"}[cr])
        return " ".join(words)
    return _raw(packet)


def _describe_address(packet: Packet) -> str:
    p = packet.payload
    if packet.index in _ADDRESS_NAMES:
        return (f"{_ADDRESS_NAMES[packet.index]} 0x{_get(p, ADDR_FIELD):x} "
                f"el{_get(p, ADDR_EL)} ns={_get(p, ADDR_NS)}")
    if packet.index == ADDR_DATA_VA:
        return f"VA 0x{p:x}"
    if packet.index == ADDR_DATA_PA:
        # perf also prints the SPEv1.1 CH (bit 62) and PAT (bits 59:56) fields; in format
        # version 0 these bits read as zero (§5.3.1 "Byte 7 bits [6:0]").
        return (f"PA 0x{_get(p, ADDR_FIELD):x} ns={_get(p, ADDR_NS)} "
                f"ch={_get(p, ADDR_CH)} pat={_get(p, ADDR_PAT):x}")
    return _raw(packet)


def describe(packet: Packet) -> str:
    """One line of text for ``packet``, worded like ``perf report -D``.

    Examples: ``PC 0x40000080 el1 ns=1``, ``VA 0x48001000``, ``LAT 20 TOT``,
    ``EV RETIRED L1D-ACCESS``, ``LD GP-REG``, ``B COND IND``, ``OTHER INSN-OTHER``,
    ``SVE-OTHER EVLEN 256 FP PRED``, ``ST EVLEN 128 PRED SG``, ``EV ALIGNMENT``,
    ``CONTEXT 0x2a el1``, ``TS 1000``, ``END``, ``PAD``. Reserved indexes print perf's raw
    form ``<NAME> 0x<payload> (<index>)``; UNKNOWN packets print ``UNKNOWN <header> 0x<payload>``.
    Alignment commands print ``PAD``, as perf does.
    """
    t = packet.type
    if t in (PacketType.PADDING, PacketType.ALIGNMENT):
        return "PAD"
    if t is PacketType.END:
        return "END"
    if t is PacketType.TIMESTAMP:
        return f"TS {packet.payload}"
    if t is PacketType.DATA_SOURCE:
        return f"DATA-SOURCE {packet.payload}"
    if t is PacketType.EVENTS:
        return " ".join(["EV"] + [name for bit, name in _EVENT_NAMES
                                  if packet.payload >> bit & 1])
    if t is PacketType.CONTEXT:
        if packet.index in (CONTEXT_EL1, CONTEXT_EL2):
            return f"CONTEXT 0x{packet.payload:x} el{packet.index + 1}"
        return _raw(packet)
    if t is PacketType.COUNTER:
        if packet.index in _COUNTER_NAMES:
            return f"LAT {packet.payload} {_COUNTER_NAMES[packet.index]}"
        return f"LAT {packet.payload} ({packet.index})"
    if t is PacketType.OP_TYPE:
        return _describe_op_type(packet)
    if t is PacketType.ADDRESS:
        return _describe_address(packet)
    hdr = header_bytes(packet).hex(" ")
    return f"UNKNOWN {hdr} 0x{packet.payload:x}"


# --------------------------------------------------------------------------------------------
# Packets -> records (§5.1.2)


def _sign_extend_55(addr: int) -> int:
    """Bits [55:0] of an address, sign-extended from bit 55 to 64 bits (unsigned result)."""
    addr = _get(addr, ADDR_FIELD)
    if addr >> ADDR_SIGN_BIT & 1:
        addr |= _mask((63, 56))
    return addr


@dataclass
class Record:
    """One sample record: the packets from the first non-padding packet to End/Timestamp.

    Convenience fields are None when the record has no such packet (``events`` is then 0):
        offset, length: where the record starts in the buffer and the bytes up to the end of
            its End/Timestamp packet (from_packets() alone sums the packet lengths).
        pc, el, ns: issued instruction address (bits [55:0] sign-extended from bit 55), its
            Exception level and Non-secure bit (Address index 0).
        branch_target, target_el, target_ns: the same for Address index 1.
        data_va: data virtual address without its tag, sign-extended from bit 55;
            data_va_tag: the top-byte tag. data_pa, pa_ns: Address index 3.
        op_class, op_subclass: Operation Type CLASS (an :class:`OpClass`: OTHER, LOAD_STORE,
            BRANCH; a plain int for the reserved value 3) and SUBCLASS; ``operation``: the
            Operation Type packet in words (:func:`describe`: ``LD GP-REG``, ``B COND``...).
        events: the Events payload (bit n = E[n]).
        latency_total, latency_issue, latency_xlat: Counter indexes 0, 1, 2 (cycles).
        timestamp: the Timestamp payload (None for a record ended by End).
        context, context_el2: Context packet indexes 0 and 1.
        data_source: the Data Source payload.
    """

    offset: int
    packets: list[Packet] = field(default_factory=list)
    length: int = 0
    pc: Optional[int] = None
    el: Optional[int] = None
    ns: Optional[int] = None
    branch_target: Optional[int] = None
    target_el: Optional[int] = None
    target_ns: Optional[int] = None
    data_va: Optional[int] = None
    data_va_tag: Optional[int] = None
    data_pa: Optional[int] = None
    pa_ns: Optional[int] = None
    op_class: Optional[Union[OpClass, int]] = None
    op_subclass: Optional[int] = None
    events: int = 0
    latency_total: Optional[int] = None
    latency_issue: Optional[int] = None
    latency_xlat: Optional[int] = None
    timestamp: Optional[int] = None
    context: Optional[int] = None
    context_el2: Optional[int] = None
    data_source: Optional[int] = None

    @property
    def operation(self) -> Optional[str]:
        """The record's Operation Type packet in words (:func:`describe`, e.g. ``LD GP-REG``,
        ``B COND IND``, ``OTHER INSN-OTHER``); None without one."""
        ops = [p for p in self.packets if p.type is PacketType.OP_TYPE]
        return describe(ops[-1]) if ops else None

    @classmethod
    def from_packets(cls, offset: int, packets: list[Packet]) -> "Record":
        """Build a record from its packets (later packets of a kind override earlier ones)."""
        rec = cls(offset=offset, packets=list(packets),
                  length=sum(p.length for p in packets))
        for p in packets:
            v = p.payload
            if p.type is PacketType.ADDRESS:
                if p.index == ADDR_PC:
                    rec.pc, rec.el, rec.ns = _sign_extend_55(v), _get(v, ADDR_EL), _get(v, ADDR_NS)
                elif p.index == ADDR_BRANCH_TARGET:
                    rec.branch_target = _sign_extend_55(v)
                    rec.target_el, rec.target_ns = _get(v, ADDR_EL), _get(v, ADDR_NS)
                elif p.index == ADDR_DATA_VA:
                    rec.data_va, rec.data_va_tag = _sign_extend_55(v), _get(v, ADDR_TAG)
                elif p.index == ADDR_DATA_PA:
                    rec.data_pa, rec.pa_ns = _get(v, ADDR_FIELD), _get(v, ADDR_NS)

            elif p.type is PacketType.COUNTER:
                if p.index == COUNTER_TOTAL:
                    rec.latency_total = v
                elif p.index == COUNTER_ISSUE:
                    rec.latency_issue = v
                elif p.index == COUNTER_XLAT:
                    rec.latency_xlat = v
            elif p.type is PacketType.OP_TYPE:
                rec.op_subclass = v
                rec.op_class = (OpClass(p.index) if p.index in OpClass._value2member_map_
                                else p.index)
            elif p.type is PacketType.EVENTS:
                rec.events = v
            elif p.type is PacketType.TIMESTAMP:
                rec.timestamp = v
            elif p.type is PacketType.CONTEXT:
                if p.index == CONTEXT_EL1:
                    rec.context = v
                elif p.index == CONTEXT_EL2:
                    rec.context_el2 = v
            elif p.type is PacketType.DATA_SOURCE:
                rec.data_source = v
        return rec


_FRAMING_FILL = (PacketType.PADDING, PacketType.ALIGNMENT)
_RECORD_END = (PacketType.END, PacketType.TIMESTAMP)


def iter_records(buf: bytes) -> Iterator[Record]:
    """Records of ``buf`` in order (§5.1.2).

    Padding and Alignment commands are skipped (between records, §5.1.4, and, leniently,
    inside one). A bad header or a packet cut off by the end of the buffer discards the
    record being assembled and decoding resumes one byte later, as perf does; a record
    without End/Timestamp at the end of the buffer is dropped. UNKNOWN packets stay in
    ``Record.packets`` and set no field.
    """
    current: Optional[list[Packet]] = None
    start = 0
    for offset, item in iter_packets(buf):
        if isinstance(item, (BadPacket, PacketIncomplete)):
            current = None
            continue
        if item.type in _FRAMING_FILL:
            continue
        if current is None:
            current, start = [], offset
        current.append(item)
        if item.type in _RECORD_END:
            record = Record.from_packets(start, current)
            record.length = offset + item.length - start
            yield record
            current = None


# --------------------------------------------------------------------------------------------
# Fast encoders for the record builder (one call per packet per sample, no Packet objects).
# Each returns exactly ``encode(<constructor>(...))`` for valid arguments (property-tested in
# tests/test_packets_fast.py); the header bytes come from the canonical encoder above.

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_ADDR_HEADERS = {i: header_bytes(address_packet(i, 0)) for i in
                 (ADDR_PC, ADDR_BRANCH_TARGET, ADDR_DATA_VA, ADDR_DATA_PA, ADDR_PREV_BRANCH)}
_COUNTER_HEADERS = {i: header_bytes(counter_packet(i, 0)) for i in
                    (COUNTER_TOTAL, COUNTER_ISSUE, COUNTER_XLAT)}
_EVENT_HEADERS = {n: header_bytes(Packet(PacketType.EVENTS, size=n)) for n in (1, 2, 4, 8)}
_CONTEXT_HEADERS = {i: header_bytes(context_packet(i, 0)) for i in (CONTEXT_EL1, CONTEXT_EL2)}
_TIMESTAMP_HEADER = header_bytes(timestamp_packet(0))
_ADDR_MASK = _mask(ADDR_FIELD)
END_BYTES = encode(end_packet())


def instruction_address_bytes(index: int, addr: int, el: int, ns: int) -> bytes:
    """``encode(address_packet(index, addr, el=el, ns=ns))`` for ADDR_PC, ADDR_BRANCH_TARGET
    and ADDR_PREV_BRANCH."""
    return _ADDR_HEADERS[index] + _U64.pack((addr & _ADDR_MASK) | _put(ADDR_EL, el)
                                            | _put(ADDR_NS, ns))


def data_va_bytes(addr: int) -> bytes:
    """``encode(address_packet(ADDR_DATA_VA, addr))`` (top byte kept as the tag)."""
    return _ADDR_HEADERS[ADDR_DATA_VA] + _U64.pack(addr)


def data_pa_bytes(addr: int, ns: int) -> bytes:
    """``encode(address_packet(ADDR_DATA_PA, addr, ns=ns))``."""
    return _ADDR_HEADERS[ADDR_DATA_PA] + _U64.pack((addr & _ADDR_MASK) | _put(ADDR_NS, ns))


def counter_bytes(index: int, value: int, maximum: int = COUNTER_MAX) -> bytes:
    """``encode(counter_packet(index, value, bits=...))``: saturating at ``maximum``
    (2**bits - 1; default 12-bit)."""
    return _COUNTER_HEADERS[index] + _U16.pack(min(value, maximum))


def events_bytes(bits: int) -> bytes:
    """``encode(events_packet(bits))``."""
    if bits < 0x100:
        return _EVENT_HEADERS[1] + bytes((bits,))
    if bits < 0x10000:
        return _EVENT_HEADERS[2] + _U16.pack(bits)
    if bits < 1 << 32:
        return _EVENT_HEADERS[4] + _U32.pack(bits)
    return _EVENT_HEADERS[8] + _U64.pack(bits)


def op_type_bytes(cls: int, subclass: int) -> bytes:
    """``encode(op_type_packet(cls, subclass))`` (arguments not re-validated)."""
    return bytes((_OP_TYPE_HEADERS[cls], subclass))


def context_bytes(index: int, value: int) -> bytes:
    """``encode(context_packet(index, value))``."""
    return _CONTEXT_HEADERS[index] + _U32.pack(value)


def timestamp_bytes(ts: int) -> bytes:
    """``encode(timestamp_packet(ts))``."""
    return _TIMESTAMP_HEADER + _U64.pack(ts)


_OP_TYPE_HEADERS = {c: header_bytes(op_type_packet(c, 0))[0]
                    for c in (OP_CLASS_OTHER, OP_CLASS_LDST, OP_CLASS_BRANCH)}
