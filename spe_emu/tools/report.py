"""Profile report of an SPE trace against the ELF image it was taken from.

:func:`build_report` decodes the records (:func:`spe_emu.spe.packets.iter_records`), maps each
sampled PC to the enclosing function symbol of the image (pyelftools) and disassembles the
hottest PCs (capstone); :func:`render_report` prints the result as rich tables.
"""

from __future__ import annotations

import bisect
import io
import os
from pathlib import Path
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional, Union

from ..errors import ImageError
from ..platform.loader import load_elf, read_limited
from ..spe.packets import (
    BRANCH_COND, LDST_AR, LDST_AT, LDST_EXCL, LDST_ST, OP_CLASS_BRANCH, OP_CLASS_LDST,
    OP_CLASS_OTHER, OTHER_COND, BadPacket, branch_is_indirect, iter_packets, iter_records,
    ldst_is_extended, ldst_is_simd_fp,
)

UNKNOWN_SYMBOL = "[unknown]"
INSN_BYTES = 4
SHF_EXECINSTR = 0x4


@dataclass
class Report:
    """What :func:`build_report` found.

    Fields:
        total_records: complete records in the trace (the denominator of every percentage).
        hot_functions: ``(name, samples, percent)`` for every function that has samples, most
            sampled first (``[unknown]`` collects PCs outside every symbol).
        hot_pcs: ``(pc, "symbol+0xoff", disassembly, samples, percent)`` for the most sampled
            PCs (at most ``max_pcs`` of them), most sampled first; disassembly is ``""`` when
            the PC is not in the image.
        op_mix: samples per operation kind. Coarse keys partition the records: ``load``,
            ``store``, ``branch``, ``other``, ``no-op-type`` (record without an Operation Type
            packet). Finer keys count subsets: ``load simd-fp``, ``store simd-fp``,
            ``load-acquire``, ``store-release``, ``exclusive``, ``atomic``, ``cond branch``,
            ``indirect branch``, ``cond select``. Only non-zero keys are present.
        el_mix: samples per Exception level of the PC (``EL0`` .. ``EL3``, ``no-pc``).
        bad_packets: bad headers met in the trace.
        image_path: the image used (None when built without one).
    """

    total_records: int
    hot_functions: list[tuple[str, int, float]] = field(default_factory=list)
    hot_pcs: list[tuple[int, str, str, int, float]] = field(default_factory=list)
    op_mix: dict[str, int] = field(default_factory=dict)
    el_mix: dict[str, int] = field(default_factory=dict)
    bad_packets: int = 0
    image_path: Optional[str] = None


class _Image:
    """Symbols and loadable bytes of an AArch64 ELF image."""

    def __init__(self, path: Union[str, os.PathLike]):
        from elftools.common.exceptions import ELFError
        from elftools.construct import ConstructError
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import SymbolTableSection

        self.path = os.fspath(path)
        # the same validation as ``run`` (a bad file is one ImageError line), then its bytes
        raw = read_limited(Path(self.path))
        load_elf(self.path)
        try:
            elf = ELFFile(io.BytesIO(raw))
            machine = elf["e_machine"]
            if machine != "EM_AARCH64":
                raise ImageError(f"{self.path}: not an AArch64 ELF image (machine {machine})")
            self.segments = [(seg["p_vaddr"], seg.data()[:seg["p_filesz"]])
                             for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD"]
            sections = list(elf.iter_sections())
            exec_index = {i for i, s in enumerate(sections)
                          if s["sh_flags"] & SHF_EXECINSTR and s["sh_size"]}
            exec_ranges = [(sections[i]["sh_addr"],
                            sections[i]["sh_addr"] + sections[i]["sh_size"])
                           for i in exec_index]
            funcs, labels = [], []
            for sec in sections:
                if not isinstance(sec, SymbolTableSection):
                    continue
                for sym in sec.iter_symbols():
                    kind = sym["st_info"]["type"]
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


def _op_kinds(op_class: Optional[int], sub: Optional[int]) -> list[str]:
    """The op_mix keys one record counts towards (first one is the coarse key)."""
    if op_class is None:
        return ["no-op-type"]
    if op_class == OP_CLASS_LDST:
        store = bool(sub & LDST_ST)
        kinds = ["store" if store else "load"]
        if ldst_is_simd_fp(sub):
            kinds.append("store simd-fp" if store else "load simd-fp")
        elif ldst_is_extended(sub):
            if sub & LDST_AR:
                kinds.append("store-release" if store else "load-acquire")
            if sub & LDST_EXCL:
                kinds.append("exclusive")
            if sub & LDST_AT:
                kinds.append("atomic")
        return kinds
    if op_class == OP_CLASS_BRANCH:
        kinds = ["branch"]
        if sub & BRANCH_COND:
            kinds.append("cond branch")
        if branch_is_indirect(sub):
            kinds.append("indirect branch")
        return kinds
    if op_class == OP_CLASS_OTHER:
        return ["other", "cond select"] if sub & OTHER_COND else ["other"]
    return ["reserved"]


def _percent(count: int, total: int) -> float:
    return 100.0 * count / total if total else 0.0


def build_report(trace: bytes, image_path: Optional[Union[str, os.PathLike]],
                 *, max_pcs: int = 100) -> Report:
    """Analyse ``trace`` (raw Profiling Buffer bytes) against the ELF at ``image_path``.

    ``image_path`` None skips symbols and disassembly (every PC is ``[unknown]``).
    Percentages are of all complete records. Raises :class:`spe_emu.errors.ImageError`
    (message starting with the path) when the image is missing, unreadable, not an ELF or
    not AArch64.
    """
    image = _Image(image_path) if image_path is not None else None
    trace = bytes(trace)
    records = list(iter_records(trace))
    total = len(records)
    pcs: Counter[int] = Counter()
    ops: Counter[str] = Counter()
    els: Counter[str] = Counter()
    for rec in records:
        if rec.pc is not None:
            pcs[rec.pc] += 1
            els[f"EL{rec.el}"] += 1
        else:
            els["no-pc"] += 1
        ops.update(_op_kinds(rec.op_class, rec.op_subclass))

    funcs: Counter[str] = Counter()
    where: dict[int, str] = {}
    for pc, count in pcs.items():
        name, off = image.symbolize(pc) if image is not None else (UNKNOWN_SYMBOL, pc)
        funcs[name] += count
        where[pc] = f"{name}+{off:#x}" if name != UNKNOWN_SYMBOL else UNKNOWN_SYMBOL

    md = _disassembler()
    hot_pcs = [(pc, where[pc], _disassemble(md, image, pc), count, _percent(count, total))
               for pc, count in sorted(pcs.items(), key=lambda kv: (-kv[1], kv[0]))[:max_pcs]]
    hot_functions = [(name, count, _percent(count, total))
                     for name, count in sorted(funcs.items(), key=lambda kv: (-kv[1], kv[0]))]
    bad = sum(1 for _, item in iter_packets(trace) if isinstance(item, BadPacket))
    return Report(total_records=total, hot_functions=hot_functions, hot_pcs=hot_pcs,
                  op_mix=dict(ops), el_mix=dict(sorted(els.items())), bad_packets=bad,
                  image_path=None if image is None else image.path)


def render_report(report: Report, console, top: int = 10) -> None:
    """Print ``report`` on the rich ``console``: a summary line, then tables of the ``top``
    functions, the ``top`` PCs, the operation mix and the Exception-level mix. Symbol names
    and disassembly are printed literally (never as rich markup)."""
    from rich.table import Table
    from rich.text import Text

    source = f" from {report.image_path}" if report.image_path else ""
    console.print(Text(f"SPE report{source}: {report.total_records} records, "
                       f"{report.bad_packets} bad packets"))

    t = Table(title=f"Hot functions (top {top})")
    t.add_column("Function")
    t.add_column("Samples", justify="right")
    t.add_column("%", justify="right")
    for name, count, pct in report.hot_functions[:top]:
        t.add_row(Text(name), str(count), f"{pct:.2f}")
    console.print(t)

    t = Table(title=f"Hot PCs (top {top})")
    t.add_column("PC", justify="right")
    t.add_column("Location")
    t.add_column("Instruction")
    t.add_column("Samples", justify="right")
    t.add_column("%", justify="right")
    for pc, where, disasm, count, pct in report.hot_pcs[:top]:
        t.add_row(f"{pc:#x}", Text(where), Text(disasm), str(count), f"{pct:.2f}")
    console.print(t)

    t = Table(title="Operation mix")
    t.add_column("Kind")
    t.add_column("Samples", justify="right")
    t.add_column("%", justify="right")
    for kind, count in sorted(report.op_mix.items(), key=lambda kv: (-kv[1], kv[0])):
        t.add_row(Text(kind), str(count), f"{_percent(count, report.total_records):.2f}")
    console.print(t)

    t = Table(title="Exception level")
    t.add_column("EL")
    t.add_column("Samples", justify="right")
    t.add_column("%", justify="right")
    for el, count in report.el_mix.items():
        t.add_row(el, str(count), f"{_percent(count, report.total_records):.2f}")
    console.print(t)
