"""Write an SPE trace as a ``perf.data`` file that Linux perf reads.

``perf report``, ``perf script``, ``perf report --mem-mode`` and ``perf report -D`` decode the
file with perf's own Arm SPE decoder and name the guest's functions. Layout (perf's
``tools/perf/Documentation/perf.data-file-format.txt``; the record types are the kernel's
``include/uapi/linux/perf_event.h`` ABI and perf's user records):

* the 104-byte ``PERFILE2`` header; one attr (``perf_event_attr``, 128 bytes, ``type`` = the
  SPE PMU type :data:`ARM_SPE_PMU_TYPE`, ``sample_id_all`` set, sample type IP|TID, no TIME:
  perf decodes the trace "timeless") with one sample id (perf's arm_spe code derives the ids
  of the samples it synthesises from it);
* the data section: ``PERF_RECORD_AUXTRACE_INFO`` (auxtrace type PERF_AUXTRACE_ARM_SPE, the
  same PMU type), ``PERF_RECORD_COMM`` (the guest's command name), one ``PERF_RECORD_MMAP2``
  per executable ``PT_LOAD`` segment of every image (guest and firmware share one address
  space: perf takes every address below 2**63 as user space when no kernel is mapped),
  ``PERF_RECORD_AUXTRACE`` carrying the raw SPE bytes, ``PERF_RECORD_AUX`` and
  ``PERF_RECORD_EXIT``;
* feature sections: HEADER_BUILD_ID (images that carry an ``NT_GNU_BUILD_ID`` note; perf
  finds the others by path, the MMAP2 records name the images' absolute paths), HEADER_ARCH
  (``aarch64``), HEADER_NRCPUS, HEADER_CPUID (the emulated PE's MIDR_EL1, as arm64 perf
  writes it), HEADER_EVENT_DESC (the event name ``arm_spe_0//``), HEADER_PMU_MAPPINGS, and
  HEADER_CPU_TOPOLOGY / HEADER_NUMA_TOPOLOGY (one PE, core, socket and node: what ``perf c2c
  report`` sets its nodes up from).

Which events perf synthesises from the records (and so which one ``perf report``, ``perf mem
report`` and ``perf annotate`` show first: ``l1d-miss`` by default) is the reader's
``--itrace`` option, never something a perf.data holds: the README's commands give
``--itrace=i1i`` (an ``instructions`` sample per record) or ``--itrace=M`` (a ``memory``
sample per load/store).

Nothing host-dependent (time, host name, pid) is written: the same trace and images give
the same bytes.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

from ..errors import ImageError
from ..platform.inputs import open_input
from ..platform.loader import PF_R, PF_W, PF_X

PathLike = Union[str, os.PathLike]

PERF_MAGIC = b"PERFILE2"
#: PMU type number the attr and the auxtrace info declare (perf matches the two; any value
#: outside the kernel's fixed types works, 8 is what a Linux arm64 machine typically assigns).
ARM_SPE_PMU_TYPE = 8
ARM_SPE_PMU_NAME = "arm_spe_0"
#: ``enum auxtrace_type`` in perf's auxtrace.h: UNKNOWN, INTEL_PT, INTEL_BTS, CS_ETM, ARM_SPE.
PERF_AUXTRACE_ARM_SPE = 4
#: MIDR_EL1 of the emulated PE (Unicorn's "max" CPU: implementer 0, part 0xf05).
EMULATED_MIDR = 0x000F0510
#: Process and thread id given to the guest (no host pid: deterministic output).
GUEST_PID = 1000
SAMPLE_ID = 1
DEFAULT_COMM = "guest"
PERF_DATA_NAME = "perf.data"          # the file ``spe-emu run --perf-data`` writes

# perf_event_header.type (kernel ABI and perf's user types >= 64).
PERF_RECORD_COMM = 3
PERF_RECORD_MMAP2 = 10
PERF_RECORD_AUX = 11
PERF_RECORD_FINISHED_ROUND = 68
PERF_RECORD_AUXTRACE_INFO = 70
PERF_RECORD_AUXTRACE = 71
PERF_RECORD_TIME_CONV = 79

# perf_event_header.misc bits.
PERF_RECORD_MISC_USER = 2
PERF_RECORD_MISC_COMM_EXEC = 1 << 13
PERF_RECORD_MISC_MMAP_BUILD_ID = 1 << 14
PERF_RECORD_MISC_BUILD_ID_SIZE = 1 << 15

# perf_event_attr.sample_type bits and flag bits (perf_event.h).
PERF_SAMPLE_IP = 1 << 0
PERF_SAMPLE_TID = 1 << 1
PERF_SAMPLE_TIME = 1 << 2
PERF_SAMPLE_ADDR = 1 << 3
PERF_SAMPLE_IDENTIFIER = 1 << 16
ATTR_FLAG_DISABLED = 1 << 0
ATTR_FLAG_SAMPLE_ID_ALL = 1 << 18
#: IDENTIFIER: perf adds the events it synthesises from the trace to the evlist and then
#: needs the id at the end of every record to tell which event a record belongs to.
SAMPLE_TYPE = (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR
               | PERF_SAMPLE_IDENTIFIER)
ATTR_SIZE = 128                       # PERF_ATTR_SIZE_VER7 (perf 6.1 refuses larger ones)

# Feature bits of the header's adds_features bitmap (perf's header.h enum).
HEADER_BUILD_ID = 2
HEADER_ARCH = 6
HEADER_NRCPUS = 7
HEADER_CPUID = 9
HEADER_EVENT_DESC = 12
HEADER_CPU_TOPOLOGY = 13
HEADER_NUMA_TOPOLOGY = 14
NUMA_MEM_KIB = 1 << 20   # the one node's memory in HEADER_NUMA_TOPOLOGY (KiB: 1 GiB)
HEADER_PMU_MAPPINGS = 16
FEATURE_BITS = 256

NAME_ALIGN = 64                       # perf pads header strings and build-id names to this
RECORD_ALIGN = 8                      # records and AUXTRACE payloads are 8-byte aligned
BUILD_ID_MAX = 20
PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
MAP_PRIVATE = 2
NT_GNU_BUILD_ID = 3

# Declared layouts (little-endian, as the file is written by a little-endian machine).
_FILE_HEADER = struct.Struct("<8sQQ QQ QQ QQ 4Q")   # magic, size, attr_size, attrs, data,
#                                                   # event_types, adds_features[4]
_SECTION = struct.Struct("<QQ")                      # perf_file_section: offset, size
_EVENT_HEADER = struct.Struct("<IHH")                # perf_event_header: type, misc, size
_ATTR = struct.Struct("<IIQQQQQIIQQQQIiQIHHIIQ")     # perf_event_attr, 128 bytes
_AUXTRACE_INFO = struct.Struct("<II")                # type, reserved; then u64 priv[]
_AUXTRACE = struct.Struct("<QQQIIII")                # size, offset, reference, idx, tid, cpu, rsvd
_AUX = struct.Struct("<QQQ")                         # aux_offset, aux_size, flags
_COMM = struct.Struct("<II")                         # pid, tid; then comm[]
_TIME_CONV = struct.Struct("<QQQQQBB6x")            # time_shift, time_mult, time_zero,
#                                                   # time_cycles, time_mask, cap_user_time_zero,
#                                                   # cap_user_time_short
_MMAP2 = struct.Struct("<IIQQQBBH20sII")             # pid, tid, addr, len, pgoff,
#                                                   # build_id_size, rsvd, rsvd, build_id,
#                                                   # prot, flags; then filename[]
_MMAP2_INODE = struct.Struct("<IIQQQIIQQII")         # the same with maj, min, ino, ino_gen
_SAMPLE_ID = struct.Struct("<IIQQ")                  # sample_id_all trailer: pid, tid, time, id
_BUILD_ID_EVENT = struct.Struct("<i20sBBH")          # pid, build_id[20], size, rsvd, rsvd
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

assert _ATTR.size == ATTR_SIZE and _FILE_HEADER.size == 104


@dataclass(frozen=True)
class ImageMap:
    """One ``PT_LOAD`` segment of an image, as perf maps it.

    Attributes: ``path`` (absolute), ``vaddr``/``memsz`` (bytes), ``offset`` (``p_offset``,
    perf's pgoff), ``prot`` (PROT_READ/PROT_WRITE/PROT_EXEC from ``p_flags``), ``build_id``
    (the NT_GNU_BUILD_ID bytes, empty when the image has none).
    """

    path: str
    vaddr: int
    memsz: int
    offset: int
    prot: int
    build_id: bytes


def image_maps(path: PathLike) -> list[ImageMap]:
    """The loadable segments of the AArch64 ELF at ``path`` (code and data: perf names the
    data addresses of ``--mem-mode`` from the data segments' symbols).

    Raises ImageError (message starting with the path) when the file is missing, not a
    regular file (spe_emu.platform.inputs: a named pipe is never waited on), not an ELF or
    not AArch64.
    """
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    full = os.path.abspath(os.fspath(path))
    try:
        with open_input(path) as fh:
            elf = ELFFile(fh)
            if elf["e_machine"] != "EM_AARCH64":
                raise ImageError(f"{path}: not an AArch64 ELF image "
                                 f"(machine {elf['e_machine']})")
            build_id = b""
            for sec in elf.iter_sections():
                if sec["sh_type"] != "SHT_NOTE":
                    continue
                for note in sec.iter_notes():
                    if note["n_type"] == "NT_GNU_BUILD_ID" and note["n_name"] == "GNU":
                        build_id = bytes.fromhex(note["n_desc"])[:BUILD_ID_MAX]
            maps = [ImageMap(full, seg["p_vaddr"], seg["p_memsz"], seg["p_offset"],
                             _prot(seg["p_flags"]), build_id)
                    for seg in elf.iter_segments()
                    if seg["p_type"] == "PT_LOAD" and seg["p_memsz"]]
    except OSError as err:
        raise ImageError(f"{path}: cannot read image: {err.strerror or err}") from err
    except ELFError as err:
        raise ImageError(f"{path}: not a valid ELF file: {err}") from err
    return maps



def _prot(p_flags: int) -> int:
    """mmap protection bits of an ELF segment's ``p_flags``."""
    return ((PROT_READ if p_flags & PF_R else 0) | (PROT_WRITE if p_flags & PF_W else 0)
            | (PROT_EXEC if p_flags & PF_X else 0))


def _pad(data: bytes, align: int) -> bytes:
    return data + bytes(-len(data) % align)


def _cstring(text: str, align: int) -> bytes:
    """NUL-terminated ``text`` padded with NULs to a multiple of ``align`` bytes."""
    return _pad(text.encode() + b"\0", align)


def _header_string(text: str) -> bytes:
    """perf's header string: u32 length (padded, with the NUL), then the padded bytes."""
    body = _cstring(text, NAME_ALIGN)
    return _U32.pack(len(body)) + body


def _record(rtype: int, misc: int, body: bytes, align: int = RECORD_ALIGN) -> bytes:
    size = _EVENT_HEADER.size + len(body)
    if size % align or size > 0xFFFF:
        raise ValueError(f"record type {rtype}: size {size} is not a u16 multiple of {align}")
    return _EVENT_HEADER.pack(rtype, misc, size) + body


def _attr(sample_period: int, config: int) -> bytes:
    return _ATTR.pack(ARM_SPE_PMU_TYPE, ATTR_SIZE, config, sample_period,
                      SAMPLE_TYPE, 0,
                      ATTR_FLAG_DISABLED | ATTR_FLAG_SAMPLE_ID_ALL,
                      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


def perf_data_bytes(trace: Union[bytes, Sequence[bytes]], images: Sequence[PathLike], *,
                    comm: str = DEFAULT_COMM, sample_period: int = 0,
                    config: int = 0, midr: Optional[int] = None) -> bytes:
    """The bytes of a perf.data file holding ``trace`` (raw SPE records of one PE).

    ``trace`` is the bytes, or a sequence of chunks that each start at a record boundary:
    each chunk becomes one AUXTRACE record (perf decodes and ``-D`` dumps each one from its
    start, as it does each AUX buffer handed over by the kernel). Every chunk is padded to
    8 bytes with zeros (SPE Padding packets), as perf record pads AUX data.

    ``images``: the ELF files whose code the trace samples (guest and firmware), mapped at
    their link addresses; ``comm``: the command name perf shows (up to 15 bytes are kept,
    as the kernel's TASK_COMM_LEN); ``sample_period`` (operations) and ``config`` go into the
    attr for tools that print them; ``midr``: the MIDR_EL1 the PE presented (None:
    :data:`EMULATED_MIDR`), which perf reads from HEADER_CPUID to decide how it decodes Data
    Source packets (a Neoverse core preset: the Neoverse levels). Raises ImageError for an
    unreadable or non-AArch64 image.
    """
    chunks = [bytes(trace)] if isinstance(trace, (bytes, bytearray, memoryview)) else \
        [bytes(c) for c in trace]
    maps = [m for path in images for m in image_maps(path)]
    pid = tid = GUEST_PID
    trailer = _SAMPLE_ID.pack(pid, tid, 0, SAMPLE_ID)

    records = [
        # perf time = SPE timestamp (shift 0, mult 1, zero 0); perf's arm_spe code copies the
        # conversion when it reads the auxtrace info, so this record comes first.
        _record(PERF_RECORD_TIME_CONV, 0, _TIME_CONV.pack(0, 1, 0, 0, 0, 1, 0)),
        _record(PERF_RECORD_AUXTRACE_INFO, 0,
                _AUXTRACE_INFO.pack(PERF_AUXTRACE_ARM_SPE, 0)
                + _U64.pack(ARM_SPE_PMU_TYPE) + _U64.pack(0)),   # priv: PMU type, per-cpu mmaps
        _record(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC,
                _COMM.pack(pid, tid) + _cstring(comm.encode()[:15].decode(errors="ignore"),
                                                RECORD_ALIGN) + trailer),
    ]
    for m in maps:
        if m.build_id:
            head = _MMAP2.pack(pid, tid, m.vaddr, m.memsz, m.offset, len(m.build_id), 0, 0,
                               m.build_id.ljust(BUILD_ID_MAX, b"\0"),
                               m.prot, MAP_PRIVATE)
            misc = PERF_RECORD_MISC_USER | PERF_RECORD_MISC_MMAP_BUILD_ID
        else:
            head = _MMAP2_INODE.pack(pid, tid, m.vaddr, m.memsz, m.offset, 0, 0, 0, 0,
                                     m.prot, MAP_PRIVATE)
            misc = PERF_RECORD_MISC_USER
        records.append(_record(PERF_RECORD_MMAP2, misc,
                               head + _cstring(m.path, RECORD_ALIGN) + trailer))
    aux_offset = 0
    for chunk in chunks:
        payload = _pad(chunk, RECORD_ALIGN)
        records.append(_record(PERF_RECORD_AUXTRACE, 0,
                               _AUXTRACE.pack(len(payload), aux_offset, 0, 0, tid, 0, 0))
                       + payload)
        records.append(_record(PERF_RECORD_AUX, 0,
                               _AUX.pack(aux_offset, len(payload), 0) + trailer))
        aux_offset += len(payload)
    records.append(_record(PERF_RECORD_FINISHED_ROUND, 0, b""))
    data = b"".join(records)

    attr = _attr(sample_period, config)
    attrs_off = _FILE_HEADER.size
    ids_off = attrs_off + len(attr) + _SECTION.size
    data_off = ids_off + _U64.size
    file_attr = attr + _SECTION.pack(ids_off, _U64.size)

    features = {
        HEADER_ARCH: _header_string("aarch64"),
        HEADER_NRCPUS: _U32.pack(1) + _U32.pack(1),          # available, online
        HEADER_CPUID: _header_string(f"0x{EMULATED_MIDR if midr is None else midr:016x}"),
        HEADER_EVENT_DESC: (_U32.pack(1) + _U32.pack(ATTR_SIZE) + attr + _U32.pack(1)
                            + _header_string(f"{ARM_SPE_PMU_NAME}//") + _U64.pack(SAMPLE_ID)),
        HEADER_PMU_MAPPINGS: (_U32.pack(1) + _U32.pack(ARM_SPE_PMU_TYPE)
                              + _header_string(ARM_SPE_PMU_NAME)),
        # One PE, one core, one socket, one NUMA node (perf c2c sets its nodes up from
        # these: "Failed setup nodes" without them). CPU_TOPOLOGY: core siblings, thread
        # siblings (counted lists of CPU-list strings), then core_id, socket_id per CPU.
        HEADER_CPU_TOPOLOGY: (_U32.pack(1) + _header_string("0") + _U32.pack(1)
                              + _header_string("0") + _U32.pack(0) + _U32.pack(0)),
        # NUMA_TOPOLOGY: node count, then per node its id, memory total and free (KiB) and
        # CPU list
        HEADER_NUMA_TOPOLOGY: (_U32.pack(1) + _U32.pack(0) + _U64.pack(NUMA_MEM_KIB)
                               + _U64.pack(NUMA_MEM_KIB) + _header_string("0")),
    }
    with_ids = {}
    for m in maps:
        if m.build_id:
            with_ids.setdefault(m.path, m.build_id)
    if with_ids:
        features[HEADER_BUILD_ID] = b"".join(_build_id_event(p, b) for p, b in with_ids.items())

    bits = sorted(features)
    table_off = data_off + len(data)
    feat_off = table_off + _SECTION.size * len(bits)
    table, blobs = [], []
    for bit in bits:
        table.append(_SECTION.pack(feat_off, len(features[bit])))
        blobs.append(features[bit])
        feat_off += len(features[bit])
    bitmap = 0
    for bit in bits:
        bitmap |= 1 << bit
    words = [(bitmap >> (64 * i)) & ((1 << 64) - 1) for i in range(FEATURE_BITS // 64)]
    header = _FILE_HEADER.pack(PERF_MAGIC, _FILE_HEADER.size, len(file_attr),
                               attrs_off, len(file_attr), data_off, len(data), 0, 0, *words)
    return b"".join([header, file_attr, _U64.pack(SAMPLE_ID), data, *table, *blobs])


def _build_id_event(path: str, build_id: bytes) -> bytes:
    """A ``perf_record_header_build_id`` entry of HEADER_BUILD_ID (name padded to 64)."""
    name = _cstring(path, NAME_ALIGN)
    body = _BUILD_ID_EVENT.pack(-1, build_id.ljust(BUILD_ID_MAX, b"\0"), len(build_id), 0, 0)
    # (36 bytes of fixed fields: these entries are not 8-byte multiples)
    return _record(0, PERF_RECORD_MISC_USER | PERF_RECORD_MISC_BUILD_ID_SIZE, body + name,
                   align=1)


def write_perf_data(path: PathLike, trace: bytes, images: Sequence[PathLike], *,
                    comm: Optional[str] = None, sample_period: int = 0,
                    config: int = 0, midr: Optional[int] = None) -> Path:
    """Write :func:`perf_data_bytes` to ``path``; ``comm`` defaults to the first image's file
    name without its extension. Returns the path. Raises ImageError (bad image) or
    OSError (cannot write)."""
    if comm is None:
        comm = Path(images[0]).stem if images else DEFAULT_COMM
    out = Path(path)
    out.write_bytes(perf_data_bytes(trace, images, comm=comm, sample_period=sample_period,
                                    config=config, midr=midr))
    return out
