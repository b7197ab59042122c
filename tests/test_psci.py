"""PSCI 1.1 / SMCCC 1.1: every function's return values per DEN 0022D.b and DEN 0028, the
Function Identifiers (SMC32 and SMC64), unknown identifiers, argument widths, the conduit
rule, and (when QEMU is installed) the same calls on ``qemu-system-aarch64 -M virt -cpu max``
(QEMU's own PSCI emulation, HVC conduit at EL1) against the model."""

from __future__ import annotations

import pytest
from qemu_probe import needs_qemu
from qemu_probe import run as run_on_qemu

from spe_emu.devices.psci import (
    BY_NAME, FUNCTIONS, PeState, Psci, PsciAction, PsciResult, fid, psci_conduit,
)
from spe_emu.errors import ConfigError

SUCCESS, NOT_SUPPORTED, INVALID_PARAMETERS, ALREADY_ON = 0, -1, -2, -4
ON = 0

# DEN 0022D.b §5.1 (function prototypes) and DEN 0028, written out independently of the model:
# name -> (SMC32 Function Identifier, SMC64 Function Identifier or None)
IDS = {
    "PSCI_VERSION": (0x8400_0000, None),
    "CPU_SUSPEND": (0x8400_0001, 0xC400_0001),
    "CPU_OFF": (0x8400_0002, None),
    "CPU_ON": (0x8400_0003, 0xC400_0003),
    "AFFINITY_INFO": (0x8400_0004, 0xC400_0004),
    "MIGRATE": (0x8400_0005, 0xC400_0005),
    "MIGRATE_INFO_TYPE": (0x8400_0006, None),
    "MIGRATE_INFO_UP_CPU": (0x8400_0007, 0xC400_0007),
    "SYSTEM_OFF": (0x8400_0008, None),
    "SYSTEM_RESET": (0x8400_0009, None),
    "PSCI_FEATURES": (0x8400_000A, None),
    "CPU_FREEZE": (0x8400_000B, None),
    "CPU_DEFAULT_SUSPEND": (0x8400_000C, 0xC400_000C),
    "NODE_HW_STATE": (0x8400_000D, 0xC400_000D),
    "SYSTEM_SUSPEND": (0x8400_000E, 0xC400_000E),
    "PSCI_SET_SUSPEND_MODE": (0x8400_000F, None),
    "PSCI_STAT_RESIDENCY": (0x8400_0010, 0xC400_0010),
    "PSCI_STAT_COUNT": (0x8400_0011, 0xC400_0011),
    "SYSTEM_RESET2": (0x8400_0012, 0xC400_0012),
    "MEM_PROTECT": (0x8400_0013, None),
    "MEM_PROTECT_CHECK_RANGE": (0x8400_0014, 0xC400_0014),
    "SMCCC_VERSION": (0x8000_0000, None),
    "SMCCC_ARCH_FEATURES": (0x8000_0001, None),
    "SMCCC_ARCH_SOC_ID": (0x8000_0002, None),
    "SMCCC_ARCH_WORKAROUND_1": (0x8000_8000, None),
    "SMCCC_ARCH_WORKAROUND_2": (0x8000_7FFF, None),
    "SMCCC_ARCH_WORKAROUND_3": (0x8000_3FFF, None),
}
IMPLEMENTED = {"PSCI_VERSION", "CPU_SUSPEND", "CPU_OFF", "CPU_ON", "AFFINITY_INFO",
               "MIGRATE_INFO_TYPE", "SYSTEM_OFF", "SYSTEM_RESET", "PSCI_FEATURES",
               "SMCCC_VERSION", "SMCCC_ARCH_FEATURES"}
UNKNOWN_IDS = [0x8400_0015, 0x8400_001F, 0x8400_FFFF, 0xC400_0000, 0xC400_0002, 0xC400_0008,
               0x8200_0000, 0xC300_0000, 0x8600_0000, 0xBF00_0000, 0x0400_0000, 0x0000_0000,
               0x8000_0003, 0xC000_0000, 0x8401_0000, 0xFFFF_FFFF]
ENTRY = 0x4000_0000


@pytest.fixture
def psci() -> Psci:
    return Psci()


def x0(psci: Psci, name_or_id: str | int, *args: int, smc64: bool = False,
       pe: PeState | None = None) -> int | None:
    function_id = fid(name_or_id, smc64) if isinstance(name_or_id, str) else name_or_id
    padded = (tuple(args) + (0, 0, 0))[:3]
    result = psci.call(function_id, padded, pe)
    assert result.action is PsciAction.RETURN
    return result.x0


# ---- Function Identifiers ---------------------------------------------------------------------


def test_function_identifiers():
    assert {f.name: (f.fid32, f.fid64) for f in FUNCTIONS} == IDS
    assert {f.name for f in FUNCTIONS if f.handler} == IMPLEMENTED
    for f in FUNCTIONS:
        assert f.section.startswith(("DEN 0022D.b §5.", "DEN 0028")), f.name
    with pytest.raises(KeyError, match="PSCI_VERSION has no SMC64"):
        fid("PSCI_VERSION", smc64=True)


# ---- PSCI functions (DEN 0022D.b §5.1) ------------------------------------------------------


def test_psci_version_is_1_1(psci):
    value = x0(psci, "PSCI_VERSION")
    assert value == 0x1_0001
    assert (value >> 16, value & 0xFFFF) == (1, 1)  # Major [30:16], Minor [15:0]


@pytest.mark.parametrize("name", sorted(IDS))
def test_psci_features(psci, name):
    fid32, fid64 = IDS[name]
    expected = SUCCESS if name in IMPLEMENTED else NOT_SUPPORTED
    assert x0(psci, "PSCI_FEATURES", fid32) == expected
    if fid64 is not None:
        assert x0(psci, "PSCI_FEATURES", fid64) == expected
        # an AArch32 caller has no SMC64 functions
        assert x0(psci, "PSCI_FEATURES", fid64, pe=PeState(aarch64=False)) == NOT_SUPPORTED
    assert x0(psci, "PSCI_FEATURES", fid32, pe=PeState(aarch64=False)) == expected


@pytest.mark.parametrize("queried", UNKNOWN_IDS)
def test_psci_features_of_unknown_ids(psci, queried):
    assert x0(psci, "PSCI_FEATURES", queried) == NOT_SUPPORTED


def test_psci_features_reads_w1(psci):
    assert x0(psci, "PSCI_FEATURES", 0xFFFF_FFFF_0000_0000 | IDS["CPU_ON"][0]) == SUCCESS


@pytest.mark.parametrize("smc64", [False, True])
def test_cpu_on(psci, smc64):
    assert x0(psci, "CPU_ON", 0, ENTRY, 0x1234, smc64=smc64) == ALREADY_ON
    for target in (1, 0x100, 0x1_0000, 0x8000_0000, 0x0100_0000, 0xFF):
        assert x0(psci, "CPU_ON", target, ENTRY, 0, smc64=smc64) == INVALID_PARAMETERS, target
    pe = PeState(mpidr=0x8000_0102)                 # a PE with affinity 0.0.1.2
    assert x0(psci, "CPU_ON", 0x102, ENTRY, 0, smc64=smc64, pe=pe) == ALREADY_ON
    assert x0(psci, "CPU_ON", 0, ENTRY, 0, smc64=smc64, pe=pe) == INVALID_PARAMETERS


def test_cpu_on_aff3_needs_smc64(psci):
    pe = PeState(mpidr=0x1_8000_0000)               # Aff3 = 1
    assert x0(psci, "CPU_ON", 1 << 32, ENTRY, 0, smc64=True, pe=pe) == ALREADY_ON
    # SMC32: the target is W1, so Aff3 cannot be named (bits 63:32 are ignored)
    assert x0(psci, "CPU_ON", 1 << 32, ENTRY, 0, pe=pe) == INVALID_PARAMETERS
    assert x0(psci, "CPU_ON", 1 << 32, ENTRY, 0) == ALREADY_ON
    assert x0(psci, "CPU_ON", 1 << 32, ENTRY, 0, smc64=True) == INVALID_PARAMETERS


@pytest.mark.parametrize("smc64", [False, True])
def test_affinity_info(psci, smc64):
    assert x0(psci, "AFFINITY_INFO", 0, 0, smc64=smc64) == ON
    for target in (1, 0x100, 0x1_0000, 0x8000_0000):
        assert x0(psci, "AFFINITY_INFO", target, 0, smc64=smc64) == INVALID_PARAMETERS
    for level in (1, 2, 3, 4):                      # levels above 0: not supported
        assert x0(psci, "AFFINITY_INFO", 0, level, smc64=smc64) == INVALID_PARAMETERS


def test_migrate_functions(psci):
    assert x0(psci, "MIGRATE_INFO_TYPE") == 2       # no Trusted OS: no migration needed
    for smc64 in (False, True):
        assert x0(psci, "MIGRATE", 0, smc64=smc64) == NOT_SUPPORTED
        assert x0(psci, "MIGRATE_INFO_UP_CPU", smc64=smc64) == NOT_SUPPORTED


def test_system_off(psci):
    assert psci.call(fid("SYSTEM_OFF"), (0, 0, 0)) == PsciResult(
        None, PsciAction.POWER_OFF, "system-off", 0)


def test_cpu_off_ends_the_run_with_its_own_reason(psci):
    result = psci.call(fid("CPU_OFF"), (0, 0, 0))
    assert result == PsciResult(None, PsciAction.POWER_OFF, "cpu-off", 0)
    assert result.x0_value is None


def test_system_reset(psci):
    assert psci.call(fid("SYSTEM_RESET"), (0, 0, 0)) == PsciResult(
        None, PsciAction.RESET, "system-reset")


@pytest.mark.parametrize("smc64", [False, True])
@pytest.mark.parametrize("power_state", [0, 0x1234, 1 << 16, (1 << 16) | 0xFFFF])
def test_cpu_suspend_enters_standby(psci, smc64, power_state):
    """Standby, and powerdown downgraded to standby: SUCCESS at the next instruction."""
    result = psci.call(fid("CPU_SUSPEND", smc64), (power_state, ENTRY, 0))
    assert result == PsciResult(SUCCESS, PsciAction.STANDBY)


@pytest.mark.parametrize("power_state", [1 << 24, 2 << 24, 3 << 24, 1 << 17, 1 << 23,
                                         1 << 26, 1 << 31])
def test_cpu_suspend_invalid_power_state(psci, power_state):
    assert x0(psci, "CPU_SUSPEND", power_state, ENTRY) == INVALID_PARAMETERS


def test_cpu_suspend_smc32_ignores_the_upper_half(psci):
    result = psci.call(fid("CPU_SUSPEND"), (0xFFFF_FFFF_0000_0000, ENTRY, 0))
    assert result.action is PsciAction.STANDBY
    assert x0(psci, "CPU_SUSPEND", 0xFFFF_FFFF_0000_0000, ENTRY, smc64=True) == -2


@pytest.mark.parametrize("name", sorted(set(IDS) - IMPLEMENTED))
def test_every_unimplemented_function_is_not_supported(psci, name):
    for function_id in IDS[name]:
        if function_id is not None:
            result = psci.call(function_id, (0, 0, 0))
            assert result == PsciResult(NOT_SUPPORTED), hex(function_id)


# ---- SMCCC (DEN 0028) -------------------------------------------------------------------------


@pytest.mark.parametrize("function_id", UNKNOWN_IDS)
def test_unknown_function_ids_return_minus_one(psci, function_id):
    result = psci.call(function_id, (1, 2, 3))
    assert result == PsciResult(NOT_SUPPORTED)
    assert result.x0_value == 0xFFFF_FFFF_FFFF_FFFF


def test_function_id_is_w0(psci):
    assert x0(psci, 0xFFFF_FFFF_8400_0000) == 0x1_0001
    assert x0(psci, 0x1_8400_0004) == ON


def test_smc64_functions_from_aarch32_are_unknown(psci):
    aarch32 = PeState(aarch64=False)
    assert x0(psci, IDS["CPU_ON"][1], 0, ENTRY, pe=aarch32) == NOT_SUPPORTED
    assert x0(psci, IDS["AFFINITY_INFO"][1], 0, 0, pe=aarch32) == NOT_SUPPORTED
    assert x0(psci, IDS["CPU_ON"][0], 0, ENTRY, pe=aarch32) == ALREADY_ON
    assert x0(psci, IDS["AFFINITY_INFO"][0], 0, 0, pe=aarch32) == ON


def test_results_are_sign_extended_into_x0():
    assert PsciResult(-2).x0_value == 0xFFFF_FFFF_FFFF_FFFE
    assert PsciResult(-4).x0_value == 0xFFFF_FFFF_FFFF_FFFC
    assert PsciResult(0x1_0001).x0_value == 0x1_0001
    assert PsciResult(2).x0_value == 2


def test_smccc_version_and_arch_features(psci):
    value = x0(psci, "SMCCC_VERSION")
    assert (value >> 16, value & 0xFFFF) == (1, 1)
    assert x0(psci, "SMCCC_ARCH_FEATURES", IDS["SMCCC_VERSION"][0]) == SUCCESS
    assert x0(psci, "SMCCC_ARCH_FEATURES", IDS["SMCCC_ARCH_FEATURES"][0]) == SUCCESS
    for name in ("SMCCC_ARCH_SOC_ID", "SMCCC_ARCH_WORKAROUND_1", "SMCCC_ARCH_WORKAROUND_2",
                 "SMCCC_ARCH_WORKAROUND_3", "PSCI_VERSION", "CPU_ON"):
        assert x0(psci, "SMCCC_ARCH_FEATURES", IDS[name][0]) == NOT_SUPPORTED, name
    for queried in UNKNOWN_IDS:
        assert x0(psci, "SMCCC_ARCH_FEATURES", queried) == NOT_SUPPORTED


def test_the_model_is_stateless(psci):
    for _ in range(2):
        assert psci.call(fid("CPU_OFF"), (0, 0, 0)).action is PsciAction.POWER_OFF
        assert x0(psci, "AFFINITY_INFO", 0, 0) == ON      # still ON: one PE, no state


# ---- the conduit --------------------------------------------------------------------------------


def test_conduit_rule():
    assert psci_conduit(1) == "hvc"      # like QEMU virt without virtualization=on
    assert psci_conduit(2) == "smc"      # like QEMU virt,virtualization=on
    assert psci_conduit(3) is None       # the EL3 software is the firmware
    for bad in (0, 4, None):
        with pytest.raises(ConfigError, match="must be 1, 2 or 3"):
            psci_conduit(bad)


# ---- against QEMU 7.2 (-M virt -cpu max at EL1: HVC conduit) -----------------------------------

# (label, Function Identifier, x1, x2, x3)
QEMU_CALLS = [
    ("PSCI_VERSION", 0x8400_0000, 0, 0, 0),
    *[(f"PSCI_FEATURES({name}{'/64' if i else ''})", 0x8400_000A, ids[i], 0, 0)
      for name, ids in IDS.items() for i in (0, 1) if ids[i] is not None],
    ("PSCI_FEATURES(unknown)", 0x8400_000A, 0x8400_0020, 0, 0),
    ("AFFINITY_INFO(0, 0)", 0x8400_0004, 0, 0, 0),
    ("AFFINITY_INFO/64(0, 0)", 0xC400_0004, 0, 0, 0),
    ("AFFINITY_INFO(1, 0)", 0x8400_0004, 1, 0, 0),
    ("AFFINITY_INFO(0x100, 0)", 0x8400_0004, 0x100, 0, 0),
    ("AFFINITY_INFO(0x80000000, 0)", 0x8400_0004, 0x8000_0000, 0, 0),
    ("AFFINITY_INFO(0, 1)", 0x8400_0004, 0, 1, 0),
    ("CPU_ON(0)", 0x8400_0003, 0, ENTRY, 0),
    ("CPU_ON/64(0)", 0xC400_0003, 0, ENTRY, 0x1234),
    ("CPU_ON(1)", 0x8400_0003, 1, ENTRY, 0),
    ("CPU_ON/64(0x10000)", 0xC400_0003, 0x1_0000, ENTRY, 0),
    ("CPU_ON/64(0, misaligned entry)", 0xC400_0003, 0, ENTRY + 2, 0),
    ("CPU_SUSPEND(PowerLevel 1)", 0x8400_0001, 1 << 24, ENTRY, 0),
    ("CPU_SUSPEND/64(reserved bit 17)", 0xC400_0001, 1 << 17, ENTRY, 0),
    ("MIGRATE_INFO_TYPE", 0x8400_0006, 0, 0, 0),
    ("MIGRATE", 0x8400_0005, 0, 0, 0),
    ("MIGRATE_INFO_UP_CPU", 0x8400_0007, 0, 0, 0),
    ("SMCCC_VERSION", 0x8000_0000, 0, 0, 0),
    ("SMCCC_ARCH_FEATURES(SMCCC_VERSION)", 0x8000_0001, 0x8000_0000, 0, 0),
    ("SMCCC_ARCH_FEATURES(WORKAROUND_1)", 0x8000_0001, 0x8000_8000, 0, 0),
    *[(f"unknown {u:#x}", u, 0, 0, 0) for u in UNKNOWN_IDS],
    ("X0 bits 63:32 set", 0x1_8400_0000, 0, 0, 0),
]

QEMU_DIFFERS = {
    # label: (QEMU 7.2, the model, why)
    "PSCI_FEATURES(SMCCC_VERSION)": (NOT_SUPPORTED, SUCCESS, "QEMU has SMCCC 1.0 only"),
    "PSCI_FEATURES(SMCCC_ARCH_FEATURES)": (NOT_SUPPORTED, SUCCESS, "QEMU has SMCCC 1.0 only"),
    "SMCCC_VERSION": (NOT_SUPPORTED, 0x1_0001, "QEMU has SMCCC 1.0 only"),
    "SMCCC_ARCH_FEATURES(SMCCC_VERSION)": (NOT_SUPPORTED, SUCCESS, "QEMU has SMCCC 1.0 only"),
    "AFFINITY_INFO(0, 1)": (ON, INVALID_PARAMETERS,
                            "QEMU: every level above 0 is ON; the model does not support them"),
    "CPU_ON/64(0, misaligned entry)": (INVALID_PARAMETERS, ALREADY_ON,
                                       "QEMU checks the entry point before the target's state"),
    "X0 bits 63:32 set": (NOT_SUPPORTED, 0x1_0001, "SMCCC: the Function Identifier is W0"),
}

PRESERVED = """
    mov x1, #0x11
    mov x2, #0x22
    mov x3, #0x33
    mov x4, #0x44
    mov x17, #0x77
    ldr x0, =0x84000006
    hvc #0
    add x0, x0, x1, lsl #8
    add x0, x0, x2, lsl #16
    add x0, x0, x3, lsl #24
    add x0, x0, x4, lsl #32
    add x0, x0, x17, lsl #40"""
"""MIGRATE_INFO_TYPE (2) with x1..x4 and x17 set: QEMU leaves all of them."""


@needs_qemu
def test_model_answers_as_qemu(psci, tmp_path):
    steps = [f"    ldr x0, ={f:#x}\n    ldr x1, ={a:#x}\n    ldr x2, ={b:#x}\n"
             f"    ldr x3, ={c:#x}\n    hvc #0" for _, f, a, b, c in QEMU_CALLS]
    values = run_on_qemu(steps + [PRESERVED], tmp_path)
    assert values[-1] == 0x77_44_33_22_11_02          # x0 = 2; x1..x4, x17 unchanged
    for (label, function_id, a, b, c), qemu in zip(QEMU_CALLS, values):
        model = psci.call(function_id, (a, b, c)).x0_value
        if label in QEMU_DIFFERS:
            q, m, why = QEMU_DIFFERS[label]
            assert (qemu, model) == (q & (1 << 64) - 1, m & (1 << 64) - 1), (label, why)
        else:
            assert model == qemu, label
    assert set(QEMU_DIFFERS) <= {c[0] for c in QEMU_CALLS}


def test_every_function_name_is_known():
    assert set(BY_NAME) == set(IDS)
