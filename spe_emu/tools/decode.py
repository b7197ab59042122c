"""Text dump of a raw SPE trace in the layout of ``perf report -D``.

One line per packet::

    .  00000000:  b0 80 00 00 40 00 00 00 a0                       PC 0x40000080 el1 ns=1

i.e. a dot, the offset as 8 hex digits, the packet bytes as `` xx`` padded to 16 byte columns,
then the description from :func:`spe_emu.spe.packets.describe`. As in perf, runs of Padding
bytes share a line (up to 16 bytes) and a malformed header, or a packet the trace ends
inside, prints ``Bad packet!`` for one byte, after which decoding resynchronises on the next
byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..spe.packets import (
    BadPacket, Packet, PacketIncomplete, PacketType, describe, iter_packets, iter_records,
)

#: Byte columns before the description (perf pads every packet to 16 bytes).
BYTE_COLUMNS = 16
BAD_PACKET_TEXT = "Bad packet!"


@dataclass(frozen=True)
class DecodedLine:
    """One dump line: ``offset`` into the trace, the ``raw`` bytes it covers, and ``text``."""

    offset: int
    raw: bytes
    text: str


def decode_lines(data: bytes) -> Iterator[DecodedLine]:
    """Lines for every packet of ``data`` (bytes of a Profiling Buffer, starting at a record).

    * a packet: its bytes and :func:`describe` text; consecutive Padding bytes are merged into
      one ``PAD`` line of at most 16 bytes;
    * a bad header, or a packet the data ends inside: the one byte and ``Bad packet!``
      (decoding resumes at the next byte, as perf's).
    """
    data = bytes(data)
    pad_start = None

    def flush_pad(end: int) -> Iterator[DecodedLine]:
        nonlocal pad_start
        if pad_start is not None:
            yield DecodedLine(pad_start, data[pad_start:end], "PAD")
            pad_start = None

    for offset, item in iter_packets(data):
        if isinstance(item, Packet) and item.type is PacketType.PADDING:
            if pad_start is not None and offset - pad_start >= BYTE_COLUMNS:
                yield from flush_pad(offset)
            if pad_start is None:
                pad_start = offset
            continue
        yield from flush_pad(offset)
        if isinstance(item, (BadPacket, PacketIncomplete)):
            yield DecodedLine(offset, data[offset:offset + 1], BAD_PACKET_TEXT)
        else:
            yield DecodedLine(offset, data[offset:offset + item.length], describe(item))
    yield from flush_pad(len(data))


def format_line(line: DecodedLine) -> str:
    """``line`` as perf prints it: ``.  %08x: `` + `` %02x`` per byte, padded to 16 byte
    columns, then a space and the text."""
    hex_bytes = "".join(f" {b:02x}" for b in line.raw)
    pad = "   " * max(0, BYTE_COLUMNS - len(line.raw))
    return f".  {line.offset:08x}: {hex_bytes}{pad} {line.text}"


def dump_lines(data: bytes) -> Iterator[str]:
    """The whole dump: perf's ``. ... ARM SPE data: size 0x.. bytes`` line, then one
    :func:`format_line` per :func:`decode_lines` entry."""
    yield f". ... ARM SPE data: size {len(data):#x} bytes"
    for line in decode_lines(data):
        yield format_line(line)


def dump_text(data: bytes) -> Iterator[str]:
    """The text of :func:`dump_lines`, each line ending in a newline, in chunks of a few MiB:
    from the native bulk decoder (``spe_emu/native/decode.c``, the same lines, fuzz-tested
    against this module), or from :func:`dump_lines` where it cannot be loaded."""
    data = bytes(data)
    try:
        from ..native import NativeBuildError
        from .bulkdecode import dump_chunks
        chunks = dump_chunks(data)
        first = next(chunks, "")
    except (ImportError, NativeBuildError):
        for line in dump_lines(data):
            yield line + "\n"
        return
    yield f". ... ARM SPE data: size {len(data):#x} bytes\n"
    yield first
    yield from chunks


def summarize(data: bytes) -> dict[str, int]:
    """Counts for ``data``.

    Keys: ``bytes`` (trace size), ``packets`` (decoded packets, each Padding byte counted),
    ``records`` (complete records, see :func:`spe_emu.spe.packets.iter_records`),
    ``bad_packets`` (the ``Bad packet!`` lines: bad headers and packets cut off by the end),
    ``unknown_packets`` (well formed but undefined, skipped by size), ``padding_bytes``
    (Padding bytes plus Alignment commands and their fill), ``truncated_bytes`` (bytes from
    the first packet the data ends inside to the end, 0 if none).
    """
    data = bytes(data)
    counts = {"bytes": len(data), "packets": 0, "records": 0, "bad_packets": 0,
              "unknown_packets": 0, "padding_bytes": 0, "truncated_bytes": 0}
    for offset, item in iter_packets(data):
        if isinstance(item, (BadPacket, PacketIncomplete)):
            counts["bad_packets"] += 1
            if isinstance(item, PacketIncomplete) and not counts["truncated_bytes"]:
                counts["truncated_bytes"] = len(data) - offset
        else:
            counts["packets"] += 1
            if item.type is PacketType.UNKNOWN:
                counts["unknown_packets"] += 1
            elif item.type in (PacketType.PADDING, PacketType.ALIGNMENT):
                counts["padding_bytes"] += item.length
    counts["records"] = sum(1 for _ in iter_records(data))
    return counts
