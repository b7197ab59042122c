"""The SMC Calling Convention's Function Identifier (DEN 0028) and the PE affinity PSCI and the
device tree name PEs by (MPIDR_EL1's Aff3..Aff0, DEN 0022D.b §5.1.4): shared by the PSCI model
(:mod:`spe_emu.devices.psci`) and the device tree's psci and cpu nodes
(:mod:`spe_emu.platform.dtb`)."""

from __future__ import annotations

from ..sysreg import layout, reg

FUNCTION_ID = layout("Function Identifier", "Type 31", "CallConv 30", "OEN 29:24",
                     "FunctionNumber 15:0")
"""The Function Identifier in W0 (DEN 0028): Type 1 = Fast Call, CallConv 1 = SMC64, OEN =
Owning Entity Number, FunctionNumber; bits 23:16 are zero in a Fast Call."""
OEN_ARM_ARCHITECTURE = 0
OEN_STANDARD_SECURE = 4
"""Owning entities: Arm Architecture Calls (SMCCC_*), Standard Secure Service Calls (PSCI)."""

MPIDR_EL1 = reg("MPIDR_EL1", (3, 0, 0, 0, 5), "Aff3 39:32", "U 30", "MT 24", "Aff2 23:16",
                "Aff1 15:8", "Aff0 7:0", res1=1 << 31, read_only=True, doc="Arm ARM D19.2")
AFFINITY = layout("target_cpu", "Aff3 39:32", "Aff2 23:16", "Aff1 15:8", "Aff0 7:0")
"""The target_cpu / target_affinity argument of CPU_ON and AFFINITY_INFO: MPIDR_EL1's
affinity fields in place, every other bit zero (DEN 0022D.b §5.1.4, §5.1.5)."""


def mpidr_affinity(mpidr: int) -> int:
    """Aff3..Aff0 of an MPIDR_EL1 value, in place, every other bit zero (:data:`AFFINITY`: the
    target_cpu argument; also a device-tree cpu node's ``reg``)."""
    return mpidr & AFFINITY.field_mask


PES_PER_CLUSTER = 8
"""PEs per Aff1 cluster on the ``virt`` board (QEMU's virt with GICv3: PE n has Aff1 = n / 8,
Aff0 = n % 8)."""


def pe_mpidr(index: int) -> int:
    """MPIDR_EL1 of PE number ``index`` of a board: Aff1.Aff0 from :data:`PES_PER_CLUSTER`,
    bit 31 RES1, U = 0 (a multiprocessor system; as QEMU's virt presents it, D19.2)."""
    return MPIDR_EL1.make(Aff1=index // PES_PER_CLUSTER, Aff0=index % PES_PER_CLUSTER)


def function_id(oen: int, number: int, smc64: bool = False) -> int:
    """The Fast Call Function Identifier of function ``number`` of owning entity ``oen``."""
    return FUNCTION_ID.make(Type=1, CallConv=int(smc64), OEN=oen, FunctionNumber=number)
