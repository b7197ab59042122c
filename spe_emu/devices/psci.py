"""PSCI 1.1 and the SMCCC 1.1 Arm Architecture calls, answered as a boot firmware would for a
system with one PE or several (:class:`PowerDomains`).

References: Arm DEN 0022D.b, *Arm Power State Coordination Interface* (PSCI 1.1; issue E
describes the same 1.1 interface), chapter 5 (the function prototypes of §5.1 give every
function's arguments and return values; section numbers below are per function); Arm DEN 0028,
*SMC Calling Convention* (SMCCC), v1.1 and later: Function Identifier layout, register use,
the Arm Architecture Service calls SMCCC_VERSION and SMCCC_ARCH_FEATURES.

Model
-----
* :class:`Psci` is pure: :meth:`Psci.call` maps (function identifier, x1..x3, the calling PE)
  to a :class:`PsciResult`: a value for W0/X0, or an action the machine performs (power off,
  reset request, standby, the caller off). It keeps no state: with one PE, that PE is always
  ON; with several, the machine answers for their power states (:class:`PowerDomains`:
  CPU_ON starts a PE at the entry point with the context id in X0, CPU_OFF turns the caller
  off while another PE is on, AFFINITY_INFO reads a PE's state).
* Register use (SMCCC, "Register use in AArch64 SMC and HVC calls"): the Function Identifier
  is W0 (the upper half of X0 is ignored); PSCI returns its one result in W0/X0 and defines no
  other result register. SMCCC v1.1 requires X4..X17 to be preserved and leaves unused
  result registers X1..X3 UNKNOWN: the machine writes X0 only and leaves every other register
  as it was (what QEMU 7.2 does, checked by tests/test_psci.py). The result is a signed
  32-bit value, sign-extended into X0 (:attr:`PsciResult.x0_value`), as QEMU writes it.
* SMC32 functions (Function Identifier bit 30 = 0) use the low 32 bits of X1..X3 (SMCCC:
  SMC32 arguments are W registers); SMC64 functions use all 64 bits and, called from AArch32,
  are unknown functions (NOT_SUPPORTED).
* An unknown or unimplemented Function Identifier returns NOT_SUPPORTED (-1) in W0 (SMCCC's
  "Unknown Function Identifier").
* Implemented: PSCI_VERSION (1.1), CPU_SUSPEND (original power_state format; every valid
  request is entered as standby, powerdown requests downgraded to standby, as §5.4 allows),
  CPU_OFF (the run ends: exit status 0, reason ``"cpu-off"``: with one PE nothing is left
  running), CPU_ON (the PE is ON: ALREADY_ON for its own MPIDR, INVALID_PARAMETERS for any
  other), AFFINITY_INFO (ON for the PE at level 0; INVALID_PARAMETERS for any other target and
  for levels above 0, which PSCI 1.0+ makes optional), MIGRATE_INFO_TYPE (2: no Trusted OS),
  SYSTEM_OFF (exit status 0, reason ``"system-off"``), SYSTEM_RESET (a reset request),
  PSCI_FEATURES, SMCCC_VERSION (1.1) and SMCCC_ARCH_FEATURES. Every other PSCI function
  (MIGRATE, MIGRATE_INFO_UP_CPU and the optional 1.0/1.1 functions) is NOT_SUPPORTED.
* Differences from QEMU 7.2 (``target/arm/psci.c``), all in tests/test_psci.py: QEMU answers
  SMCCC_VERSION, SMCCC_ARCH_FEATURES and PSCI_FEATURES(SMCCC_*) with NOT_SUPPORTED (SMCCC
  1.0); AFFINITY_INFO with a level above 0 returns ON there; QEMU compares all 64 bits of X0
  with the Function Identifiers and checks a CPU_ON entry point's alignment before finding
  the target ON (INVALID_PARAMETERS for a misaligned entry to an ON PE).

Conduit (:func:`psci_conduit`): the instruction the device tree's ``/psci`` node names
(``method``) and the machine answers with this model instead of taking the exception.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

from ..arch.smccc import (
    OEN_ARM_ARCHITECTURE,
    OEN_STANDARD_SECURE,
    function_id,
    mpidr_affinity,
)
from ..errors import ConfigError
from ..sysreg import MASK64, layout

MASK32 = 0xFFFF_FFFF

# ---------------------------------------------------------------------------------------------
# Encodings
# ---------------------------------------------------------------------------------------------

VERSION = layout("version", "Major 30:16", "Minor 15:0")
"""PSCI_VERSION and SMCCC_VERSION results (bit 31 zero)."""
POWER_STATE = layout("power_state", "PowerLevel 25:24", "StateType 16", "StateID 15:0")
"""CPU_SUSPEND power_state, original format (DEN 0022D.b §5.4.2); other bits are reserved."""

PSCI_VERSION_1_1 = VERSION.make(Major=1, Minor=1)
SMCCC_VERSION_1_1 = VERSION.make(Major=1, Minor=1)


class PsciReturn(enum.IntEnum):
    """PSCI return codes (DEN 0022D.b §5.2.2, "Return error codes")."""

    SUCCESS = 0
    NOT_SUPPORTED = -1
    INVALID_PARAMETERS = -2
    DENIED = -3
    ALREADY_ON = -4
    ON_PENDING = -5
    INTERNAL_FAILURE = -6
    NOT_PRESENT = -7
    DISABLED = -8
    INVALID_ADDRESS = -9


class AffinityState(enum.IntEnum):
    """AFFINITY_INFO results (DEN 0022D.b §5.1.5)."""

    ON = 0
    OFF = 1
    ON_PENDING = 2


class MigrateInfoType(enum.IntEnum):
    """MIGRATE_INFO_TYPE results (DEN 0022D.b §5.1.7)."""

    UNIPROCESSOR_MIGRATE_CAPABLE = 0
    UNIPROCESSOR_NOT_MIGRATE_CAPABLE = 1
    NOT_PRESENT_OR_NO_MIGRATION = 2


@dataclass(frozen=True)
class Function:
    """One function of the interface, declared once.

    Attributes:
        name: as the specification spells it.
        oen: owning entity (:data:`OEN_STANDARD_SECURE` for PSCI).
        number: the function number (Function Identifier bits 15:0).
        smc64: the specification also defines an SMC64 Function Identifier.
        section: where the function is specified.
        handler: the :class:`Psci` method answering it; None: not implemented.
    """

    name: str
    oen: int
    number: int
    smc64: bool
    section: str
    handler: str | None = None

    @property
    def fid32(self) -> int:
        """The SMC32 Function Identifier."""
        return function_id(self.oen, self.number)

    @property
    def fid64(self) -> int | None:
        """The SMC64 Function Identifier, or None when the function has none."""
        return function_id(self.oen, self.number, True) if self.smc64 else None


_S = OEN_STANDARD_SECURE
_A = OEN_ARM_ARCHITECTURE
FUNCTIONS: tuple[Function, ...] = (
    Function("PSCI_VERSION", _S, 0x00, False, "DEN 0022D.b §5.1.1", "_psci_version"),
    Function("CPU_SUSPEND", _S, 0x01, True, "DEN 0022D.b §5.1.2, §5.4", "_cpu_suspend"),
    Function("CPU_OFF", _S, 0x02, False, "DEN 0022D.b §5.1.3", "_cpu_off"),
    Function("CPU_ON", _S, 0x03, True, "DEN 0022D.b §5.1.4", "_cpu_on"),
    Function("AFFINITY_INFO", _S, 0x04, True, "DEN 0022D.b §5.1.5", "_affinity_info"),
    Function("MIGRATE", _S, 0x05, True, "DEN 0022D.b §5.1.6"),
    Function("MIGRATE_INFO_TYPE", _S, 0x06, False, "DEN 0022D.b §5.1.7",
             "_migrate_info_type"),
    Function("MIGRATE_INFO_UP_CPU", _S, 0x07, True, "DEN 0022D.b §5.1.8"),
    Function("SYSTEM_OFF", _S, 0x08, False, "DEN 0022D.b §5.1.9", "_system_off"),
    Function("SYSTEM_RESET", _S, 0x09, False, "DEN 0022D.b §5.1.10", "_system_reset"),
    Function("PSCI_FEATURES", _S, 0x0A, False, "DEN 0022D.b §5.1.14", "_psci_features"),
    Function("CPU_FREEZE", _S, 0x0B, False, "DEN 0022D.b §5.1.15"),
    Function("CPU_DEFAULT_SUSPEND", _S, 0x0C, True, "DEN 0022D.b §5.1.16"),
    Function("NODE_HW_STATE", _S, 0x0D, True, "DEN 0022D.b §5.1.17"),
    Function("SYSTEM_SUSPEND", _S, 0x0E, True, "DEN 0022D.b §5.1.18"),
    Function("PSCI_SET_SUSPEND_MODE", _S, 0x0F, False, "DEN 0022D.b §5.1.19"),
    Function("PSCI_STAT_RESIDENCY", _S, 0x10, True, "DEN 0022D.b §5.1.20"),
    Function("PSCI_STAT_COUNT", _S, 0x11, True, "DEN 0022D.b §5.1.21"),
    Function("SYSTEM_RESET2", _S, 0x12, True, "DEN 0022D.b §5.1.11"),
    Function("MEM_PROTECT", _S, 0x13, False, "DEN 0022D.b §5.1.12"),
    Function("MEM_PROTECT_CHECK_RANGE", _S, 0x14, True, "DEN 0022D.b §5.1.13"),
    Function("SMCCC_VERSION", _A, 0x0000, False, "DEN 0028 SMCCC_VERSION (v1.1+)",
             "_smccc_version"),
    Function("SMCCC_ARCH_FEATURES", _A, 0x0001, False, "DEN 0028 SMCCC_ARCH_FEATURES (v1.1+)",
             "_smccc_arch_features"),
    Function("SMCCC_ARCH_SOC_ID", _A, 0x0002, False, "DEN 0028 SMCCC_ARCH_SOC_ID (v1.2)"),
    Function("SMCCC_ARCH_WORKAROUND_1", _A, 0x8000, False, "DEN 0028 (v1.1)"),
    Function("SMCCC_ARCH_WORKAROUND_2", _A, 0x7FFF, False, "DEN 0028 (v1.1)"),
    Function("SMCCC_ARCH_WORKAROUND_3", _A, 0x3FFF, False, "DEN 0028 (v1.3)"),
)
"""Every function the model knows by name; the ones without a handler answer NOT_SUPPORTED,
as unknown Function Identifiers do."""

BY_NAME = {f.name: f for f in FUNCTIONS}
_BY_FID: dict[int, tuple[Function, bool]] = {}
for _f in FUNCTIONS:
    _BY_FID[_f.fid32] = (_f, False)
    if _f.fid64 is not None:
        _BY_FID[_f.fid64] = (_f, True)


def fid(name: str, smc64: bool = False) -> int:
    """The Function Identifier of function ``name`` (SMC64 if ``smc64``).

    Raises:
        KeyError: no such function, or it has no SMC64 identifier.
    """
    f = BY_NAME[name]
    if smc64 and f.fid64 is None:
        raise KeyError(f"{name} has no SMC64 Function Identifier")
    return f.fid64 if smc64 else f.fid32


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


class PsciAction(enum.Enum):
    """What the machine does with a call besides writing X0."""

    RETURN = "return"        # write X0, continue after the HVC/SMC
    STANDBY = "standby"      # wait as WFI does (may end at once), then X0 = SUCCESS
    POWER_OFF = "power-off"  # end the run with exit_status; the call does not return
    CPU_OFF = "cpu-off"      # the calling PE turns off, the others run on; does not return
    RESET = "reset"          # system reset request; the call does not return


@dataclass(frozen=True)
class PsciResult:
    """The outcome of one call.

    Attributes:
        x0: the signed 32-bit result for W0/X0 (None: the call does not return).
        action: :class:`PsciAction`.
        reason: for POWER_OFF/RESET: ``"system-off"``, ``"cpu-off"`` or ``"system-reset"``.
        exit_status: for POWER_OFF: the run's exit status (0).
    """

    x0: int | None
    action: PsciAction = PsciAction.RETURN
    reason: str = ""
    exit_status: int | None = None

    @property
    def x0_value(self) -> int | None:
        """The 64-bit value for X0: :attr:`x0` sign-extended (None if the call does not
        return)."""
        return None if self.x0 is None else self.x0 & MASK64


def _ret(value: int) -> PsciResult:
    return PsciResult(int(value))


@dataclass(frozen=True)
class PeState:
    """The calling PE as PSCI sees it.

    Attributes:
        mpidr: its MPIDR_EL1 (default: affinity 0.0.0.0, bit 31 RES1, U = 0).
        aarch64: the caller is in AArch64 state (SMC64 functions exist only for it).
    """

    mpidr: int = 0x8000_0000
    aarch64: bool = True

    @property
    def affinity(self) -> int:
        """The PE's affinity in the target_cpu layout (:func:`spe_emu.arch.smccc.mpidr_affinity`)."""
        return mpidr_affinity(self.mpidr)


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------


class PowerDomains:
    """The PEs of a several-PE machine as PSCI sees them (the machine implements it:
    :class:`spe_emu.cpu.smp.Smp`). Only level 0 (the PEs themselves) is a power domain."""

    def affinity_state(self, target: int) -> AffinityState | None:
        """The state of the PE whose affinity (target_cpu layout) is ``target``, or None when
        no PE has it."""
        raise NotImplementedError

    def cpu_on(self, target: int, entry: int, context: int) -> PsciReturn:
        """Start the OFF PE ``target`` at ``entry`` with ``context`` in X0 (§5.1.4, §6.4);
        SUCCESS, or ON_PENDING while a start is pending."""
        raise NotImplementedError

    def others_on(self, caller: int) -> bool:
        """Whether a PE other than ``caller`` (an affinity) is ON."""
        raise NotImplementedError


class Psci:
    """PSCI 1.1 firmware for one PE, or for the PEs of ``domains`` (see the module
    docstring)."""

    def __init__(self, domains: PowerDomains | None = None):
        self.domains = domains

    def call(self, function_id: int, args: tuple[int, int, int],
             pe_state: PeState | None = None) -> PsciResult:
        """Answer the call whose Function Identifier is ``function_id`` (W0; bits 63:32 of
        X0 are ignored) with ``args`` = (X1, X2, X3) from the PE ``pe_state`` (default: the
        one PE, in AArch64 state)."""
        pe = pe_state or PeState()
        entry = _BY_FID.get(function_id & MASK32)
        if entry is None:
            return _ret(PsciReturn.NOT_SUPPORTED)
        function, is64 = entry
        if function.handler is None or (is64 and not pe.aarch64):
            return _ret(PsciReturn.NOT_SUPPORTED)
        mask = MASK64 if is64 else MASK32
        x1, x2, x3 = (a & mask for a in args)
        handler: Callable[[int, int, int, PeState], PsciResult]
        handler = getattr(self, function.handler)
        return handler(x1, x2, x3, pe)

    def implemented(self, function_id: int, pe_state: PeState | None = None) -> bool:
        """Whether ``function_id`` names a function this model implements for the caller."""
        pe = pe_state or PeState()
        entry = _BY_FID.get(function_id & MASK32)
        return (entry is not None and entry[0].handler is not None
                and (not entry[1] or pe.aarch64))

    # -- PSCI functions ---------------------------------------------------------------------

    def _psci_version(self, x1: int, x2: int, x3: int, pe: PeState) -> PsciResult:
        """§5.1.1: Major [30:16], Minor [15:0]: 1.1."""
        return _ret(PSCI_VERSION_1_1)

    def _cpu_suspend(self, power_state: int, entry: int, context: int,
                     pe: PeState) -> PsciResult:
        """§5.1.2, §5.4: original power_state format (PSCI_FEATURES says so). Reserved bits
        set or a PowerLevel above 0 (the PE is the only power domain) are INVALID_PARAMETERS;
        any StateID is accepted, and the request, standby or powerdown, is entered as
        standby (§5.4: an implementation may downgrade a powerdown request; the call then
        returns SUCCESS at the instruction after it)."""
        if (power_state & ~POWER_STATE.field_mask
                or POWER_STATE.get(power_state, "PowerLevel")):
            return _ret(PsciReturn.INVALID_PARAMETERS)
        return PsciResult(int(PsciReturn.SUCCESS), PsciAction.STANDBY)

    def _cpu_off(self, x1: int, x2: int, x3: int, pe: PeState) -> PsciResult:
        """§5.1.3: the calling PE powers down and the call does not return. While another PE
        is ON, only the caller stops (:attr:`PsciAction.CPU_OFF`); when nothing would run any
        more, the run ends (exit status 0, reason "cpu-off")."""
        if self.domains is not None and self.domains.others_on(pe.affinity):
            return PsciResult(None, PsciAction.CPU_OFF, "cpu-off")
        return PsciResult(None, PsciAction.POWER_OFF, "cpu-off", 0)

    def _cpu_on(self, target_cpu: int, entry: int, context: int, pe: PeState) -> PsciResult:
        """§5.1.4: a target_cpu that names no PE is INVALID_PARAMETERS; an ON PE (the caller
        itself, with one PE the only one) ALREADY_ON, one being started ON_PENDING; an
        entry point that is not a multiple of 4 (no A64 instruction there) INVALID_ADDRESS;
        else the OFF PE starts (SUCCESS)."""
        if self.domains is None:
            state = AffinityState.ON if target_cpu == pe.affinity else None
        else:
            state = self.domains.affinity_state(target_cpu)
        if state is None:
            return _ret(PsciReturn.INVALID_PARAMETERS)
        if state is AffinityState.ON:
            return _ret(PsciReturn.ALREADY_ON)
        if state is AffinityState.ON_PENDING:
            return _ret(PsciReturn.ON_PENDING)
        if entry % 4:
            return _ret(PsciReturn.INVALID_ADDRESS)
        return _ret(self.domains.cpu_on(target_cpu, entry, context))

    def _affinity_info(self, target: int, level: int, x3: int, pe: PeState) -> PsciResult:
        """§5.1.5: the state of the PE at lowest_affinity_level 0 (with one PE: ON); levels
        above 0 (optional from PSCI 1.0) are not supported and, like a target that names no
        PE, are INVALID_PARAMETERS."""
        if level != 0:
            return _ret(PsciReturn.INVALID_PARAMETERS)
        if self.domains is None:
            state = AffinityState.ON if target == pe.affinity else None
        else:
            state = self.domains.affinity_state(target)
        if state is None:
            return _ret(PsciReturn.INVALID_PARAMETERS)
        return _ret(state)

    def _migrate_info_type(self, x1: int, x2: int, x3: int, pe: PeState) -> PsciResult:
        """§5.1.7: no Trusted OS, so no migration is needed (2)."""
        return _ret(MigrateInfoType.NOT_PRESENT_OR_NO_MIGRATION)

    def _system_off(self, x1: int, x2: int, x3: int, pe: PeState) -> PsciResult:
        """§5.1.9: the system powers off (exit status 0); the call does not return."""
        return PsciResult(None, PsciAction.POWER_OFF, "system-off", 0)

    def _system_reset(self, x1: int, x2: int, x3: int, pe: PeState) -> PsciResult:
        """§5.1.10: a cold reset of the system is requested; the call does not return."""
        return PsciResult(None, PsciAction.RESET, "system-reset")

    def _psci_features(self, queried: int, x2: int, x3: int, pe: PeState) -> PsciResult:
        """§5.1.14: 0 for every implemented function (for CPU_SUSPEND: bit 1 = 0, original
        power_state format; bit 0 = 0, no OS-initiated mode), including SMCCC_VERSION (DEN
        0028: PSCI_FEATURES discovers it) and SMCCC_ARCH_FEATURES; NOT_SUPPORTED otherwise,
        and for SMC64 functions when the caller is in AArch32 state."""
        if self.implemented(queried, pe):
            return _ret(PsciReturn.SUCCESS)
        return _ret(PsciReturn.NOT_SUPPORTED)

    # -- SMCCC Arm Architecture calls --------------------------------------------------------

    def _smccc_version(self, x1: int, x2: int, x3: int, pe: PeState) -> PsciResult:
        """DEN 0028 SMCCC_VERSION: 1.1 (Major [30:16], Minor [15:0])."""
        return _ret(SMCCC_VERSION_1_1)

    def _smccc_arch_features(self, queried: int, x2: int, x3: int, pe: PeState) -> PsciResult:
        """DEN 0028 SMCCC_ARCH_FEATURES: 0 for the implemented Arm Architecture calls
        (SMCCC_VERSION, SMCCC_ARCH_FEATURES), NOT_SUPPORTED for the others (SoC ID and the
        ARCH_WORKAROUND_n calls) and for anything outside the Arm Architecture range."""
        entry = _BY_FID.get(queried)
        if (entry is not None and entry[0].oen == OEN_ARM_ARCHITECTURE
                and self.implemented(queried, pe)):
            return _ret(PsciReturn.SUCCESS)
        return _ret(PsciReturn.NOT_SUPPORTED)


# ---------------------------------------------------------------------------------------------
# Conduit
# ---------------------------------------------------------------------------------------------


def psci_conduit(boot_el: int) -> str | None:
    """The PSCI conduit of a machine whose software starts at ``boot_el``: the instruction the
    device tree's ``/psci`` node names (``method``) and the machine answers with :class:`Psci`.

    * 1: ``"hvc"``. Nothing runs at EL2, so the machine acts as the hypervisor-level
      firmware; as QEMU's ``virt`` without ``virtualization=on`` (no EL2: HVC conduit).
    * 2: ``"smc"``. The software owns EL2 and calls the firmware below it with SMC; as
      QEMU's ``virt,virtualization=on`` (EL2 present, no EL3 firmware: SMC conduit).
    * 3: None. The software entered at EL3 is the firmware and implements PSCI itself, so the
      machine answers nothing; as QEMU's ``virt,secure=on`` with a firmware loaded (its own
      PSCI emulation disabled).

    HVC and SMC at EL0 are UNDEFINED whatever the conduit (Arm ARM), and the other instruction
    keeps its architectural behaviour.

    Raises:
        ConfigError: ``boot_el`` is not 1, 2 or 3.
    """
    conduits = {1: "hvc", 2: "smc", 3: None}
    if boot_el not in conduits:
        raise ConfigError(f"boot_el={boot_el!r}: must be 1, 2 or 3")
    return conduits[boot_el]
