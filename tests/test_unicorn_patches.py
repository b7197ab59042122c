"""The libunicorn spe_emu runs on is built with the patches of patches/unicorn
(spe_emu/native/unicorn_build.py, during ``pip install .``), and what each patch changes
behaves as its header says."""

from __future__ import annotations

import tempfile
from pathlib import Path

from asmrun import EXIT, run_asm, xregs
from unicorn import (UC_ARCH_ARM64, UC_HOOK_INTR, UC_HOOK_MEM_READ, UC_HOOK_MEM_WRITE, UC_MODE_ARM,
                     Uc)
from unicorn import arm64_const as A

import spe_emu  # noqa: F401  (points the binding at the patched library before unicorn loads it)
from spe_emu import native

PATCHES = Path(__file__).resolve().parent.parent / "patches" / "unicorn"


def test_the_build_in_use_carries_the_patches():
    expected = sorted(p.name for p in PATCHES.glob("*.patch"))
    assert expected and native.unicorn_patches() == expected


def test_a_memory_hook_added_after_translation_sees_the_pc():
    # 0001: loads and stores write their PC before the access whether or not a memory hook
    # existed when their block was translated, so a hook added later (no cpu_restore_state)
    # reads each access's own PC
    code = b"".join(w.to_bytes(4, "little") for w in (
        0xF9400022,    # ldr x2, [x1]
        0xF9000422,    # str x2, [x1, #8]
        0xF9400823,    # ldr x3, [x1, #16]
        0xD503201F))   # nop
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    uc.mem_map(0x10000, 0x10000)
    uc.mem_write(0x10000, code)
    uc.reg_write(A.UC_ARM64_REG_X1, 0x18000)
    uc.emu_start(0x10000, 0x10000 + len(code))   # (translated without a hook)
    seen = []
    uc.hook_add(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE,
                lambda u, _t, addr, _s, _v, _d: seen.append(
                    (u.reg_read(A.UC_ARM64_REG_PC), addr)))
    uc.emu_start(0x10000, 0x10000 + len(code))
    assert seen == [(0x10000, 0x18000), (0x10004, 0x18008), (0x10008, 0x18010)]


def test_the_memory_trace_reports_each_access_with_its_pc_and_physical_address():
    # 0002: uc_mem_trace_set calls its callback after each load and store of code translated
    # while it is set (PC, physical address, size, store?), and after a DC ZVA with its block
    import ctypes
    from unicorn.unicorn_py3.unicorn import uclib
    seen = []
    callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64,
                                ctypes.c_uint32, ctypes.c_uint32)(
        lambda _user, pc, pa, size, store: seen.append((pc, pa, size, store)))
    code = b"".join(w.to_bytes(4, "little") for w in (
        0xF9400022,    # ldr x2, [x1]
        0xB9000822,    # str w2, [x1, #8]
        0xA9410C22,    # ldp x2, x3, [x1, #16]
        0xD50B7421))   # dc zva, x1
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    uc.mem_map(0x10000, 0x10000)
    uc.mem_write(0x10000, code)
    uc.reg_write(A.UC_ARM64_REG_X1, 0x18040)
    trace_set = uclib.uc_mem_trace_set
    trace_set.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    assert trace_set(uc._uch, ctypes.cast(callback, ctypes.c_void_p), None) == 0
    uc.emu_start(0x10000, 0x10000 + len(code))
    assert seen == [(0x10000, 0x18040, 8, 0), (0x10004, 0x18048, 4, 1),
                    (0x10008, 0x18050, 8, 0), (0x10008, 0x18058, 8, 0),
                    (0x1000C, 0x18040, 64, 1)]


CPACR_EL1 = (1, 0, 3, 0, 2)   # (CRn, CRm, op0, op1, op2) as Unicorn's CP register takes it


def _cpacr(uc: Uc, value: int | None = None) -> int:
    if value is not None:
        uc.reg_write(A.UC_ARM64_REG_CP_REG, (*CPACR_EL1, value))
    return uc.reg_read(A.UC_ARM64_REG_CP_REG, CPACR_EL1)


def test_simd_fp_access_traps_are_taken_by_qemu():
    # 0003: fp_exception_el() restored: with CPACR_EL1.FPEN = 0b00 a SIMD&FP instruction at
    # EL1 raises EXCP_UDEF (intno 1) instead of executing (Arm ARM AArch64.CheckFPEnabled());
    # out of reset FPEN is 0b11, so code that never writes CPACR_EL1 runs as before
    code = b"".join(w.to_bytes(4, "little") for w in (
        0x9E670020,    # fmov d0, x1
        0xD503201F))   # nop
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    uc.mem_map(0x10000, 0x10000)
    uc.mem_write(0x10000, code)
    uc.reg_write(A.UC_ARM64_REG_PSTATE, 0x3C5)   # EL1h, DAIF masked
    assert _cpacr(uc) >> 20 & 3 == 0b11
    uc.reg_write(A.UC_ARM64_REG_X1, 0x1234)
    uc.emu_start(0x10000, 0x10000 + len(code))
    assert uc.reg_read(A.UC_ARM64_REG_D0) == 0x1234
    _cpacr(uc, 0)
    seen = []

    def on_intr(u, intno, _data):
        seen.append((intno, u.reg_read(A.UC_ARM64_REG_PC)))
        u.emu_stop()
    uc.hook_add(UC_HOOK_INTR, on_intr)
    uc.reg_write(A.UC_ARM64_REG_X1, 0x5678)
    uc.emu_start(0x10000, 0x10000 + len(code))
    assert seen == [(1, 0x10000)] and uc.reg_read(A.UC_ARM64_REG_D0) == 0x1234


STEP_AFTER_DAIFCLR = """
    adr x9, vectors
    msr vbar_el1, x9
    msr s2_0_c1_c0_4, xzr       // OSLAR_EL1: the OS Lock off
    mov x9, #0x2001             // MDSCR_EL1.KDE | SS
    msr s2_0_c0_c2_2, x9
    isb
    mov x21, #0
    adr x23, stepped
    msr daifclr, #8             // PSTATE.D = 0: Software Step active, PSTATE.SS = 0
stepped:
    nop
    nop
back:
    mov x0, #0
""" + EXIT + """
    .balign 2048
vectors:
    b vectors
    .balign 512
    mrs x21, esr_el1
    mrs x22, elr_el1
    b back
"""


def test_clearing_pstate_d_by_daifclr_activates_software_step():
    # 0007: MSR DAIFClr, #8 with MDSCR_EL1.{SS, KDE} = {1, 1} makes Software Step active in
    # the active-pending state: the next instruction takes the Software Step exception before
    # it executes (Arm ARM D2.12), in both run loops: ESR_EL1 EC 0x33 (same EL), IL 1, ISV 0
    # (taken from active-pending: no instruction stepped), IFSC 0b100010
    for mode in ("fast", "reference"):
        m = run_asm(STEP_AFTER_DAIFCLR, Path(tempfile.mkdtemp()) / mode, mode=mode,
                    boot_el=1)
        esr, elr, stepped = xregs(m, 21, 22, 23)
        assert (esr, elr) == (0x33 << 26 | 1 << 25 | 0x22, stepped), hex(esr)
