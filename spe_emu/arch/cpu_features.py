"""CPU feature choices of the board: which ID register fields the PE presents beyond those of
Unicorn's CPU (QEMU 5.0's ``max``), and the behaviour that goes with them (docs/linux.md
"Board options", docs/model.md).

Unicorn's CPU reports ID_AA64PFR0_EL1.CSV3 = 0 and ID_AA64MMFR2_EL1.E0PD = 0, and its MIDR_EL1
(0x000F0510) is on no list of CPUs Linux knows to be safe from Meltdown. Linux then unmaps the
kernel at EL0 (KPTI; always when KASLR is active, which the RNDR-seeded boot makes it), and
its ``arm_spe_pmu`` driver refuses to probe ("profiling buffer inaccessible. Try passing
kpti=off"): a profiling buffer in the kernel's address space cannot be written while EL0
runs without it. A CPU that is not affected by Meltdown and implements FEAT_E0PD is what the
kernel needs to keep the kernel mapped (arch/arm64/kernel/cpufeature.c: ``unmap_kernel_at_el0``
defers to CSV3, ``kaslr_requires_kpti`` to E0PD), so these are the board's defaults:

- ``csv3``: ID_AA64PFR0_EL1.CSV3 = 1 (FEAT_CSV3: data loaded under speculation with a
  permission or domain fault cannot be used to form an address or generate condition codes
  -- trivially true of an emulator, which does not speculate).
- ``e0pd``: ID_AA64MMFR2_EL1.E0PD = 1 (FEAT_E0PD, Arm ARM D8 "FEAT_E0PD"; TCR_EL1.E0PD0 and
  E0PD1): with TCR_EL1.E0PDn = 1, an unprivileged access (from EL0, or LDTR/STTR at EL1
  without PSTATE.UAO) to an address the TTBRn_EL1 half translates is a level 0 Translation
  fault, whatever the translation tables and TLBs hold (the fault takes the same time as a
  TLB miss would). Implemented by :func:`e0pd_fault` on the abort Unicorn raises.

- ``tgran16``: ID_AA64MMFR0_EL1.TGran16 = 0b0001 (the 16 KiB translation granule, without
  52-bit addresses) and the stage 2 fields TGran4_2, TGran16_2, TGran64_2 = 0b0010 (each
  granule supported at stage 2). Unicorn's CPU (QEMU 5.0's ``max``, built on the Cortex-A57's
  ID values) reports TGran16 = 0b0000 although its table walker, as spe_emu's own
  (:mod:`spe_emu.arch.mmu`), handles 4, 16 and 64 KiB granules at both stages; a kernel built
  for 16 KiB pages (Debian's ``linux-image-*-arm64-16k``) stops in its early boot code
  without it. QEMU 7.2's ``max`` presents 16 KiB too.

Optionally hidden (a CPU without the feature):

- ``pauth``: FEAT_PAuth. With ``pauth=False`` ID_AA64ISAR1_EL1.{APA, API, GPA, GPI} and
  ID_AA64ISAR2_EL1.{APA3, GPA3} read 0, so software (Linux: ``system_supports_address_auth``)
  leaves SCTLR_EL1.{EnIA, EnIB, EnDA, EnDB} clear and the pointer authentication instructions
  of the HINT space (PACIASP, AUTIASP...) are NOPs (QEMU then translates them as NOPs: no
  emulated QARMA). The PAuth instructions outside the HINT space (PACIA Xd, Xn; AUTIA;
  RETAA; LDRAA...) still execute as with the keys disabled instead of being UNDEFINED (a
  known limitation; Linux and Debian's user space do not use them on a CPU without PAuth).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ..errors import ConfigError
from .id_regs import (ID_AA64ISAR1_EL1, ID_AA64ISAR2_EL1, ID_AA64MMFR0_EL1, ID_AA64MMFR2_EL1,
                      ID_AA64PFR0_EL1, MIDR_EL1)
from .mmu import TCR_EL1

TGRAN16_SUPPORTED = 0b0001   # ID_AA64MMFR0_EL1.TGran16: 16 KiB granule (no FEAT_LPA2)
TGRAN_2_SUPPORTED = 0b0010   # ID_AA64MMFR0_EL1.TGran*_2: the granule is supported at stage 2

PAUTH_FIELDS = ((ID_AA64ISAR1_EL1, ("APA", "API", "GPA", "GPI")),
                (ID_AA64ISAR2_EL1, ("APA3", "GPA3")))
"""The ID register fields that advertise FEAT_PAuth (Arm ARM D19.2; QARMA5, IMPLEMENTATION
DEFINED algorithm, QARMA3)."""


@dataclass(frozen=True)
class CpuFeatures:
    """The board's CPU feature choices (IMPLEMENTATION DEFINED presentation; all booleans).

    Attributes:
        csv3: present ID_AA64PFR0_EL1.CSV3 = 1 (default True).
        e0pd: present ID_AA64MMFR2_EL1.E0PD = 1 and implement TCR_EL1.E0PD0/E0PD1
            (default True).
        tgran16: present the 16 KiB granule (ID_AA64MMFR0_EL1.TGran16 = 1) and each
            granule at stage 2 (TGran4_2/16_2/64_2 = 2) (default True).
        pauth: present FEAT_PAuth as Unicorn's CPU implements it (QARMA5 for the A keys:
            APA = 1, GPA = 1); False hides it (default True).
        midr: the MIDR_EL1 the PE presents (None: Unicorn's CPU's, 0x000F0510); a core preset
            sets it (``spe-emu run --core``, :mod:`spe_emu.arch.cores`).
    """

    csv3: bool = True
    e0pd: bool = True
    tgran16: bool = True
    pauth: bool = True
    midr: int | None = None

    NAMES = ("csv3", "e0pd", "tgran16", "pauth")

    @property
    def presented(self) -> frozenset[tuple[int, int, int, int, int]]:
        """Encodings of the ID registers whose value :meth:`present` may change."""
        return frozenset({ID_AA64PFR0_EL1.encoding.tuple, ID_AA64MMFR0_EL1.encoding.tuple,
                          ID_AA64MMFR2_EL1.encoding.tuple,
                          ID_AA64ISAR1_EL1.encoding.tuple, ID_AA64ISAR2_EL1.encoding.tuple}
                         | ({MIDR_EL1.encoding.tuple} if self.midr is not None else set()))

    def present(self, enc: tuple[int, int, int, int, int], value: int) -> int:
        """The value the guest reads from the ID register ``enc`` given the value of Unicorn's
        CPU (``value``, 64 bits); unchanged for a register not in :attr:`presented`."""
        if enc == MIDR_EL1.encoding.tuple and self.midr is not None:
            value = self.midr
        elif enc == ID_AA64PFR0_EL1.encoding.tuple and self.csv3:
            value = ID_AA64PFR0_EL1.set(value, "CSV3", 1)
        elif enc == ID_AA64MMFR0_EL1.encoding.tuple and self.tgran16:
            value = ID_AA64MMFR0_EL1.set(value, "TGran16", TGRAN16_SUPPORTED)
            for name in ("TGran4_2", "TGran16_2", "TGran64_2"):
                value = ID_AA64MMFR0_EL1.set(value, name, TGRAN_2_SUPPORTED)
        elif enc == ID_AA64MMFR2_EL1.encoding.tuple and self.e0pd:
            value = ID_AA64MMFR2_EL1.set(value, "E0PD", 1)
        elif not self.pauth:
            for spec, names in PAUTH_FIELDS:
                if enc == spec.encoding.tuple:
                    for name in names:
                        value = spec.set(value, name, 0)
        return value

    def with_options(self, assignments: "list[str] | tuple[str, ...]") -> "CpuFeatures":
        """A copy with ``NAME=on|off`` assignments applied (``--cpu-feature``; NAME one of
        :attr:`NAMES`, any case; also 1/0, true/false, yes/no).

        Raises:
            ConfigError: an unknown name or value.
        """
        changes: dict[str, bool] = {}
        for text in assignments:
            name, sep, value = text.partition("=")
            name, value = name.strip().lower(), value.strip().lower()
            if not sep or name not in self.NAMES:
                raise ConfigError(f"--cpu-feature {text!r}: expected NAME=on|off with NAME one "
                                  f"of {', '.join(self.NAMES)}")
            if value in ("on", "1", "true", "yes"):
                changes[name] = True
            elif value in ("off", "0", "false", "no"):
                changes[name] = False
            else:
                raise ConfigError(f"--cpu-feature {text!r}: {value!r} is not on or off")
        return replace(self, **changes)

    def describe(self) -> dict:
        """The choices by name (for summary.json; ``midr`` as hex, None: Unicorn's)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["midr"] = None if self.midr is None else f"{self.midr:#010x}"
        return out


def e0pd_fault(tcr_el1: int, va: int) -> bool:
    """Whether an unprivileged access to ``va`` in the EL1&0 regime, with the stage 1 MMU on,
    is the level 0 Translation fault of FEAT_E0PD: VA bit 55 selects the TTBR1_EL1 half
    (TCR_EL1.E0PD1) or the TTBR0_EL1 half (TCR_EL1.E0PD0) (Arm ARM D8 "FEAT_E0PD", D19.2
    TCR_EL1). The caller checks that the PE has FEAT_E0PD (:attr:`CpuFeatures.e0pd`)."""
    return bool(TCR_EL1.get(tcr_el1, "E0PD1" if va >> 55 & 1 else "E0PD0"))
