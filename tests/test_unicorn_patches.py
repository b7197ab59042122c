"""The libunicorn spe_emu runs on is built with the patches of patches/unicorn
(spe_emu/native/unicorn_build.py, during ``pip install .``), and what each patch changes
behaves as its header says."""

from __future__ import annotations

from pathlib import Path

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
