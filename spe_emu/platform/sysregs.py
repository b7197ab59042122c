"""The system-register registry: each owner (the SPU, the GIC CPU interface, the generic
timer, ...) registers its table; the trap dispatcher looks registers up here and names no
owner (QEMU's ``define_arm_cp_regs``: the GIC registers its own ICC_* cpregs).

An owner implements :class:`SysregOwner`. Its access checks are pure functions on the
register entries (:attr:`spe_emu.sysreg.RegisterSpec.check`) returning an
:class:`~spe_emu.sysreg.Access` verdict; the dispatcher (``Machine._emulate_sysreg``) turns a
verdict into UNDEFINED or a trap with the right syndrome (Arm ARM D19.2.2 EC 0x18).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import RegisterTableError
from ..sysreg import Access, RegisterSpec, RegisterTable, Replan


class AlwaysPresent:
    """The :class:`SysregOwner` defaults of an owner whose registers always exist and whose
    access checks need nothing beyond the PE's context (the GIC's ICC_*, FEAT_RAS)."""

    @staticmethod
    def present() -> bool:
        return True

    @staticmethod
    def context(ctx: Any) -> Any:
        return ctx


class SysregOwner(Protocol):
    """What an owner of system registers provides.

    Attributes:
        table: its registers.
        via_undef: True when QEMU does not know the registers (every access UNDEFs in Unicorn
            and is emulated from the exception hook: SPE, ICC_*); False when QEMU knows them
            and the MRS/MSR instruction hook supplies the value (the generic timer), except
            the names in an optional ``UNKNOWN_TO_QEMU`` set.

    An optional ``COUNTER_READ_NEUTRAL`` set names the registers whose writes change neither
    whether a read of CNTPCT_EL0 or CNTVCT_EL0 is permitted nor the value it returns (the
    machine keeps its native counter-read table across them).
    """

    via_undef: bool

    def present(self) -> bool:
        """Whether the registers exist (e.g. PMSVer != 0); absent ones are UNDEFINED."""

    def context(self, ctx: Any) -> Any:
        """The access checks' input: ``ctx``, with whatever control state the owner keeps
        itself (the generic timer adds CNTKCTL_EL1 and CNTHCTL_EL2)."""

    def sysreg_read(self, name: str, ctx: Any) -> int:
        """The value an MRS of register ``name`` returns (the access check passed)."""

    def sysreg_write(self, name: str, value: int, ctx: Any) -> None:
        """Perform an MSR of ``value`` to register ``name`` (the access check passed)."""


@dataclass(frozen=True, slots=True)
class SysregEntry:
    """One registered register: its owner, its declaration and what a write to it may change
    for the run loop."""

    owner: SysregOwner
    spec: RegisterSpec
    replan: Replan
    via_undef: bool
    """Accesses arrive through UNDEF (QEMU does not know the register), else through the
    MRS/MSR instruction hook."""
    counter_read_neutral: bool = False
    """A write changes no counter read (the owner's ``COUNTER_READ_NEUTRAL``)."""

    def verdict(self, is_read: bool, ctx: Any) -> Access:
        """The access verdict: UNDEFINED when the owner's registers are absent or for a write
        to a read-only register, else the register's own check (pure)."""
        if not self.owner.present():
            return Access.UNDEFINED
        if not is_read and self.spec.read_only:
            return Access.UNDEFINED
        return self.spec.check(self.owner.context(ctx), is_read)


class SysregRegistry:
    """Registered system registers by encoding (op0, op1, CRn, CRm, op2)."""

    def __init__(self) -> None:
        self._by_enc: dict[tuple[int, int, int, int, int], SysregEntry] = {}

    def register(self, owner: SysregOwner, table: RegisterTable,
                 replan: Replan = Replan.NONE) -> None:
        """Add every register of ``table``, owned by ``owner``; ``replan`` is the default for
        registers that do not declare their own.

        Raises:
            RegisterTableError: an encoding is registered already.
        """
        for spec in table:
            enc = spec.encoding.tuple
            if enc in self._by_enc:
                raise RegisterTableError(f"{spec.name} ({spec.encoding}) is registered already "
                                         f"as {self._by_enc[enc].spec.name}")
            via_undef = owner.via_undef or spec.name in getattr(owner, "UNKNOWN_TO_QEMU", ())
            self._by_enc[enc] = SysregEntry(
                owner, spec, spec.replan or replan, via_undef,
                spec.name in getattr(owner, "COUNTER_READ_NEUTRAL", ()))

    def entries(self):
        """Every ((op0, op1, CRn, CRm, op2), entry) registered, in registration order."""
        return self._by_enc.items()

    def lookup(self, enc: tuple[int, int, int, int, int]) -> SysregEntry | None:
        """The entry at ``enc``, or None when no owner registered it."""
        return self._by_enc.get(enc)
