"""Profile report of an SPE trace against the ELF image it was taken from.

:func:`build_report` decodes the records (:func:`spe_emu.spe.packets.iter_records`), maps each
sampled PC to the enclosing function symbol of the image (pyelftools) and disassembles the
hottest PCs (capstone); :func:`render_report` prints the result as rich tables.
"""

from __future__ import annotations

import bisect
import io
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional, Union

from ..arch import INSN_BYTES
from ..errors import ConfigError, ImageError, SpeEmuError
from ..platform.inputs import read_input
from ..platform.loader import MAX_IMAGE_BYTES, load_elf
from ..spe.packets import (
    BRANCH_COND, EV_L1D_ACCESS, EV_L1D_REFILL, EV_LLC_ACCESS, EV_LLC_MISS, EV_MISPRED,
    EV_TLB_ACCESS, EV_TLB_WALK, LDST_ST, OP_CLASS_BRANCH, OP_CLASS_LDST, OP_CLASS_OTHER,
    OTHER_COND, BadPacket, PacketIncomplete, branch_is_indirect, iter_packets, iter_records,
    ldst_is_extended, ldst_is_simd_fp, data_source_name, DATA_SOURCE_NAMES,
)

UNKNOWN_SYMBOL = "[unknown]"
SHF_EXECINSTR = 0x4


class _Image:
    """Symbols and loadable bytes of an AArch64 ELF image."""

    def __init__(self, path: Union[str, os.PathLike]):
        from elftools.common.exceptions import ELFError
        from elftools.construct import ConstructError
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import SymbolTableSection

        self.path = os.fspath(path)
        # the same validation as ``run`` (a bad file is one ImageError line), then its bytes
        # (load_elf checks EM_AARCH64 and gives the PT_LOAD segments' file bytes)
        raw = read_input(self.path, MAX_IMAGE_BYTES, "an image")
        self.segments = [(seg.vaddr, seg.data) for seg in load_elf(self.path).segments]
        try:
            elf = ELFFile(io.BytesIO(raw))
            sections = list(elf.iter_sections())
            exec_index = {i for i, s in enumerate(sections)
                          if s["sh_flags"] & SHF_EXECINSTR and s["sh_size"]}
            exec_ranges = [(sections[i]["sh_addr"],
                            sections[i]["sh_addr"] + sections[i]["sh_size"])
                           for i in exec_index]
            funcs, labels, objects = [], [], []
            for sec in sections:
                if not isinstance(sec, SymbolTableSection):
                    continue
                for sym in sec.iter_symbols():
                    kind = sym["st_info"]["type"]
                    if kind == "STT_OBJECT" and sym.name and sym["st_size"]:
                        objects.append((sym["st_value"], sym["st_size"], sym.name))
                        continue
                    # only symbols defined in an executable section (no ABS/UNDEF/data)
                    if sym["st_shndx"] not in exec_index or not sym.name:
                        continue
                    if kind == "STT_FUNC":
                        funcs.append((sym["st_value"], sym["st_size"], sym.name))
                    elif kind == "STT_NOTYPE" and not sym.name.startswith("$"):
                        labels.append((sym["st_value"], sym.name))  # not mapping symbols
        except OSError as err:
            raise ImageError(f"{self.path}: cannot read image: {err.strerror or err}") from err
        except (ELFError, ConstructError, ValueError, KeyError, IndexError, EOFError,
                OverflowError) as err:
            raise ImageError(f"{self.path}: not a valid ELF file: {err}") from err
        self.exec_ranges = sorted(exec_ranges)
        self.objects = sorted(objects)   # (data symbols: start, size, name)
        self.object_starts = [v for v, _, _ in self.objects]
        # Sized functions win; a function of size 0 and a plain label (assembly without
        # .type/.size) extend to the next symbol, within the same executable section.
        self.funcs = sorted(funcs)
        starts = sorted({v for v, _, _ in funcs} | {v for v, _ in labels})
        self.starts = starts
        names: dict[int, str] = {}
        for value, name in labels:
            names.setdefault(value, name)
        for value, _size, name in funcs:  # a FUNC name beats a label at the same address
            names[value] = name
        self.names = names
        self.func_starts = [v for v, _, _ in self.funcs]
        self._raw = raw
        self._lines: Optional[tuple[list[int], list[tuple[str, int]]]] = None

    def data_object(self, va: int) -> Optional[tuple[int, int, str]]:
        """(start, size, name) of the data object (STT_OBJECT symbol) holding ``va``; None
        outside every one."""
        i = bisect.bisect_right(self.object_starts, va) - 1
        if i >= 0 and va < self.objects[i][0] + self.objects[i][1]:
            return self.objects[i]
        return None

    def data_symbol(self, va: int) -> Optional[tuple[str, int]]:
        """The data object (STT_OBJECT symbol) holding ``va`` and the offset in it, as
        ``perf mem`` names data addresses (``values+0x1638``); None outside every one."""
        obj = self.data_object(va)
        return None if obj is None else (obj[2], va - obj[0])

    def text_contains(self, pc: int) -> bool:
        """``pc`` is inside one of the image's executable sections."""
        return self._exec_range(pc) is not None

    def function_range(self, name: str) -> Optional[tuple[int, int]]:
        """[start, end) of the function (or label) ``name``; None when there is none."""
        for value, size, fname in self.funcs:
            if fname == name and size:
                return value, value + size
        for i, start in enumerate(self.starts):
            if self.names.get(start) == name:
                rng = self._exec_range(start)
                end = self.starts[i + 1] if i + 1 < len(self.starts) else (rng or (0, start))[1]
                return start, min(end, rng[1]) if rng else end
        return None

    def line_of(self, pc: int) -> Optional[tuple[str, int]]:
        """(source file, line) of ``pc`` from the DWARF line table (.debug_line), or None when
        the image has no line information for it."""
        if self._lines is None:
            self._lines = _line_table(self._raw)
        addrs, rows = self._lines
        i = bisect.bisect_right(addrs, pc) - 1
        if i < 0 or rows[i] is None:
            return None
        return rows[i]


    def _exec_range(self, pc: int) -> Optional[tuple[int, int]]:
        for lo, hi in self.exec_ranges:
            if lo <= pc < hi:
                return lo, hi
        return None

    def symbolize(self, pc: int) -> tuple[str, int]:
        """(symbol name, offset of ``pc`` from it), or (``[unknown]``, pc)."""
        i = bisect.bisect_right(self.func_starts, pc) - 1
        while i >= 0:
            value, size, name = self.funcs[i]
            if size and value <= pc < value + size:
                return name, pc - value
            i -= 1
        rng = self._exec_range(pc)
        j = bisect.bisect_right(self.starts, pc) - 1
        if rng is not None and j >= 0 and self.starts[j] >= rng[0]:
            start = self.starts[j]
            return self.names[start], pc - start
        return UNKNOWN_SYMBOL, pc

    def read(self, addr: int, size: int) -> Optional[bytes]:
        for vaddr, data in self.segments:
            if vaddr <= addr and addr + size <= vaddr + len(data):
                return data[addr - vaddr:addr - vaddr + size]
        return None


def _display_path(path: str) -> str:
    """``path`` relative to the working directory when it is below it, else as is."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _line_table(raw: bytes) -> tuple[list[int], list]:
    """Sorted row addresses of every DWARF line program of an ELF, and per row its
    (file path, line) or None for an end_sequence (an address range with no line)."""
    from elftools.elf.elffile import ELFFile

    rows: dict[int, Optional[tuple[str, int]]] = {}
    try:
        elf = ELFFile(io.BytesIO(raw))
        if not elf.has_dwarf_info():
            return [], []
        dwarf = elf.get_dwarf_info()
        for cu in dwarf.iter_CUs():
            prog = dwarf.line_program_for_CU(cu)
            if prog is None:
                continue
            header = prog.header
            files = header["file_entry"]
            dirs = header["include_directory"]
            version = header["version"]
            top = cu.get_top_DIE().attributes.get("DW_AT_comp_dir")
            comp_dir = (top.value.decode(errors="replace") if top is not None
                        and isinstance(top.value, bytes) else
                        dirs[0].decode(errors="replace") if version >= 5 and dirs else "")
            for entry in prog.get_entries():
                st = entry.state
                if st is None:
                    continue
                if st.end_sequence:
                    rows.setdefault(st.address, None)
                    continue
                index = st.file if version >= 5 else st.file - 1
                if not 0 <= index < len(files):
                    continue
                fe = files[index]
                name = fe.name.decode(errors="replace")
                d = b""
                if version >= 5 and 0 < fe.dir_index < len(dirs):
                    d = dirs[fe.dir_index]
                elif version < 5 and 0 < fe.dir_index <= len(dirs):
                    d = dirs[fe.dir_index - 1]
                if d and not os.path.isabs(name):
                    name = os.path.join(d.decode(errors="replace"), name)
                if not os.path.isabs(name) and comp_dir:
                    name = os.path.join(comp_dir, name)
                name = os.path.normpath(name)
                rows[st.address] = (name, st.line)
    except Exception:  # a malformed .debug_line: report without source lines
        return [], []
    addrs = sorted(rows)
    return addrs, [rows[a] for a in addrs]


GROUND_TRUTH_NAME = "ground_truth.json"   # (spe_emu.session writes it)
CACHE_LINE = 64          # bytes: the false-sharing view groups data addresses by this
PAGE = 4096              # bytes: the PA page view
PERCENTILES = (50, 90, 99)
LATENCIES = (("TOT", "latency_total"), ("ISSUE", "latency_issue"), ("XLAT", "latency_xlat"))
# Events packet bits (Arm SPE §5.3.7): (rate name, the event counted, the event it is a
# share of, or None: a share of the group's load/store samples)
RATES = (("l1d_refill", EV_L1D_REFILL, EV_L1D_ACCESS), ("llc_miss", EV_LLC_MISS, EV_LLC_ACCESS),
         ("tlb_refill", EV_TLB_WALK, EV_TLB_ACCESS), ("mispredict", EV_MISPRED, None))
# the Events bits a group counts: every one a rate of RATES reads
EVENT_BITS = tuple(sorted({bit for _, ev, of in RATES for bit in (ev, of) if bit is not None}))

# Operation mix: every record has exactly one leaf; a row's count is the sum of its children.
OP_TREE = (
    ("load/store", (("load", ("load gp", "load simd-fp", "load extended")),
                    ("store", ("store gp", "store simd-fp", "store extended")))),
    ("branch", (("direct unconditional", ()), ("direct conditional", ()),
                ("indirect", ()))),
    ("other", (("other instruction", ()), ("conditional select", ()))),
    ("no operation type", ()),
    ("reserved class", ()),
)


def _op_leaf(op_class: Optional[int], sub: Optional[int]) -> str:
    """The one leaf of :data:`OP_TREE` a record counts towards (Operation Type packet,
    Arm SPE §5.3.8)."""
    if op_class is None:
        return "no operation type"
    if op_class == OP_CLASS_LDST:
        kind = "store" if sub & LDST_ST else "load"
        if ldst_is_simd_fp(sub):
            return f"{kind} simd-fp"
        return f"{kind} extended" if ldst_is_extended(sub) else f"{kind} gp"
    if op_class == OP_CLASS_BRANCH:
        if branch_is_indirect(sub):
            return "indirect"
        return "direct conditional" if sub & BRANCH_COND else "direct unconditional"
    if op_class == OP_CLASS_OTHER:
        # (perf's INSN-OTHER and COND-SELECT: SUBCLASS COND says a conditional instruction)
        return "conditional select" if sub & OTHER_COND else "other instruction"
    return "reserved class"


def _op_mix(leaves: Counter, total: int) -> list[tuple[int, str, int, float]]:
    """(depth, kind, samples, percent of all records) rows of :data:`OP_TREE`, parents
    before their children, zero rows left out; each depth's rows add up to their parent."""
    rows = []

    def walk(nodes, depth):
        out = 0
        for name, children in nodes:
            if children:
                rows_before = len(rows)
                rows.append(None)
                count = walk(tuple((c, ()) if isinstance(c, str) else c for c in children),
                             depth + 1)
                if count:
                    rows[rows_before] = (depth, name, count, _percent(count, total))
                else:
                    del rows[rows_before:]
            else:
                count = leaves.get(name, 0)
                if count:
                    rows.append((depth, name, count, _percent(count, total)))
            out += count
        return out

    walk(OP_TREE, 0)
    return rows


STORE_LEVEL = "store"
EVENT_LEVELS = ("L1D hit", "L1D miss, LLC hit", "LLC miss")


def served_by(store: bool, data_source: Optional[int], events: int) -> str:
    """The level that served a load, as the latency histograms split them: the Data Source
    packet's level name (:func:`~spe_emu.spe.packets.data_source_name`) when the record has
    one, else from its Events (:data:`EVENT_LEVELS`: no L1D refill, an L1D refill, an LLC
    miss); :data:`STORE_LEVEL` for a store."""
    if store:
        return STORE_LEVEL
    if data_source is not None:
        return data_source_name(data_source)
    if events >> EV_LLC_MISS & 1:
        return EVENT_LEVELS[2]
    return EVENT_LEVELS[1] if events >> EV_L1D_REFILL & 1 else EVENT_LEVELS[0]


# the order levels are listed and stacked in: nearest first (the Data Source names, then
# the levels the Events give), a Data Source value without a name after them, stores last
LEVEL_ORDER = (*DATA_SOURCE_NAMES.values(), *EVENT_LEVELS)


def level_key(level: str) -> tuple:
    """Sort key of a :func:`served_by` level: :data:`LEVEL_ORDER`, then unnamed Data
    Source values, then :data:`STORE_LEVEL`."""
    if level == STORE_LEVEL:
        return (2, 0, level)
    return (0, LEVEL_ORDER.index(level), level) if level in LEVEL_ORDER else (1, 0, level)


LEVELS_FROM_DATA_SOURCE, LEVELS_FROM_EVENTS, LEVELS_FROM_BOTH = "data source", "events", "both"


def _load_levels(latency_levels: dict[str, dict[str, list[int]]],
                 ) -> tuple[list[tuple[str, int, float, dict]], Optional[str]]:
    """The sampled loads (with a TOT counter) of every function by the level that served
    them (:func:`served_by`): ``(level, loads, percent of loads, TOT latency: mean, ci95,
    p50, p90, p99, max in cycles)`` in :func:`level_key` order, and where the levels came
    from: :data:`LEVELS_FROM_DATA_SOURCE`, :data:`LEVELS_FROM_EVENTS`,
    :data:`LEVELS_FROM_BOTH` (None without loads)."""
    merged: dict[str, list[int]] = {}
    for per in latency_levels.values():
        for level, values in per.items():
            if level != STORE_LEVEL:
                merged.setdefault(level, []).extend(values)
    total = sum(map(len, merged.values()))
    rows = []
    for level in sorted(merged, key=level_key):
        values = sorted(merged[level])
        n = len(values)
        rows.append((level, n, _percent(n, total), {
            "mean": sum(values) / n, "ci95": _mean_interval(values), "max": values[-1],
            **{f"p{q}": _pctl(values, q) for q in PERCENTILES}}))
    derived = {level in EVENT_LEVELS for level in merged}
    source = (None if not derived else LEVELS_FROM_BOTH if len(derived) == 2 else
              LEVELS_FROM_EVENTS if True in derived else LEVELS_FROM_DATA_SOURCE)
    return rows, source


def _percent(count: int, total: int) -> float:
    return 100.0 * count / total if total else 0.0


CONFIDENCE_Z = 1.959964   # the standard normal quantile of a two-sided 95% interval


def _wilson(count: int, n: int, z: float = CONFIDENCE_Z) -> tuple[float, float]:
    """The Wilson score interval (percent) of a rate of ``count`` in ``n`` samples: where the
    true rate of the population the samples were drawn from lies with 95% confidence
    (Wilson 1927; it stays inside 0..100 and holds for rates near 0 or 100, where the normal
    approximation does not)."""
    if not n:
        return 0.0, 100.0
    count = min(count, n)   # (a malformed trace may set an event without the one it refines)
    p = count / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # (exactly 0 and 100 at the ends, where rounding leaves a trace)
    lo = 0.0 if count == 0 else 100.0 * max(0.0, centre - half)
    hi = 100.0 if count == n else 100.0 * min(1.0, centre + half)
    return lo, hi


def _mean_interval(values: list[int], z: float = CONFIDENCE_Z) -> float:
    """Half the width of the 95% confidence interval of the mean of ``values`` (cycles;
    normal approximation, the sample standard deviation; 0 for fewer than two values)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return z * math.sqrt(var / n)


def _pctl(values: list[int], q: float) -> float:
    """The q-th percentile of sorted ``values`` (nearest rank)."""
    if not values:
        return 0.0
    k = max(0, min(len(values) - 1, -(-len(values) * q // 100) - 1))
    return float(values[int(k)])


class _Group:
    """Accumulates the records of one function, source line, data address, ..."""

    __slots__ = ("samples", "ldst", "loads", "stores", "branches", "lat", "events", "sources",
                 "offsets", "funcs")

    def __init__(self):
        self.samples = self.ldst = self.loads = self.stores = self.branches = 0
        self.lat = {name: [] for name, _ in LATENCIES}
        # (plain dicts: a Counter's constructor is Python code, and a report makes a group
        # per sampled data address and cache line)
        self.events: dict[int, int] = {}
        self.sources: dict[int, int] = {}
        self.offsets: set = set()
        self.funcs: set = set()

    def add(self, rec, func: str = "") -> None:
        self.samples += 1
        if rec.op_class == OP_CLASS_LDST:
            self.ldst += 1
            if rec.op_subclass & LDST_ST:
                self.stores += 1
            else:
                self.loads += 1
            for name, attr in LATENCIES:
                v = getattr(rec, attr)
                if v is not None:
                    self.lat[name].append(v)
        elif rec.op_class == OP_CLASS_BRANCH:
            self.branches += 1
        ev = rec.events
        if ev:
            events = self.events
            for bit in EVENT_BITS:
                if ev >> bit & 1:
                    events[bit] = events.get(bit, 0) + 1
        if rec.data_source is not None:
            self.sources[rec.data_source] = self.sources.get(rec.data_source, 0) + 1
        if func:
            self.funcs.add(func)

    def summary(self, total: int) -> dict:
        """:func:`_summary` of the group."""
        for values in self.lat.values():
            values.sort()
        return _summary(self.samples, self.loads, self.stores, self.branches, self.ldst,
                        self.lat, self.events, self.sources, total)


def _summary(samples: int, loads: int, stores: int, branches: int, ldst: int,
             lat: dict, events: dict, sources: dict, total: int) -> dict:
    """Samples, percent of ``total``, load/store counts, latency statistics (cycles: mean,
    percentiles, max; per counter TOT/ISSUE/XLAT, from ``lat``: name -> the group's values
    sorted ascending), event rates (percent; ``events``: Events bit -> records with it) and
    data sources (``sources``: payload -> records) of one group of records."""
    out_lat = {}
    for name, values in lat.items():
        n = len(values)
        if n:
            out_lat[name] = {"mean": int(sum(values)) / n, "max": int(values[-1]),
                             "ci95": _mean_interval(values),
                             **{f"p{q}": _pctl(values, q) for q in PERCENTILES}}
    rates, intervals = {}, {}
    for name, ev, of in RATES:
        den = events.get(of, 0) if of is not None else branches
        if of is not None and not den:
            den = ldst   # (an SPU that does not report the access event)
        if den:
            rates[name] = _percent(events.get(ev, 0), den)
            intervals[name] = _wilson(events.get(ev, 0), den)
    return {"samples": samples, "percent": _percent(samples, total),
            "loads": loads, "stores": stores, "branches": branches,
            "latency": out_lat, "rates": rates, "rates_ci95": intervals,
            "data_source": {f"{k:#x}": v for k, v in sorted(sources.items())}}


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by an ellipsis in its middle (a ``+0x..`` offset
    at its end is always kept whole)."""
    if len(text) <= width:
        return text
    name, plus, off = text.rpartition("+0x")
    tail = plus + off if plus else ""
    if not plus:
        name = text
    room = width - len(tail) - 1
    if room < 2:
        return text[:width - 1] + "…"
    left = (room + 1) // 2
    return name[:left] + "…" + name[len(name) - (room - left):] + tail


def _disassembler():
    import capstone

    arch = getattr(capstone, "CS_ARCH_ARM64", None)
    if arch is None:  # capstone 6 renamed the architecture
        arch = capstone.CS_ARCH_AARCH64
    return capstone.Cs(arch, capstone.CS_MODE_ARM)


def _disassemble(md, image: Optional[_Image], pc: int) -> str:
    if image is None:
        return ""
    code = image.read(pc, INSN_BYTES)
    if code is None:
        return ""
    for insn in md.disasm(code, pc):
        return f"{insn.mnemonic} {insn.op_str}".strip()
    return f".inst 0x{int.from_bytes(code, 'little'):08x}"


_BRANCHES = ("b", "bl", "br", "blr", "ret", "cbz", "cbnz", "tbz", "tbnz", "eret", "braa",
             "brab", "blraa", "blrab", "retaa", "retab", "braaz", "brabz", "blraaz", "blrabz")
_LDST_PREFIXES = ("ld", "st", "cas", "swp", "prfm", "prfum")


def insn_class(text: str) -> str:
    """The operation class (``load/store``, ``branch``, ``other``) of a disassembled
    instruction, as SPE's Operation Type packet would give it (§5.3.8)."""
    mnem = text.split(" ", 1)[0]
    if mnem in _BRANCHES or mnem.startswith("b."):
        return "branch"
    if mnem.startswith(_LDST_PREFIXES):
        return "load/store"
    return "other"


def _tvd(est: dict, exact: dict) -> float:
    """Total variation distance (percent points) between two share tables (percent)."""
    return 0.5 * sum(abs(est.get(k, 0.0) - exact.get(k, 0.0)) for k in set(est) | set(exact))


@dataclass
class Report:
    """What :func:`build_report` found (every percentage is of ``total_records`` unless said).

    Fields:
        total_records: complete records in the trace.
        hot_functions: ``(name, samples, percent)``, most sampled first (``[unknown]`` collects
            PCs outside every symbol).
        hot_pcs: ``(pc, "symbol+0xoff", disassembly, samples, percent)`` for the ``max_pcs``
            most sampled PCs; disassembly is ``""`` when the PC is not in the image.
        functions: per function name, :meth:`_Group.summary` (samples, latency TOT/ISSUE/XLAT
            mean and percentiles in cycles, event rates in percent, data sources).
        lines: ``("file:line", function, summary)`` per source line with samples (DWARF line
            table; empty without it), most sampled first.
        op_mix: ``(depth, kind, samples, percent)`` rows of the operation hierarchy
            (:data:`OP_TREE`); the depth-0 rows add up to 100 %, every parent to its
            children.
        el_mix: samples per Exception level of the PC (``EL0`` .. ``EL3``, ``no-pc``).
        data_addresses: ``(va, samples, loads, stores, mean TOT latency or None, function)``
            of the most sampled data virtual addresses.
        cache_lines: per ``CACHE_LINE``-byte line ``(line va, samples, loads, stores,
            distinct offsets, functions, mean TOT or None)``, most sampled first (the
            false-sharing view: several offsets written by several functions).
        pages: ``(page pa, samples, percent)`` of the hottest ``PAGE``-byte physical pages
            (empty when the trace has no PA packets).
        timeline: ``(timestamp, pc)`` of every record with both (virtual time in ticks).
        latencies: per function, the TOT latencies (cycles) of its loads/stores.
        latency_levels: per function, per level that served the access (:func:`served_by`),
            the TOT latencies (cycles) of its loads/stores, ascending.
        pc_functions: the function of every sampled PC (what ``timeline`` is drawn by).
        data_vas: every sampled data virtual address (for the heat map).
        ground_truth: with a ground-truth file: ``functions`` and ``op_classes`` rows
            ``(name, estimated %, exact %, error in points)``, and ``error_functions`` /
            ``error_pcs`` (total variation distance between the sampled and the exact
            distribution, in percent points), ``instructions``, ``samples``; else None.
        bad_packets: bad headers met in the trace.
        image_path: the image used (None when built without one).
    """

    total_records: int
    hot_functions: list[tuple[str, int, float]] = field(default_factory=list)
    hot_pcs: list[tuple[int, str, str, int, float]] = field(default_factory=list)
    functions: dict[str, dict] = field(default_factory=dict)
    lines: list[tuple[str, str, dict]] = field(default_factory=list)
    op_mix: list[tuple[int, str, int, float]] = field(default_factory=list)
    el_mix: dict[str, int] = field(default_factory=dict)
    data_addresses: list[tuple] = field(default_factory=list)
    cache_lines: list[tuple] = field(default_factory=list)
    pages: list[tuple[int, int, float]] = field(default_factory=list)
    timeline: list[tuple[int, int]] = field(default_factory=list)
    latencies: dict[str, list[int]] = field(default_factory=dict)
    latency_levels: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    pc_functions: dict[int, str] = field(default_factory=dict)
    pc_summaries: dict[int, dict] = field(default_factory=dict)
    """Per PC of ``hot_pcs``, :meth:`_Group.summary` of its records (samples, load/store
    latency in cycles, event rates in percent with their 95% intervals)."""
    data_vas: list[int] = field(default_factory=list)
    data_symbols: dict[int, str] = field(default_factory=dict)
    """Of the hot data addresses, the data object each lies in (``name+0xoff``, perf mem's
    symbol_daddr; from the image's STT_OBJECT symbols)."""
    data_objects: list[tuple[str, int, float]] = field(default_factory=list)
    """``(data object, samples, percent of the samples with a data address)``, most sampled
    first (``[unknown]``: outside every data symbol)."""
    data_object_spans: list[tuple[int, int, str]] = field(default_factory=list)
    """``(start, size, name)`` of the data objects with samples, by address (the heat map
    marks them)."""
    load_levels: list[tuple[str, int, float, dict]] = field(default_factory=list)
    """The sampled loads by the level that served them: ``(level, loads, percent of loads,
    TOT latency in cycles: mean, ci95, p50, p90, p99, max)``, nearest level first
    (:func:`served_by`: the Data Source packet's level, else the level the Events give)."""
    load_levels_from: Optional[str] = None
    """Where ``load_levels`` came from: ``"data source"`` (Data Source packets),
    ``"events"`` (none: PMSIDR_EL1.LDS = 0, levels from the L1D refill and LLC miss
    events) or ``"both"``; None without loads."""
    model_config: Optional[dict] = None
    """The run's model parameters (summary.json ``model_config``), when known: the report
    states them first (:func:`describe_model`)."""
    ground_truth: Optional[dict] = None
    event_truth: Optional[dict] = None
    bad_packets: int = 0
    image_path: Optional[str] = None

    def to_json(self) -> dict:
        """Everything as JSON-ready data (addresses as ``0x`` strings)."""
        h = lambda v: None if v is None else f"{v:#x}"
        return {
            "image": self.image_path, "total_records": self.total_records,
            "bad_packets": self.bad_packets,
            "functions": [dict(name=n, **self.functions[n]) for n, _, _ in self.hot_functions],
            "pcs": [{"pc": h(pc), "location": w, "instruction": d,
                     **self.pc_summaries.get(pc, {}), "samples": c, "percent": p}
                    for pc, w, d, c, p in self.hot_pcs],
            "lines": [dict(line=ln, function=f, **s) for ln, f, s in self.lines],
            "op_mix": [{"depth": d, "kind": k, "samples": c, "percent": p}
                       for d, k, c, p in self.op_mix],
            "el_mix": self.el_mix,
            "data_addresses": [{"va": h(a), "samples": c, "loads": lo, "stores": st,
                                "mean_latency": m, "function": f,
                                "symbol": self.data_symbols.get(a)}
                               for a, c, lo, st, m, f in self.data_addresses],
            "data_objects": [{"object": n, "samples": c, "percent": p}
                             for n, c, p in self.data_objects],
            "cache_lines": [{"line": h(a), "samples": c, "loads": lo, "stores": st,
                             "offsets": o, "functions": fs, "mean_latency": m}
                            for a, c, lo, st, o, fs, m in self.cache_lines],
            "pages": [{"pa": h(a), "samples": c, "percent": p} for a, c, p in self.pages],
            "load_levels": [{"level": lv, "loads": n, "percent": p, "latency": lat}
                            for lv, n, p, lat in self.load_levels],
            "load_levels_from": self.load_levels_from,
            "ground_truth": self.ground_truth, "event_truth": self.event_truth,
        }


MAX_GROUND_TRUTH_BYTES = 1 << 30
"""Largest ``ground_truth.json`` read (bytes)."""
MAX_SOURCE_BYTES = 64 << 20
"""Largest source file ``--annotate`` shows lines of (bytes; a larger one is left out)."""


def _read_ground_truth(path: Union[str, os.PathLike]) -> bytes:
    return read_input(path, MAX_GROUND_TRUTH_BYTES, "a ground-truth file")


def load_ground_truth(path: Union[str, os.PathLike]) -> dict[int, int]:
    """``{pc: executions}`` from a ``ground_truth.json`` (``spe-emu run --ground-truth``).
    Raises ImageError naming the file when it is unreadable or malformed (or not a regular
    file, or larger than :data:`MAX_GROUND_TRUTH_BYTES`: spe_emu.platform.inputs)."""
    import json

    raw = _read_ground_truth(path)
    try:
        data = json.loads(raw)
        return {int(pc, 16): int(n) for pc, n in data["pcs"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ImageError(f"{path}: not a ground-truth file: {err}") from err


ENGINES = ("auto", "vectorised", "reference")
"""How :func:`build_report` aggregates: ``vectorised`` (the native bulk decoder's rows as
numpy arrays, :func:`spe_emu.tools.bulkdecode.scan_array`, grouped with numpy),
``reference`` (packets.iter_records and one Python step per record), ``auto`` (vectorised,
or reference where the native library cannot be loaded). Both give the same Report."""


def load_ground_truth_events(path: Union[str, os.PathLike]) -> dict[int, dict[str, int]]:
    """``{pc: {count name: value}}`` from a ``ground_truth.json``'s ``events`` (what the
    model gave every execution of each instruction: ``spe_emu.native.GT_EVENTS``; empty when
    the run had no such record, model_feed "sampled"). Raises ImageError naming the file when
    it is unreadable or malformed (as :func:`load_ground_truth`)."""
    import json

    raw = _read_ground_truth(path)
    try:
        data = json.loads(raw).get("events") or {}
        names = data.get("names", [])
        return {int(pc, 16): dict(zip(names, map(int, n)))
                for pc, n in data.get("pcs", {}).items()}
    except (OSError, ValueError, TypeError, AttributeError) as err:
        raise ImageError(f"{path}: not a ground-truth file: {err}") from err


RATE_TITLES = {"l1d_refill": "L1D miss", "llc_miss": "LLC miss", "tlb_refill": "TLB miss",
               "mispredict": "mispredicted"}
# The event rates of RATES as the model's exact counts per PC give them: (numerator,
# denominator) of native.GT_EVENTS
EXACT_RATES = {"l1d_refill": ("l1d_refill", "ops"), "llc_miss": ("llc_miss", "llc_access"),
               "tlb_refill": ("tlb_walk", "ops"), "mispredict": ("mispredicted", "branches")}


def _compare_events(rep: Report, events: dict[int, dict[str, int]],
                    image: Optional[_Image]) -> dict:
    """Per sampled function, each event rate SPE estimates (percent, with its 95% confidence
    interval) beside the exact rate of the model over every execution of the function's
    instructions (``events``: :func:`load_ground_truth_events`), and whether the exact rate
    lies in the interval."""
    name = (lambda pc: image.symbolize(pc)[0]) if image is not None else (
        lambda pc: UNKNOWN_SYMBOL)
    sums: dict[str, dict[str, int]] = {}
    for pc, counts in events.items():
        acc = sums.setdefault(name(pc), {})
        for key, value in counts.items():
            acc[key] = acc.get(key, 0) + value
    out = []
    for func, _, _ in rep.hot_functions:
        s, exact = rep.functions[func], sums.get(func, {})
        for rate, (num, den) in EXACT_RATES.items():
            if rate not in s["rates"] or not exact.get(den):
                continue
            lo, hi = s["rates_ci95"][rate]
            value = _percent(exact.get(num, 0), exact[den])
            out.append((func, rate, s["rates"][rate], lo, hi, value, lo <= value <= hi))
    return {"rates": out}


def build_report(trace: bytes, image_path: Optional[Union[str, os.PathLike]],
                 *, max_pcs: int = 100, ground_truth: Optional[dict[int, int]] = None,
                 check_image: bool = False, engine: str = "auto",
                 ground_truth_events: Optional[dict[int, dict[str, int]]] = None) -> Report:
    """Analyse ``trace`` (raw Profiling Buffer bytes, Arm SPE §5) against the ELF at
    ``image_path`` (None: addresses only, every PC ``[unknown]``); ``ground_truth``
    (``{pc: executions}``) adds the estimated-against-exact tables, ``ground_truth_events``
    (:func:`load_ground_truth_events`) SPE's estimated event rates against the model's exact
    ones (``Report.event_truth``); ``engine`` one of :data:`ENGINES`.

    Raises:
        ImageError: (message starting with the path) the image is missing, unreadable, not an
            ELF or not AArch64; or, with ``check_image``, no sampled PC lies in its
            executable sections (not the image of this trace).
        ConfigError: an unknown ``engine``; NativeBuildError: ``engine="vectorised"`` and
            the native library cannot be loaded.
    """
    if engine not in ENGINES:
        raise ConfigError(f"report engine {engine!r}: use one of {', '.join(ENGINES)}")
    image = _Image(image_path) if image_path is not None else None
    rep = _build(bytes(trace), image, max_pcs, ground_truth, check_image, engine)
    rep.load_levels, rep.load_levels_from = _load_levels(rep.latency_levels)
    if image is not None and image.objects:
        for a, *_ in rep.data_addresses:
            hit = image.data_symbol(a)
            if hit is not None:
                rep.data_symbols[a] = f"{hit[0]}+{hit[1]:#x}"
        found = Counter(map(image.data_object, rep.data_vas))
        rep.data_object_spans = sorted(o for o in found if o is not None)
        objects = Counter()
        for obj, n in found.items():
            objects[UNKNOWN_SYMBOL if obj is None else obj[2]] += n
        rep.data_objects = [(name, n, _percent(n, len(rep.data_vas)))
                            for name, n in sorted(objects.items(), key=lambda kv: -kv[1])]
    if ground_truth_events:
        rep.event_truth = _compare_events(rep, ground_truth_events, image)
    return rep


def _build(trace: bytes, image: Optional[_Image], max_pcs: int,
           ground_truth: Optional[dict[int, int]], check_image: bool, engine: str) -> Report:
    if engine != "reference":
        from ..native import NativeBuildError
        try:
            from .bulkdecode import scan_array
            rows, bad = scan_array(trace)
        except (ImportError, NativeBuildError):
            if engine == "vectorised":
                raise
        else:
            return _build_vectorised(rows, bad, image, max_pcs, ground_truth, check_image)
    records = list(iter_records(trace))
    bad = sum(1 for _, item in iter_packets(trace)
              if isinstance(item, (BadPacket, PacketIncomplete)))
    total = len(records)
    pcs: Counter[int] = Counter()
    leaves: Counter[str] = Counter()
    els: Counter[str] = Counter()
    for rec in records:
        if rec.pc is not None:
            pcs[rec.pc] += 1
            els[f"EL{rec.el}"] += 1
        else:
            els["no-pc"] += 1
        leaves[_op_leaf(rec.op_class, rec.op_subclass)] += 1

    md = _disassembler()
    if check_image and image is not None:
        _check_match(image, md, records)
    sym: dict[int, str] = {}
    where: dict[int, str] = {}
    for pc in pcs:
        sym[pc], where[pc] = _where(image, pc)

    funcs: dict[str, _Group] = {}
    lines: dict[str, _Group] = {}
    line_func: dict[str, str] = {}
    addrs: dict[int, _Group] = {}
    clines: dict[int, _Group] = {}
    pages: Counter[int] = Counter()
    timeline, latencies, data_vas = [], {}, []
    levels: dict[str, dict[str, list[int]]] = {}
    line_cache: dict[int, Optional[str]] = {}
    by_pc: dict[int, _Group] = {}
    for rec in records:
        name = sym[rec.pc] if rec.pc is not None else UNKNOWN_SYMBOL
        if rec.pc is not None:
            funcs.setdefault(name, _Group()).add(rec)
            by_pc.setdefault(rec.pc, _Group()).add(rec)
        if image is not None and rec.pc is not None:
            if rec.pc not in line_cache:
                line_cache[rec.pc] = _line_key(image, rec.pc)
            ln = line_cache[rec.pc]
            if ln is not None:
                lines.setdefault(ln, _Group()).add(rec)
                line_func.setdefault(ln, name)
        if rec.op_class == OP_CLASS_LDST and rec.latency_total is not None:
            latencies.setdefault(name, []).append(rec.latency_total)
            level = served_by(bool(rec.op_subclass & LDST_ST), rec.data_source, rec.events)
            levels.setdefault(name, {}).setdefault(level, []).append(rec.latency_total)
        if rec.data_va is not None:
            data_vas.append(rec.data_va)
            addrs.setdefault(rec.data_va, _Group()).add(rec, name)
            g = clines.setdefault(rec.data_va & ~(CACHE_LINE - 1), _Group())
            g.add(rec, name)
            g.offsets.add(rec.data_va & (CACHE_LINE - 1))
        if rec.data_pa is not None:
            pages[rec.data_pa & ~(PAGE - 1)] += 1
        if rec.timestamp is not None and rec.pc is not None:
            timeline.append((rec.timestamp, rec.pc))

    def mean_tot(g: _Group):
        v = g.lat["TOT"]
        return sum(v) / len(v) if v else None

    by_count = lambda d: sorted(d.items(), key=lambda kv: (-kv[1].samples, kv[0]))
    functions = {n: g.summary(total) for n, g in funcs.items()}
    hot_pcs = _hot_pcs(pcs, where, md, image, total, max_pcs)
    rep = Report(
        total_records=total, hot_functions=_hot_functions(functions, total),
        hot_pcs=hot_pcs, functions=functions,
        pc_summaries={pc: by_pc[pc].summary(total) for pc, *_ in hot_pcs},
        lines=[(ln, line_func[ln], g.summary(total)) for ln, g in by_count(lines)],
        op_mix=_op_mix(leaves, total), el_mix=dict(sorted(els.items())),
        data_addresses=[(a, g.samples, g.loads, g.stores, mean_tot(g), sorted(g.funcs)[0])
                        for a, g in by_count(addrs)[:max_pcs]],
        cache_lines=[(a, g.samples, g.loads, g.stores, len(g.offsets), sorted(g.funcs),
                      mean_tot(g)) for a, g in by_count(clines)[:max_pcs]],
        pages=[(a, c, _percent(c, total)) for a, c in
               sorted(pages.items(), key=lambda kv: (-kv[1], kv[0]))[:max_pcs]],
        timeline=sorted(timeline), latencies=latencies, data_vas=data_vas,
        latency_levels={n: {k: sorted(v) for k, v in d.items()} for n, d in levels.items()},
        pc_functions=sym, bad_packets=bad, image_path=None if image is None else image.path)
    if ground_truth:
        rep.ground_truth = _compare(pcs, ground_truth, image, md)
    return rep


_CLASS_NAMES = {OP_CLASS_LDST: "load/store", OP_CLASS_BRANCH: "branch", OP_CLASS_OTHER: "other"}
MISMATCH_MIN = 20         # records compared before the operation-type check can refuse
MISMATCH_SHARE = 0.2      # ... an image whose instructions disagree with more than this share


def _check_match(image: _Image, md, records) -> None:
    """Raise ImageError when ``image`` is not the one the trace was taken from: the sampled
    PCs with an Operation Type packet fall outside its executable sections, or their
    instructions there disagree with the records' operation classes (more than
    MISMATCH_SHARE of at least MISMATCH_MIN)."""
    seen: dict[int, Optional[str]] = {}
    compared = differ = 0
    example = None
    for rec in records:
        if rec.pc is None or rec.op_class not in _CLASS_NAMES:
            continue
        if rec.pc not in seen:
            seen[rec.pc] = _image_class(md, image, rec.pc)
        cls = seen[rec.pc]
        if cls is None:
            continue
        compared += 1
        if cls != _CLASS_NAMES[rec.op_class]:
            differ += 1
            example = example or (rec.pc, rec.op_class)
    _refuse_mismatch(image, md, seen, compared, differ, example)


def _image_class(md, image: _Image, pc: int) -> Optional[str]:
    """:func:`insn_class` of the image's instruction at ``pc``, None outside its executable
    sections."""
    return insn_class(_disassemble(md, image, pc) or "?") if image.text_contains(pc) else None


def _refuse_mismatch(image: _Image, md, seen: dict, compared: int, differ: int,
                     example: Optional[tuple[int, int]]) -> None:
    """The verdict of :func:`_check_match` (either engine): ``seen`` maps every sampled PC
    to its :func:`_image_class`, ``compared`` records had a PC with a class, ``differ`` of
    them disagree, the first of them at ``example`` (pc, its record's op class). Raises
    ImageError (message starting with the path) when the image is not this trace's."""
    if seen and not compared:
        text = ", ".join(f"{a:#x}-{b:#x}" for a, b in image.exec_ranges) or "none"
        raise ImageError(f"{image.path}: not the image of this trace: no sampled PC "
                         f"({min(seen):#x}..{max(seen):#x}) is in its executable sections "
                         f"({text})")
    if compared >= MISMATCH_MIN and differ > MISMATCH_SHARE * compared:
        pc, k = example
        raise ImageError(f"{image.path}: not the image of this trace: {differ} of {compared} "
                         f"sampled instructions disagree with their operation type (at "
                         f"{pc:#x} the image has '{_disassemble(md, image, pc)}', the record "
                         f"says {_CLASS_NAMES[k]})")


def _line_key(image: _Image, pc: int) -> Optional[str]:
    """``file:line`` of ``pc`` as the report names source lines, or None."""
    loc = image.line_of(pc)
    return None if loc is None else f"{_display_path(loc[0])}:{loc[1]}"


def _where(image: Optional[_Image], pc: int) -> tuple[str, str]:
    """(function name, ``name+0xoff`` as the report shows ``pc``) of ``pc``; both
    ``[unknown]`` outside every symbol or without an image."""
    name, off = image.symbolize(pc) if image is not None else (UNKNOWN_SYMBOL, pc)
    return name, (f"{name}+{off:#x}" if name != UNKNOWN_SYMBOL else UNKNOWN_SYMBOL)


def _hot_pcs(pcs: dict[int, int], where: dict[int, str], md, image: Optional[_Image],
             total: int, max_pcs: int) -> list[tuple[int, str, str, int, float]]:
    """:attr:`Report.hot_pcs` of ``pcs`` (pc -> samples; ``where``: pc -> its location)."""
    return [(pc, where[pc], _disassemble(md, image, pc), n, _percent(n, total))
            for pc, n in sorted(pcs.items(), key=lambda kv: (-kv[1], kv[0]))[:max_pcs]]


def _hot_functions(functions: dict[str, dict], total: int) -> list[tuple[str, int, float]]:
    """:attr:`Report.hot_functions` of ``functions`` (name -> its :func:`_summary`)."""
    return sorted(((n, s["samples"], _percent(s["samples"], total))
                   for n, s in functions.items()), key=lambda t: (-t[1], t[0]))


def _groups(keys, np, first: bool = False):
    """Group equal ``keys`` (a numpy array): (sorted unique keys, per element the index of
    its key, per key its count, and with ``first`` per key the index of its first element,
    else None)."""
    uniq = np.unique(keys)
    inv = np.searchsorted(uniq, keys)
    counts = np.bincount(inv, minlength=len(uniq))
    at = None
    if first:
        at = np.full(len(uniq), len(keys), dtype=np.int64)
        np.minimum.at(at, inv, np.arange(len(keys)))
    return uniq, inv, counts, at


def _first_order(keys, np):
    """(unique keys in order of first appearance, per element the index of its key in that
    order, per unique key its count)."""
    uniq, inv, counts, first = _groups(keys, np, first=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return uniq[order], rank[inv], counts[order]


class _Columns:
    """The record rows of :func:`~spe_emu.tools.bulkdecode.scan_array` as the masks and
    columns the vectorised report groups by (a field a record lacks is masked out)."""

    def __init__(self, rows, np):
        from .bulkdecode import (HAS_DS, HAS_LAT0, HAS_LAT1, HAS_LAT2, HAS_OP, HAS_PA,
                                 HAS_PC, HAS_TS, HAS_VA)
        present = rows["present"]
        self.n = len(rows)
        self.has_pc = (present & HAS_PC) != 0
        self.has_va = (present & HAS_VA) != 0
        self.has_pa = (present & HAS_PA) != 0
        self.has_ts = (present & HAS_TS) != 0
        self.has_ds = (present & HAS_DS) != 0
        has_op = (present & HAS_OP) != 0
        self.op_key = np.where(has_op, rows["op_class"].astype(np.int64) * 256
                               + rows["op_subclass"], -1)
        self.ldst = has_op & (rows["op_class"] == OP_CLASS_LDST)
        self.store = self.ldst & ((rows["op_subclass"] & LDST_ST) != 0)
        self.branch = has_op & (rows["op_class"] == OP_CLASS_BRANCH)
        self.classified = has_op & np.isin(rows["op_class"], list(_CLASS_NAMES))
        self.op_class = rows["op_class"]
        lat = rows["latency"]
        self.lat = [(name, lat[:, i], self.ldst & ((present & bit) != 0))
                    for i, ((name, _), bit) in enumerate(zip(LATENCIES,
                                                             (HAS_LAT0, HAS_LAT1, HAS_LAT2)))]
        self.events = rows["events"]
        self.data_source = rows["data_source"]
        self.pc, self.el = rows["pc"], rows["el"]
        self.va, self.pa, self.ts = rows["va"], rows["pa"], rows["timestamp"]

    def counts(self, gidx, size: int, mask, np) -> list[int]:
        """Per group (0..size-1) the records of ``mask`` (``gidx`` -1: no group)."""
        g = gidx[mask & (gidx >= 0)]
        return np.bincount(g, minlength=size).tolist()

    def summaries(self, gidx, size: int, total: int, np) -> list[dict]:
        """:func:`_summary` of each group 0..size-1 (``gidx``: per record its group, -1
        for none)."""
        member = gidx >= 0
        samples = self.counts(gidx, size, member, np)
        ldst = self.counts(gidx, size, self.ldst, np)
        stores = self.counts(gidx, size, self.store, np)
        branches = self.counts(gidx, size, self.branch, np)
        lat: list[dict] = [{} for _ in range(size)]
        width = np.dtype(self.lat[0][1].dtype).itemsize * 8
        for name, values, has in self.lat:
            m = has & member
            # (one sort of group and value packed into one key: the values of each group
            # in ascending order, the groups one after the other)
            key = np.sort((gidx[m].astype(np.uint64) << np.uint64(width))
                          | values[m].astype(np.uint64))
            v = (key & np.uint64((1 << width) - 1)).tolist()
            bounds = np.searchsorted(key >> np.uint64(width),
                                     np.arange(size + 1, dtype=np.uint64)).tolist()
            for i in range(size):
                lat[i][name] = v[bounds[i]:bounds[i + 1]]
        events: list[dict] = [{} for _ in range(size)]
        for bit in EVENT_BITS:
            per = self.counts(gidx, size, ((self.events >> np.uint64(bit)) & np.uint64(1))
                              .astype(bool), np)
            for i, c in enumerate(per):
                if c:
                    events[i][bit] = c
        sources: list[dict] = [{} for _ in range(size)]
        m = self.has_ds & member
        if m.any():
            kinds, kind_of, _, _ = _groups(self.data_source[m], np)
            pairs, _, counts, _ = _groups(gidx[m] * len(kinds) + kind_of, np)
            kinds = kinds.tolist()
            for pair, c in zip(pairs.tolist(), counts.tolist()):
                sources[pair // len(kinds)][kinds[pair % len(kinds)]] = c
        return [_summary(samples[i], ldst[i] - stores[i], stores[i], branches[i], ldst[i],
                         lat[i], events[i], sources[i], total) for i in range(size)]


def _build_vectorised(rows, bad: int, image: Optional[_Image], max_pcs: int,
                      ground_truth: Optional[dict[int, int]], check_image: bool) -> Report:
    """:func:`build_report` from the native decoder's rows, grouped with numpy: the same
    Report the reference path builds record by record."""
    import numpy as np

    c = _Columns(rows, np)
    total = c.n
    md = _disassembler()
    # PCs, in order of first appearance (the ground-truth shares add up in that order)
    upcs, pc_rank, pc_counts = _first_order(c.pc[c.has_pc], np)
    upcs_l, pc_counts_l = upcs.tolist(), pc_counts.tolist()
    pcs = dict(zip(upcs_l, pc_counts_l))
    els = {}
    for el, n in enumerate(np.bincount(c.el[c.has_pc], minlength=4).tolist()):
        if n:
            els[f"EL{el}"] = n
    if total - int(c.has_pc.sum()):
        els["no-pc"] = total - int(c.has_pc.sum())
    leaves: Counter[str] = Counter()
    keys, _, counts, _ = _groups(c.op_key, np)
    for key, n in zip(keys.tolist(), counts.tolist()):
        leaves[_op_leaf(None, None) if key < 0 else _op_leaf(key >> 8, key & 0xFF)] += n

    if check_image and image is not None:
        _check_match_rows(image, md, c, np)

    # per unique PC: its function (index into names) and source line
    names: list[str] = []
    name_index: dict[str, int] = {}
    where: dict[int, str] = {}
    pc_func = np.empty(len(upcs_l), dtype=np.int64)
    for i, pc in enumerate(upcs_l):
        name, where[pc] = _where(image, pc)
        pc_func[i] = name_index.setdefault(name, len(name_index))
        if pc_func[i] == len(names):
            names.append(name)
    unknown = name_index.setdefault(UNKNOWN_SYMBOL, len(name_index))
    if unknown == len(names):
        names.append(UNKNOWN_SYMBOL)
    # per record: its function (records without a PC: [unknown]), and with a PC its group
    rec_name = np.full(total, unknown, dtype=np.int64)
    rec_name[c.has_pc] = pc_func[pc_rank]
    # functions in order of first appearance among records with a PC
    func_ids, func_rank, _ = _first_order(rec_name[c.has_pc], np)
    gidx = np.full(total, -1, dtype=np.int64)
    gidx[c.has_pc] = func_rank
    func_names = [names[i] for i in func_ids.tolist()]
    func_sum = c.summaries(gidx, len(func_names), total, np)
    functions = dict(zip(func_names, func_sum))

    lines_out = []
    if image is not None and len(upcs_l):
        line_of_pc = [_line_key(image, pc) for pc in upcs_l]
        line_ids: dict[str, int] = {}
        pc_line = np.array([-1 if ln is None else line_ids.setdefault(ln, len(line_ids))
                            for ln in line_of_pc], dtype=np.int64)
        lgidx = np.full(total, -1, dtype=np.int64)
        lgidx[c.has_pc] = pc_line[pc_rank]
        line_names = list(line_ids)
        if line_names:
            summ = c.summaries(lgidx, len(line_names), total, np)
            has_line = lgidx >= 0
            _, _, _, first = _groups(lgidx[has_line], np, first=True)
            line_func = [names[i] for i in rec_name[has_line][first].tolist()]
            lines_out = sorted(zip(line_names, line_func, summ),
                               key=lambda t: (-t[2]["samples"], t[0]))

    # latencies per function (TOT of loads/stores, trace order)
    _, tot, has_tot = c.lat[0]
    lat_names, lat_vals = rec_name[has_tot], tot[has_tot]
    latencies: dict[str, list[int]] = {}
    if len(lat_names):
        ids, _, _, first = _groups(lat_names, np, first=True)
        n = len(lat_names)   # (record order within each function: one sort of packed keys)
        order = np.sort(lat_names * n + np.arange(n)) % n
        sorted_ids, vals = lat_names[order], lat_vals[order].tolist()
        bounds = np.searchsorted(sorted_ids, ids).tolist() + [len(vals)]
        per = {i: vals[bounds[k]:bounds[k + 1]] for k, i in enumerate(ids.tolist())}
        for k in np.argsort(first).tolist():
            i = int(ids[k])
            latencies[names[i]] = per[i]

    # per function and level that served the access (served_by), the TOT latencies
    latency_levels: dict[str, dict[str, list[int]]] = {}
    if len(lat_names):
        ev = c.events[has_tot]
        bit = lambda b: (ev >> np.uint64(b)) & np.uint64(1)
        # (every combination the rule reads, one row each; the rule applied once per row)
        ukeys, key_of = np.unique(np.stack([
            c.store[has_tot].astype(np.uint64), c.has_ds[has_tot].astype(np.uint64),
            bit(EV_L1D_REFILL), bit(EV_LLC_MISS),
            c.data_source[has_tot].astype(np.uint64)], axis=1), axis=0, return_inverse=True)
        key_of = key_of.reshape(-1)
        level_names = [served_by(bool(st), ds if has_ds else None,
                                 l1d << EV_L1D_REFILL | llc << EV_LLC_MISS)
                       for st, has_ds, l1d, llc, ds in ukeys.tolist()]
        order = np.lexsort((lat_vals, key_of, lat_names))
        pair = (lat_names * len(level_names) + key_of)[order]
        upair, start = np.unique(pair, return_index=True)
        vals = lat_vals[order].tolist()
        bounds = start.tolist() + [len(vals)]
        for k, p in enumerate(upair.tolist()):
            fn, lv = divmod(p, len(level_names))
            latency_levels.setdefault(names[fn], {}).setdefault(level_names[lv], []).extend(
                vals[bounds[k]:bounds[k + 1]])
        for d in latency_levels.values():
            for v in d.values():
                v.sort()

    def address_groups(keys, offsets: bool):
        """(key, samples, loads, stores, distinct offsets, sorted functions, mean TOT) of
        the ``max_pcs`` most sampled values of ``keys`` (records with a data VA)."""
        va_names = rec_name[c.has_va]
        uniq, inv, counts, _ = _groups(keys, np)
        g = np.full(total, -1, dtype=np.int64)
        g[c.has_va] = inv
        size = len(uniq)
        loads = np.array(c.counts(g, size, c.ldst & ~c.store, np), dtype=np.int64)
        stores = np.array(c.counts(g, size, c.store, np), dtype=np.int64)
        m = has_tot & (g >= 0)
        tot_n = np.bincount(g[m], minlength=size)
        sums = np.zeros(size, dtype=np.uint64)
        np.add.at(sums, g[m], tot[m].astype(np.uint64))
        top = np.lexsort((uniq, -counts.astype(np.int64)))[:max_pcs]
        top_set = np.zeros(size, dtype=bool)
        top_set[top] = True
        sel = top_set[inv]
        fn: dict[int, set] = {}
        for gi, ni in set(zip(inv[sel].tolist(), va_names[sel].tolist())):
            fn.setdefault(gi, set()).add(names[ni])
        offs: dict[int, int] = {}
        if offsets:
            o = (c.va[c.has_va] & np.uint64(CACHE_LINE - 1))[sel]
            for gi, _ in set(zip(inv[sel].tolist(), o.tolist())):
                offs[gi] = offs.get(gi, 0) + 1
        out = []
        for gi in top.tolist():
            n = int(tot_n[gi])
            mean = int(sums[gi]) / n if n else None
            out.append((int(uniq[gi]), int(counts[gi]), int(loads[gi]), int(stores[gi]),
                        offs.get(gi, 0), sorted(fn[gi]), mean))
        return out

    data_addresses = cache_lines = []
    if c.has_va.any():
        vas = c.va[c.has_va]
        data_addresses = [(a, n, lo, st, m, fs[0]) for a, n, lo, st, _, fs, m in
                          address_groups(vas, False)]
        cache_lines = [(a, n, lo, st, o, fs, m) for a, n, lo, st, o, fs, m in
                       address_groups(vas & ~np.uint64(CACHE_LINE - 1), True)]
    pages = []
    if c.has_pa.any():
        upa, _, pa_counts, _ = _groups(c.pa[c.has_pa] & ~np.uint64(PAGE - 1), np)
        top = np.lexsort((upa, -pa_counts.astype(np.int64)))[:max_pcs]
        pages = [(int(upa[i]), int(pa_counts[i]), _percent(int(pa_counts[i]), total))
                 for i in top.tolist()]
    m = c.has_ts & c.has_pc
    ts, tpc = c.ts[m], c.pc[m]
    order = np.lexsort((tpc, ts))
    timeline = list(zip(ts[order].tolist(), tpc[order].tolist()))

    # per hot PC, the summary of its records
    hot_pcs = _hot_pcs(pcs, where, md, image, total, max_pcs)
    pc_group = np.full(len(upcs_l), -1, dtype=np.int64)
    at = {pc: i for i, pc in enumerate(upcs_l)}
    for k, (pc, *_) in enumerate(hot_pcs):
        pc_group[at[pc]] = k
    pgidx = np.full(total, -1, dtype=np.int64)
    pgidx[c.has_pc] = pc_group[pc_rank]
    pc_summaries = dict(zip([pc for pc, *_ in hot_pcs],
                            c.summaries(pgidx, len(hot_pcs), total, np)))

    rep = Report(
        total_records=total, hot_functions=_hot_functions(functions, total),
        hot_pcs=hot_pcs, functions=functions, pc_summaries=pc_summaries,
        lines=lines_out,
        op_mix=_op_mix(leaves, total), el_mix=dict(sorted(els.items())),
        data_addresses=data_addresses, cache_lines=cache_lines, pages=pages,
        timeline=timeline, latencies=latencies, data_vas=c.va[c.has_va].tolist(),
        latency_levels=latency_levels,
        pc_functions={pc: names[i] for pc, i in zip(upcs_l, pc_func.tolist())},
        bad_packets=bad, image_path=None if image is None else image.path)
    if ground_truth:
        rep.ground_truth = _compare(Counter(pcs), ground_truth, image, md)
    return rep


def _check_match_rows(image: _Image, md, c: "_Columns", np) -> None:
    """:func:`_check_match` on the vectorised columns: the same verdict and message."""
    m = c.has_pc & c.classified
    if not m.any():
        return
    upcs, pc_of, _, _ = _groups(c.pc[m], np)
    classes = len(_CLASS_NAMES)
    pairs, _, counts, first = _groups(pc_of * classes + c.op_class[m], np, first=True)
    upcs = upcs.tolist()
    seen: dict[int, Optional[str]] = {}
    compared = differ = 0
    example_at = None
    for pair, at, n in zip(pairs.tolist(), first.tolist(), counts.tolist()):
        p, k = upcs[pair // classes], pair % classes
        if p not in seen:
            seen[p] = _image_class(md, image, p)
        if seen[p] is None:
            continue
        compared += n
        if seen[p] != _CLASS_NAMES[k]:
            differ += n
            if example_at is None or at < example_at[0]:
                example_at = (at, p, k)
    _refuse_mismatch(image, md, seen, compared, differ, example_at and example_at[1:])


def _compare(pcs: Counter, exact: dict[int, int], image: Optional[_Image], md) -> dict:
    """SPE's estimated shares (samples per PC) against the exact ones (executions per PC),
    per function, per operation class (from the image's instructions) and per PC; with an
    image, of the PCs in its executable sections only (``scope``)."""
    if image is not None:
        # (the image's instructions only: what ran before profiling was enabled -- the
        # firmware's boot -- and other images are no part of the comparison)
        pcs = Counter({pc: n for pc, n in pcs.items() if image.text_contains(pc)})
        exact = {pc: n for pc, n in exact.items() if image.text_contains(pc)}
    n_samples, n_exec = sum(pcs.values()), sum(exact.values())
    name = (lambda pc: image.symbolize(pc)[0]) if image is not None else (
        lambda pc: UNKNOWN_SYMBOL)

    def shares(counts: dict, key, total: int) -> dict:
        out: dict = {}
        for pc, n in counts.items():
            k = key(pc)
            out[k] = out.get(k, 0.0) + 100.0 * n / total
        return out

    def rows(est: dict, ex: dict) -> list:
        keys = sorted(set(est) | set(ex), key=lambda k: (-ex.get(k, 0.0), k))
        return [(k, est.get(k, 0.0), ex.get(k, 0.0), est.get(k, 0.0) - ex.get(k, 0.0))
                for k in keys]

    out = {"scope": image.path if image is not None else "all PCs",
           "samples": n_samples, "instructions": n_exec, "functions": [], "op_classes": [],
           "error_functions": 0.0, "error_pcs": 0.0}
    if not n_samples or not n_exec:
        return out
    ef, xf = shares(pcs, name, n_samples), shares(exact, name, n_exec)
    out["functions"] = rows(ef, xf)
    out["error_functions"] = _tvd(ef, xf)
    out["error_pcs"] = _tvd(shares(pcs, lambda pc: pc, n_samples),
                            shares(exact, lambda pc: pc, n_exec))
    if image is not None:
        cls_cache: dict[int, str] = {}

        def cls(pc):
            if pc not in cls_cache:
                text = _disassemble(md, image, pc)
                cls_cache[pc] = insn_class(text) if text else "not disassembled"
            return cls_cache[pc]
        eo, xo = shares(pcs, cls, n_samples), shares(exact, cls, n_exec)
        out["op_classes"] = rows(eo, xo)
        out["error_op_classes"] = _tvd(eo, xo)
    return out


def _fmt(v, digits=1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def format_rate(s: dict, name: str, inline: bool = False) -> str:
    """A rate of a summary (percent) with its 95% confidence interval: ``12.5`` over
    ``8.1-18`` on two lines for a terminal table (bounds of 10 and more without decimals,
    under 0.05 as ``0``), or ``12.5 (8.1-18.3)`` with ``inline``; ``-`` without the rate."""
    v = s["rates"].get(name)
    if v is None:
        return "-"
    lo, hi = s["rates_ci95"][name]
    if inline:
        return f"{v:.1f} ({lo:.1f}-{hi:.1f})"
    bound = lambda x: "0" if x < 0.05 else f"{x:.{1 if x < 10 else 0}f}"
    return f"{v:.1f}\n{bound(lo)}-{bound(hi)}"


def _fmt_mean(lat: dict) -> str:
    """A mean latency (cycles) with half its 95% confidence interval: ``12.3 ±1.2``."""
    if not lat:
        return "-"
    return f"{lat['mean']:.1f} ±{lat['ci95']:.1f}"


def _table(title: str, columns, console_width: int):
    from rich.table import Table

    t = Table(title=title, expand=False, pad_edge=False, collapse_padding=True)
    for i, col in enumerate(columns):
        name, right = (col, False) if isinstance(col, str) else col
        # (the first column names the row: never wrapped, shortened in the middle instead)
        t.add_column(name, justify="right" if right else "left", overflow="fold",
                     no_wrap=i == 0)
    return t


def describe_model(config: Optional[dict]) -> Optional[str]:
    """One line naming the model configuration a trace's events and latencies come from
    (summary.json ``model_config``), or None when unknown."""
    if not config:
        return None

    def level(name: str, lines: str, unit: str, scale: int = 64) -> str:
        n, ways = config.get(lines, 0), config.get(name + "_ways", 0)
        if not n:
            return ""
        size = n * scale
        size_text = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        assoc = "fully assoc." if not ways or ways >= n else f"{ways}-way"
        return f"{name.upper()} {size_text if unit == 'bytes' else f'{n} entries'} ({assoc})"
    feed = config.get("model_feed")
    if feed == "every":
        linger = config.get("model_feed_linger", -1)
        feed += (f" from {config.get('model_feed_from')}"
                 + (f", linger {linger:,} insns" if linger >= 0 else ""))
    levels = ", ".join(x for x in (level("tlb", "tlb_entries", "entries"),
                                   level("l1d", "l1d_lines", "bytes"),
                                   level("l2", "l2_lines", "bytes"),
                                   level("llc", "llc_lines", "bytes")) if x)
    lat = "/".join(str(config.get(k)) for k in ("l1d_latency", "l2_latency", "llc_latency",
                                                  "dram_latency"))
    midr = config.get("midr")
    return (f"Model: feed {feed}; {levels}; load latency L1D/L2/LLC/DRAM {lat} cycles, walk "
            f"{config.get('walk_latency')}; gshare {config.get('gshare_bits')} bits, RAS "
            f"{config.get('ras_entries')}; MIDR_EL1 {midr or 'Unicorn max'}")


FIT_SYMBOL, FIT_HALF, FIT_NAMES, FIT_TEXT = "symbol", "half", "names", "text"
"""How a terminal fits a :class:`ReportTable` column's cells (:func:`render_report`): a
symbol shortened in its middle to the symbol width (or about half of it), a list of names
(the first three, each shortened), literal text (never rich markup); None: a number."""


@dataclass
class ReportTable:
    """One table of the report, as the text and the HTML renderer both show it.

    Fields:
        key: its name (the HTML table's id).
        title: the title above it.
        columns: ``(header, right-aligned, fit)``, fit one of FIT_* or None.
        rows: per row its cells: text, or a list of names for a FIT_NAMES column.
        optional: indexes of the columns a terminal too narrow for the whole table leaves
            out, the first left out first (the HTML page shows every column).
    """

    key: str
    title: str
    columns: list[tuple[str, bool, Optional[str]]]
    rows: list[list]
    optional: tuple[int, ...] = ()


@dataclass
class ReportLine:
    """A line of text between the tables (``key``: the HTML paragraph's id)."""

    key: str
    text: str


def data_sources_text(s: dict, levels: Optional[dict[str, list[int]]] = None) -> str:
    """The data sources of a summary by level name and records (``L1D:126 DRAM:3``); without
    Data Source packets, the levels the Events give its loads (``levels``: a function's
    :attr:`Report.latency_levels`), marked as derived (``from events: L1D hit:39; L1D miss,
    LLC hit:1``); ``-`` when there is neither."""
    text = " ".join(f"{data_source_name(int(k, 16))}:{v}" for k, v in s["data_source"].items())
    if text or not levels:
        return text or "-"
    derived = [(lv, len(v)) for lv, v in sorted(levels.items(), key=lambda kv: level_key(kv[0]))
               if lv in EVENT_LEVELS and v]
    return ("from events: " + "; ".join(f"{lv}:{n}" for lv, n in derived)) if derived else "-"


def summary_line(report: Report) -> str:
    """The report's first line: the image, records and bad packets."""
    source = f" from {report.image_path}" if report.image_path else ""
    return (f"SPE report{source}: {report.total_records} records, "
            f"{report.bad_packets} bad packets")


def access_cells(s: dict, inline: bool = False) -> list[str]:
    """The load/store cells of a summary: TOT latency mean ±95% CI, p50, p90, p99 (cycles)
    and the L1D and LLC miss rates with their intervals (:func:`format_rate`); ``-`` for
    what the group has not."""
    tot = s["latency"].get("TOT", {})
    return [_fmt_mean(tot), _fmt(tot.get("p50"), 0), _fmt(tot.get("p90"), 0),
            _fmt(tot.get("p99"), 0), format_rate(s, "l1d_refill", inline),
            format_rate(s, "llc_miss", inline)]


def report_parts(report: Report, top: int = 10, inline: bool = False) -> list:
    """The report after its summary and model lines, in order: :class:`ReportTable` and
    :class:`ReportLine` items (what both :func:`render_report` and the HTML page show).
    Rates with their interval on a second line, or after them with ``inline``."""
    S, H, T = FIT_SYMBOL, FIT_HALF, FIT_TEXT
    num = lambda name: (name, True, None)
    parts: list = []

    def table(key, title, columns, rows, optional=()):
        parts.append(ReportTable(key, title, columns, rows, tuple(optional)))

    hot = [(name, count, pct, report.functions[name])
           for name, count, pct in report.hot_functions[:top]]
    rows = []
    for name, count, pct, s in hot:
        tot = s["latency"].get("TOT", {})
        rows.append([name, str(count), f"{pct:.2f}", str(s["loads"] + s["stores"]),
                     _fmt_mean(tot), _fmt(tot.get("p50"), 0), _fmt(tot.get("p90"), 0),
                     _fmt(tot.get("p99"), 0)])
    table("hot-functions",
          f"Hot functions (top {top}; load/store latency in cycles, mean ±95% CI)",
          [("Function", False, S), num("Samples"), num("%"), num("Ld/St"), num("TOT mean"),
           num("p50"), num("p90"), num("p99")], rows)
    rows = []
    for name, _, _, s in hot:
        lat = s["latency"]
        rows.append([name, _fmt(lat.get("ISSUE", {}).get("mean")),
                     _fmt(lat.get("XLAT", {}).get("mean"))]
                    + [format_rate(s, r, inline) for r, _, _ in RATES]
                    + [data_sources_text(s, report.latency_levels.get(name))])
    table("events", f"Events per function (top {top}; percent of accesses, of branches; "
          + ("after each, its 95% confidence interval)" if inline else
             "under each, its 95% confidence interval)"),
          [("Function", False, S), num("ISSUE mean"), num("XLAT mean"), num("L1D miss%"),
           num("LLC miss%"), num("TLB miss%"), num("Mispred%"), ("Data source", False, T)],
          rows)
    if report.load_levels:
        where = {LEVELS_FROM_DATA_SOURCE: "level from the Data Source packets",
                 LEVELS_FROM_EVENTS: "level from events: no Data Source packets, "
                                     "PMSIDR_EL1.LDS = 0",
                 LEVELS_FROM_BOTH: "level from the Data Source packets, from events for "
                                   "loads without one"}[report.load_levels_from]
        table("load-levels", f"Loads by the level that served them ({where}; TOT latency in "
              "cycles, mean ±95% CI)",
              [("Level", False, T), num("Loads"), num("% of loads"), num("TOT mean"),
               num("p50"), num("p90"), num("p99")],
              [[level, str(n), f"{pct:.2f}", _fmt_mean(lat), _fmt(lat["p50"], 0),
                _fmt(lat["p90"], 0), _fmt(lat["p99"], 0)]
               for level, n, pct, lat in report.load_levels])
    access_columns = [num("TOT mean"), num("p50"), num("p90"), num("p99"), num("L1D miss%"),
                      num("LLC miss%")]
    interval_note = "95% CI after each rate" if inline else "95% CI under each rate"
    if report.lines:
        rows = []
        for ln, func, s in report.lines[:top]:
            rows.append([ln, func, str(s["samples"]), f"{s['percent']:.2f}",
                         *access_cells(s, inline),
                         _fmt(s["latency"].get("ISSUE", {}).get("mean"))])
        table("lines", f"Hot source lines (top {top}; load/store latency in cycles, mean "
              f"±95% CI; miss % of accesses, {interval_note})",
              [("Line", False, S), ("Function", False, H), num("Samples"), num("%"),
               *access_columns, num("ISSUE")], rows, optional=(10, 6, 5, 9, 7))
    rows = []
    for pc, where, disasm, count, pct in report.hot_pcs[:top]:
        s = report.pc_summaries.get(pc)
        cells = access_cells(s, inline) if s and s["loads"] + s["stores"] else [""] * 6
        rows.append([f"{pc:#x}", where, disasm, str(count), f"{pct:.2f}", *cells])
    table("pcs", f"Hot PCs (top {top}; loads/stores: latency in cycles, mean ±95% CI; "
          f"miss % of accesses, {interval_note})",
          [num("PC"), ("Location", False, S), ("Instruction", False, T), num("Samples"),
           num("%"), *access_columns], rows, optional=(7, 6, 10, 9, 8, 5))
    table("op-mix", "Operation mix (each level adds up to its parent)",
          [("Kind", False, T), num("Samples"), num("%")],
          [["  " * depth + kind, str(count), f"{pct:.2f}"]
           for depth, kind, count, pct in report.op_mix])
    table("el-mix", "Exception level", [("EL", False, None), num("Samples"), num("%")],
          [[el, str(count), f"{_percent(count, report.total_records):.2f}"]
           for el, count in report.el_mix.items()])
    if report.data_objects:
        table("data-objects", f"Hot data objects (top {top}; samples with a data address)",
              [("Data object", False, S), num("Samples"), num("%")],
              [[name, str(c), f"{p:.2f}"] for name, c, p in report.data_objects[:top]])
    if report.data_addresses:
        table("data-addresses", f"Hot data addresses (top {top})",
              [num("Data VA"), ("Data symbol", False, S), num("Samples"), num("Loads"),
               num("Stores"), num("TOT mean"), ("Function", False, S)],
              [[f"{a:#x}", report.data_symbols.get(a, "-"), str(c), str(lo), str(st),
                _fmt(m), f] for a, c, lo, st, m, f in report.data_addresses[:top]])
        table("cache-lines", f"Hot cache lines ({CACHE_LINE} bytes, top {top}; the offsets "
              f"and functions that share each)",
              [num("Line VA"), num("Samples"), num("Loads"), num("Stores"), num("Offsets"),
               ("Functions", False, FIT_NAMES), num("TOT mean")],
              [[f"{a:#x}", str(c), str(lo), str(st), str(o), list(fs), _fmt(m)]
               for a, c, lo, st, o, fs, m in report.cache_lines[:top]])
    if report.pages:
        table("pages", f"Hot physical pages ({PAGE} bytes, top {top})",
              [num("Page PA"), num("Samples"), num("%")],
              [[f"{a:#x}", str(c), f"{p:.2f}"] for a, c, p in report.pages[:top]])

    gt = report.ground_truth
    if gt:
        for key, title in (("functions", "Function"), ("op_classes", "Operation class")):
            if gt.get(key):
                table(f"truth-{key.replace('_', '-')}",
                      f"Sampled against exact ({title.lower()}, top {top})",
                      [(title, False, S), num("SPE %"), num("Exact %"),
                       num("Error (points)")],
                      [[name, f"{est:.2f}", f"{ex:.2f}", f"{err:+.2f}"]
                       for name, est, ex, err in gt[key][:top]])
        parts.append(ReportLine("sampling-error", (
            f"Sampling error ({gt['scope']}): {gt['samples']} samples of "
            f"{gt['instructions']} instructions: total variation {gt['error_functions']:.2f} "
            f"points over functions, {gt['error_pcs']:.2f} over PCs")))
    et = report.event_truth
    if et and et["rates"]:
        table("event-truth", "Event rates, SPE's estimate against the model's exact rate "
              "(percent; 95% confidence interval)",
              [("Function", False, S), ("Event", False, None), num("SPE %"),
               num("Interval"), num("Exact %"), ("In", False, None)],
              [[func, RATE_TITLES[rate], f"{est:.1f}", f"{lo:.1f}-{hi:.1f}", f"{exact:.1f}",
                "yes" if inside else "no"]
               for func, rate, est, lo, hi, exact, inside in et["rates"][:4 * top]])
    return parts


def render_report(report: Report, console, top: int = 10) -> None:
    """Print ``report`` on the rich ``console`` (tables sized to its width: long symbols are
    shortened in the middle, their ``+0x`` offsets kept): a summary line, the model
    configuration, then :func:`report_parts`: the ``top`` functions (samples, load/store
    latency, event rates), source lines, PCs, the operation hierarchy, Exception levels,
    data objects and addresses, cache lines, PA pages and, with ground truth, the
    estimated-against-exact tables. Names are printed literally (never as rich markup)."""
    from rich.text import Text

    width = console.width
    sym_w = max(16, min(48, width // 3 - 2))
    fits = {FIT_SYMBOL: lambda v: Text(shorten(v, sym_w)),
            FIT_HALF: lambda v: Text(shorten(v, sym_w // 2 + 4)),
            FIT_TEXT: Text,
            FIT_NAMES: lambda v: Text(", ".join(shorten(f, 20) for f in v[:3])
                                      + (" …" if len(v) > 3 else "")),
            None: str}
    console.print(Text(summary_line(report)))
    model = describe_model(report.model_config)
    if model:
        console.print(Text(model))
    for part in report_parts(report, top):
        if isinstance(part, ReportLine):
            console.print(Text(part.text))
            continue
        console.print(_fitted_table(part, fits, console))


def _fitted_table(part: "ReportTable", fits: dict, console):
    """``part`` as a rich table for ``console``: its optional columns left out, in their
    order, while the table would be wider than the console (the title says which)."""
    from rich.measure import Measurement

    cells = [[fits[fit](v) for (_, _, fit), v in zip(part.columns, row)] for row in part.rows]
    dropped: list[int] = []
    while True:
        keep = [i for i in range(len(part.columns)) if i not in dropped]
        title = part.title
        if dropped:
            title += (" [" + ", ".join(part.columns[i][0] for i in sorted(dropped))
                      + f" left out to fit {console.width} columns]")
        t = _table(title, [(part.columns[i][0], 1) if part.columns[i][1] else
                           part.columns[i][0] for i in keep], console.width)
        for row in cells:
            t.add_row(*(row[i] for i in keep))
        rest = [i for i in part.optional if i not in dropped]
        wide = console.options.update_width(1 << 20)   # (the width it wants, uncut)
        if not rest or Measurement.get(console, wide, t).maximum <= console.width:
            return t
        dropped.append(rest[0])


def _pcs_in(trace: bytes, lo: int, hi: int) -> Counter:
    """Samples per PC in [lo, hi) of ``trace``: from the native decoder's rows
    (bulkdecode.scan_array), or packets.iter_records where it cannot be loaded."""
    from ..native import NativeBuildError
    try:
        import numpy as np

        from .bulkdecode import HAS_PC, scan_array
        rows, _ = scan_array(trace)
    except (ImportError, NativeBuildError):
        return Counter(r.pc for r in iter_records(trace)
                       if r.pc is not None and lo <= r.pc < hi)
    pc = rows["pc"][(rows["present"] & HAS_PC) != 0]
    pcs, counts = np.unique(pc[(pc >= np.uint64(lo)) & (pc < np.uint64(hi))],
                            return_counts=True)
    return Counter(dict(zip(pcs.tolist(), counts.tolist())))


def annotate(trace: bytes, image_path: Union[str, os.PathLike], function: str,
             console) -> None:
    """Print ``function`` of the image (``perf annotate`` style): its capstone disassembly,
    each instruction with its samples and percent of the function's samples, and the
    source line (DWARF line table; the text when the file is readable) before the
    instructions it generated. Raises ImageError when the image has no such function."""
    from rich.text import Text

    image = _Image(image_path)
    rng = image.function_range(function)
    if rng is None:
        raise ImageError(f"{image.path}: no function {function!r}")
    lo, hi = rng
    pcs = _pcs_in(bytes(trace), lo, hi)
    total = sum(pcs.values())
    md = _disassembler()
    console.print(Text(f"Annotate {function} [{lo:#x}, {hi:#x}): {total} samples"))
    sources: dict[str, Optional[list[str]]] = {}
    last = None
    for pc in range(lo, hi, INSN_BYTES):
        loc = image.line_of(pc)
        if loc is not None and loc != last:
            last = loc
            path, line = loc
            if path not in sources:
                try:   # (only a regular file: the line table may name anything)
                    sources[path] = read_input(path, MAX_SOURCE_BYTES, "a source file").decode(
                        errors="replace").splitlines()
                except SpeEmuError:
                    sources[path] = None
            text = sources[path]
            src = text[line - 1].strip() if text and 0 < line <= len(text) else ""
            console.print(Text(f"{'':>16}  {os.path.basename(path)}:{line}  {src}"),
                          no_wrap=True, overflow="ellipsis")
        n = pcs.get(pc, 0)
        pct = f"{_percent(n, total):6.2f}" if n else " " * 6
        console.print(Text(f"{pct} {n or '':>8}  {pc:#x}: {_disassemble(md, image, pc)}"))
