"""The driver-bug reporter: the software rules of the SPE supplement a guest's SPE driver can
break (§3.4.1 "Restrictions on the current write pointer", §3.6 synchronization), checked where
the model can see them, each reported once per run with the guest PC, the register values,
the rule and its section.

What the model then does is its documented choice among the UNPREDICTABLE behaviours
(docs/model.md "Driver rules"): the records go where PMBPTR_EL1 points (a misaligned pointer
is used as it is; records are padded to 2**PMBIDR_EL1.Align from there), a record that does not
fit raises the buffer-full management event of :mod:`.buffer`, a write to PMBPTR_EL1 while
profiling is enabled takes effect at once for the next record, and a read of PMBPTR_EL1
returns the pointer after every record written so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import DriverRuleBroken
from ..sysreg import RegisterTable
from .config import SpeConfig

TOP_BYTE = 0xFF << 56   # PMBPTR_EL1.PTR[63:56], PMBLIMITR_EL1.LIMIT[63:56] (§3.4.1)


@dataclass(frozen=True)
class Rule:
    """One software rule: ``key`` (stable, for summary.json), the section, the rule's text."""

    key: str
    section: str
    text: str


RULES = {r.key: r for r in (
    Rule("ptr-align", "§3.4.1",
         "PMBPTR_EL1 not aligned to 2^PMBIDR_EL1.Align when the Profiling Buffer is "
         "configured"),
    Rule("ptr-room", "§3.4.1",
         "fewer than 2^PMSIDR_EL1.MaxSize bytes between PMBPTR_EL1 and PMBLIMITR_EL1.LIMIT "
         "when profiling becomes enabled"),
    Rule("top-byte", "§3.4.1",
         "PMBPTR_EL1.PTR[63:56] differs from PMBLIMITR_EL1.LIMIT[63:56] when profiling "
         "becomes enabled"),
    Rule("ptr-write-enabled", "§3.4.1, §3.6",
         "PMBPTR_EL1 written while profiling is enabled"),
    Rule("ptr-read-unsynced", "§3.4.1, §3.6",
         "PMBPTR_EL1 read without a PSB CSYNC executed after profiling was last disabled"),
)}
"""The rules checked, by key (docs/model.md "Driver rules")."""


@dataclass
class RuleBreak:
    """A rule the guest broke (the first time): where and with which register values."""

    rule: str
    section: str
    text: str
    pc: int
    registers: dict[str, int]

    def line(self) -> str:
        """The guest_error line."""
        regs = ", ".join(f"{k}={v:#x}" for k, v in self.registers.items())
        return f"spe: driver rule broken at PC {self.pc:#x}: {self.section}: {self.text} ({regs})"


class DriverRules:
    """Checks the rules of :data:`RULES` against the SPE registers ``regs`` (the SPU's).

    Args:
        regs: the SPE register storage (name -> value).
        table: the SPE register table (field layouts).
        config: MaxSize and Align.
        report: called with each first break's :meth:`RuleBreak.line`.

    Raises (from the checks, with ``config.strict``):
        DriverRuleBroken: the first break of a rule.
        pc: the guest PC of the instruction being handled (the machine's).
        psb_visible: whether the PSB CSYNCs of the code at a PC are seen (the machine hooks
            those of the loaded images' executable segments only); ptr-read-unsynced is
            checked only for reads from such code (default: all code).
    """

    def __init__(self, regs: dict[str, int], table: RegisterTable, config: SpeConfig,
                 report: Callable[[str], None] | None = None,
                 pc: Callable[[], int] | None = None):
        self.regs = regs
        self._limit = table["PMBLIMITR_EL1"].field("LIMIT").mask
        self._align = config.align_bytes
        self._max_record = config.max_record_bytes
        self.report = report
        self.pc = pc
        self.psb_visible: Callable[[int], bool] = lambda pc: True
        self.strict = config.strict
        """``--strict``: each break raises :class:`DriverRuleBroken` (after its report)."""
        self.breaks: list[RuleBreak] = []
        self._seen: set[str] = set()
        self.synced = True   # a PSB CSYNC ran with profiling disabled since it was enabled

    def _broken(self, key: str, *names: str, **extra: int) -> None:
        if key in self._seen:
            return
        self._seen.add(key)
        rule = RULES[key]
        found = RuleBreak(key, rule.section, rule.text, self.pc() if self.pc else 0,
                          {**{n: self.regs[n] for n in names}, **extra})
        self.breaks.append(found)
        if self.report is not None:
            self.report(found.line())
        if self.strict:
            raise DriverRuleBroken(found.line())

    def profiling_started(self) -> None:
        """Profiling became enabled (StatisticalProfilingEnabled() turned TRUE): the pointer
        rules of §3.4.1."""
        self.synced = False
        ptr, limit = self.regs["PMBPTR_EL1"], self.regs["PMBLIMITR_EL1"] & self._limit
        if ptr % self._align:
            self._broken("ptr-align", "PMBPTR_EL1", "PMBIDR_EL1")
        if ptr + self._max_record > limit:
            self._broken("ptr-room", "PMBPTR_EL1", "PMBLIMITR_EL1", "PMSIDR_EL1")
        if ptr & TOP_BYTE != limit & TOP_BYTE:
            self._broken("top-byte", "PMBPTR_EL1", "PMBLIMITR_EL1")

    def psb_csync(self, profiling_enabled: bool) -> None:
        """A PSB CSYNC executed; ``profiling_enabled``: at its Exception level."""
        if not profiling_enabled:
            self.synced = True

    def pmbptr_written(self, value: int, profiling_enabled: bool) -> None:
        """A direct write of ``value`` to PMBPTR_EL1 (before it takes effect)."""
        if profiling_enabled:
            self._broken("ptr-write-enabled", "PMBPTR_EL1", "PMSCR_EL1", "PMBLIMITR_EL1",
                         written=value)

    def pmbptr_read(self, profiling_enabled: bool) -> None:
        """A direct read of PMBPTR_EL1."""
        if ((profiling_enabled or not self.synced)
                and self.psb_visible(self.pc() if self.pc else 0)):
            self._broken("ptr-read-unsynced", "PMBPTR_EL1", "PMBSR_EL1")
