"""Read the exception QEMU raised: syndrome, fault address and target Exception level.

Unicorn tells an INTR hook only QEMU's exception number. QEMU has, however, already computed
the architectural syndrome (ESR_ELx value), the fault address (FAR_ELx) and the target EL --
with all its trap controls (HCR_EL2.TGE/TSC/TVM/TID3, MDCR_EL2.TDE, SCTLR_EL1.UMA, CNTKCTL_EL1,
...) -- into ``CPUARMState.exception``, which ``uc_context_save()`` copies. Rather than
re-deriving what QEMU knows, spe_emu reads it back.

The field's offset inside the saved context depends on how libunicorn was built, so it is not
hard-coded: :func:`exception_layout` finds it once per process by raising two SVCs with known
immediates on a scratch engine and locating their syndromes (EC 0x15, IL 1, ISS = imm16); the
rest of ``struct { u32 syndrome; u32 fsr; u64 vaddress; u32 target_el; }`` follows. If the probe
fails, :class:`spe_emu.errors.GuestError` explains why (no silent guess).
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass
from functools import lru_cache

from unicorn import UC_ARCH_ARM64, UC_HOOK_INTR, UC_MODE_ARM, Uc
from unicorn import arm64_const as A

from ..errors import GuestError
from .exceptions import EC, ISS_SVC, esr

_EXC = struct.Struct("<IIQI")  # syndrome, fsr, vaddress, target_el
_PROBE_BASE = 0x1000
_PROBE_IMMS = (0x1234, 0xBEEF)


@dataclass(frozen=True, slots=True)
class QemuException:
    """``CPUARMState.exception`` after QEMU raised an exception.

    Attributes:
        syndrome: the ESR_ELx value (EC, IL, ISS).
        vaddress: the faulting virtual address (FAR_ELx) for aborts and watchpoints.
        target_el: the Exception level QEMU routed the exception to.
    """

    syndrome: int
    vaddress: int
    target_el: int


def _svc(imm: int) -> bytes:
    return struct.pack("<I", 0xD4000001 | imm << 5)  # SVC #imm


@lru_cache(maxsize=1)
def exception_layout() -> int:
    """Offset of ``CPUARMState.exception`` inside a Unicorn AArch64 context buffer (bytes).

    Raises:
        GuestError: the probe could not find the field.
    """
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    uc.ctl_set_cpu_model(A.UC_CPU_ARM64_MAX)
    uc.mem_map(_PROBE_BASE, 0x1000)
    uc.mem_write(_PROBE_BASE, b"".join(_svc(i) for i in _PROBE_IMMS))
    context = uc.context_save()
    snapshots: list[bytes] = []

    def hook(u: Uc, intno: int, _data) -> None:
        u.context_update(context)
        snapshots.append(ctypes.string_at(context._context, context._size))
        u.emu_stop()

    uc.hook_add(UC_HOOK_INTR, hook)
    for _ in _PROBE_IMMS:
        uc.emu_start(uc.reg_read(A.UC_ARM64_REG_PC) if snapshots else _PROBE_BASE, 0)
    candidates = None
    for raw, imm in zip(snapshots, _PROBE_IMMS):
        needle = struct.pack("<I", esr(EC.SVC64, ISS_SVC.make(imm16=imm)))
        found = {i for i in range(0, len(raw) - _EXC.size, 4) if raw[i:i + 4] == needle}
        candidates = found if candidates is None else candidates & found
    offsets = sorted(o for o in candidates or ()
                     if _EXC.unpack_from(snapshots[0], o)[3] == 1)  # SVC at EL1 -> EL1
    if len(offsets) != 1:
        raise GuestError(f"cannot locate QEMU's exception syndrome in Unicorn's CPU context "
                         f"(candidates {offsets}); this libunicorn build is not supported")
    return offsets[0]


class ExceptionReader:
    """Reads ``CPUARMState.exception`` of one engine (one context buffer, reused)."""

    def __init__(self, uc: Uc):
        self.uc = uc
        self.offset = exception_layout()
        self.context = uc.context_save()

    def read(self) -> QemuException:
        """The exception QEMU just raised (call from an INTR hook)."""
        self.uc.context_update(self.context)
        raw = ctypes.string_at(self.context._context.value + self.offset, _EXC.size)
        syndrome, _fsr, vaddress, target_el = _EXC.unpack(raw)
        return QemuException(syndrome, vaddress, target_el)
