"""The libunicorn spe_emu runs on is built with the patches of patches/unicorn
(spe_emu/native/unicorn_build.py, during ``pip install .``), and what each patch changes
behaves as its header says."""

from __future__ import annotations

import ctypes
import tempfile
from pathlib import Path

from asmrun import EXIT, run_asm, xregs
from unicorn import (UC_ARCH_ARM64, UC_HOOK_INSN, UC_HOOK_INTR, UC_HOOK_MEM_READ,
                     UC_HOOK_MEM_WRITE, UC_MODE_ARM, Uc)
from unicorn import arm64_const as A
from unicorn.unicorn_const import UC_CTL_IO_WRITE, UC_CTL_TLB_FLUSH

import spe_emu  # noqa: F401  (points the binding at the patched library before unicorn loads it)
from spe_emu import native

PATCHES = Path(__file__).resolve().parent.parent / "patches" / "unicorn"
_TRACE_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64,
                                   ctypes.c_uint32, ctypes.c_uint32)
"""uc_cb_mem_trace_t (0002): (user data, PC, physical address, size, store?)."""


def _set_trace(uc: Uc, fn):
    """uc_mem_trace_set(uc, fn) (0002), for the code translated from now on; returns the
    callback object, which the caller keeps while the trace is set."""
    from unicorn.unicorn_py3.unicorn import uclib
    callback = _TRACE_CALLBACK(fn)
    trace_set = uclib.uc_mem_trace_set
    trace_set.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    assert trace_set(uc._uch, ctypes.cast(callback, ctypes.c_void_p), None) == 0
    return callback


def _stopping_once(stops: list):
    """A memory hook's callback that, while ``stops`` is empty, appends the PC to it and
    stops the run (uc_emu_stop)."""
    def stop_once(u, *_):
        if not stops:
            stops.append(u.reg_read(A.UC_ARM64_REG_PC))
            u.emu_stop()
    return stop_once


def _code_at(code: bytes, size: int = 0x10000, **regs: int) -> Uc:
    """An AArch64 Unicorn with ``size`` bytes of memory at 0x10000, ``code`` at its start and
    the X registers named in ``regs`` (X1=0x18000, ...) set."""
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    uc.mem_map(0x10000, size)
    uc.mem_write(0x10000, code)
    for name, value in regs.items():
        uc.reg_write(getattr(A, f"UC_ARM64_REG_{name}"), value)
    return uc


def test_the_build_in_use_carries_the_patches():
    expected = sorted(p.name for p in PATCHES.glob("*.patch"))
    assert expected and native.unicorn_patches() == expected


def test_the_build_exports_only_the_api():
    """unicorn_build.CMAKE_OPTIONS: hidden visibility, so calls inside the library are direct
    (the stock build exports some 3,000 internal functions, tcg_gen_code_aarch64 among
    them, and calls them through the PLT); every uc_* function the binding and spe_emu call
    is still exported."""
    from elftools.elf.elffile import ELFFile
    from unicorn.unicorn_py3.unicorn import uclib

    with open(uclib._name, "rb") as f:
        dynsym = ELFFile(f).get_section_by_name(".dynsym")
        exported = {s.name for s in dynsym.iter_symbols()
                    if s["st_shndx"] != "SHN_UNDEF" and s["st_info"]["type"] == "STT_FUNC"}
    assert "tcg_gen_code_aarch64" not in exported and len(exported) < 100
    assert {"uc_open", "uc_emu_start", "uc_ctl", "uc_hook_add", "uc_hook_block_counter",
            "uc_mem_trace_set", "uc_mem_trace_batch_set", "uc_mem_trace_flush",
            "uc_mem_trace_blocks",
            "uc_vmem_translate"} <= exported


_LDST = b"".join(w.to_bytes(4, "little") for w in (
    0xF9400022,    # ldr x2, [x1]
    0xF9080022,    # str x2, [x1, #0x1000]
    0xF9500023,    # ldr x3, [x1, #0x2000]
    0x14000001,    # b .+4
    0xD503201F))   # nop
"""Three accesses, at +0, +4 and +8, each to a page of its own (X1, X1 + 4 KiB, X1 + 8 KiB),
in a block of their own: emu_start invalidates the block holding the byte before its
``until`` address (the nop's)."""


def _ldst_pcs(uc: Uc, at: int, seen: list) -> list:
    """Run the copy of _LDST at ``at`` (X1 = 0x20000) after a TLB flush (so that each
    access takes the slow path, where Unicorn calls the memory hooks whether or not the block
    was translated with one); [the (PC, address) pairs the memory hook that appends to
    ``seen`` reported, what it should have]."""
    seen.clear()
    uc.reg_write(A.UC_ARM64_REG_X1, 0x20000)
    uc.ctl(UC_CTL_TLB_FLUSH, UC_CTL_IO_WRITE)
    uc.emu_start(at, at + len(_LDST))
    return [seen[:], [(at, 0x20000), (at + 4, 0x21000), (at + 8, 0x22000)]]


def test_a_memory_hook_added_after_translation_sees_the_pc():
    # 0001 + 0008: code translated without a memory hook leaves the PC of its accesses
    # unsynced, so a hook added later finds it with cpu_restore_state(); code translated with
    # the hook writes it before each access, and the hook reads it from there
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    uc.mem_map(0x10000, 0x20000)
    for at in (0x10000, 0x11000, 0x12000):   # (a page each: one run's code stays translated)
        uc.mem_write(at, _LDST)
    seen = []

    def hook():
        return uc.hook_add(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE,
                           lambda u, _t, addr, _s, _v, _d: seen.append(
                               (u.reg_read(A.UC_ARM64_REG_PC), addr)))

    _ldst_pcs(uc, 0x10000, seen)   # (translated without a hook)
    added = hook()
    got, want = _ldst_pcs(uc, 0x10000, seen)
    assert got == want
    # after a flush, everything translated has the hook: the code writes the PC itself
    uc.ctl_flush_tb()
    got, want = _ldst_pcs(uc, 0x11000, seen)
    assert got == want
    # the hook goes, new code is translated without the PC, the hook comes back: the old
    # code (with the PC) and the new (without) both report their own
    uc.hook_del(added)
    _ldst_pcs(uc, 0x12000, seen)
    hook()
    for at in (0x11000, 0x12000):
        got, want = _ldst_pcs(uc, at, seen)
        assert got == want


_TRACED = b"".join(w.to_bytes(4, "little") for w in (
    0xF9400022,    # ldr x2, [x1]
    0xB9000822,    # str w2, [x1, #8]
    0xA9410C22,    # ldp x2, x3, [x1, #16]
    0xD50B7421))   # dc zva, x1
_TRACED_ACCESSES = [(0x10000, 0x18040, 8, 0), (0x10004, 0x18048, 4, 1),
                    (0x10008, 0x18050, 8, 0), (0x10008, 0x18058, 8, 0),
                    (0x1000C, 0x18040, 64, 1)]
"""What the memory trace reports for _TRACED at X1 = 0x18040: (PC, physical address, size,
store?) of each access, a DC ZVA as one store of its 64-byte block."""


def test_the_memory_trace_reports_each_access_with_its_pc_and_physical_address():
    # 0002: uc_mem_trace_set calls its callback after each load and store of code translated
    # while it is set (PC, physical address, size, store?), and after a DC ZVA with its block

    seen = []

    def fn(_user, pc, pa, size, store):
        seen.append((pc, pa, size, store))
    uc = _code_at(_TRACED, X1=0x18040)
    callback = _set_trace(uc, fn)  # noqa: F841  (kept while the trace is set)
    uc.emu_start(0x10000, 0x10000 + len(_TRACED))
    assert seen == _TRACED_ACCESSES


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
    uc = _code_at(code)
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


class _BlockCounter(ctypes.Structure):
    """struct uc_block_counter (0009)."""
    _fields_ = [("count", ctypes.c_uint64), ("limit", ctypes.c_uint64),
                ("last_pc", ctypes.c_uint64), ("last_insns", ctypes.c_uint64)]


# Three blocks of 2, 3 and 1 instructions, each ended by a branch: at 0x10000, 0x10008 and
# 0x10014; the run stops at 0x10018.
_BLOCKS = b"".join(w.to_bytes(4, "little") for w in (
    0xD2800020,    # mov x0, #1
    0x14000001,    # b .+4
    0x91000400,    # add x0, x0, #1
    0x91000400,    # add x0, x0, #1
    0x14000001,    # b .+4
    0x14000001,    # b .+4
    0xD503201F))   # nop


def _counted_run(limit: int, second_hook: bool = False, remove: str = "") -> tuple:
    """Run _BLOCKS with a Python block hook that has the inline counter (limit ``limit``),
    optionally a second block hook, the counter removed (``remove`` "null") or the hook
    deleted ("hook") before the run: (blocks the hook was called for, as (address, size);
    the counter's fields; blocks the second hook was called for)."""
    from unicorn import UC_HOOK_BLOCK
    from unicorn.unicorn_py3.unicorn import uclib
    uc = _code_at(_BLOCKS)
    called, other = [], []
    hook = uc.hook_add(UC_HOOK_BLOCK, lambda _u, addr, size, _d: called.append((addr, size)))
    if second_hook:
        uc.hook_add(UC_HOOK_BLOCK, lambda _u, addr, size, _d: other.append((addr, size)))
    counter = _BlockCounter(count=100, limit=limit)
    counter_set = uclib.uc_hook_block_counter
    counter_set.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    assert counter_set(uc._uch, hook, ctypes.byref(counter)) == 0
    if remove == "null":
        assert counter_set(uc._uch, hook, None) == 0
    elif remove == "hook":
        uc.hook_del(hook)
    uc.emu_start(0x10000, 0x10018)
    return (called, (counter.count, counter.last_pc, counter.last_insns), other)


def test_a_block_hook_with_the_inline_counter_is_called_only_past_its_limit():
    # 0009: while count + n <= limit the translated code counts the block itself (count,
    # last_pc, last_insns) and calls no hook; a block that would pass the limit calls the
    # hook, which does its own counting
    assert _counted_run(limit=1000) == ([], (106, 0x10014, 1), [])
    assert _counted_run(limit=105) == ([(0x10014, 4)], (105, 0x10008, 3), [])
    # (this hook does not count: the block after the one it was called for fits again)
    assert _counted_run(limit=104) == ([(0x10008, 12)], (103, 0x10014, 1), [])
    assert _counted_run(limit=0) == ([(0x10000, 8), (0x10008, 12), (0x10014, 4)],
                                     (100, 0, 0), [])


def test_the_inline_counter_is_only_for_its_hook_alone():
    # a second block hook, a NULL counter or the hook's deletion: every block calls the
    # hooks as before, and the counter is left alone
    every = [(0x10000, 8), (0x10008, 12), (0x10014, 4)]
    assert _counted_run(limit=1000, second_hook=True) == (every, (100, 0, 0), every)
    assert _counted_run(limit=1000, remove="null") == (every, (100, 0, 0), [])
    assert _counted_run(limit=1000, remove="hook") == ([], (100, 0, 0), [])


# 0010: a load's access (at 0x10004) between two register moves, then a second load
_STOPS = b"".join(w.to_bytes(4, "little") for w in (
    0xD2800025,    # 0x10000 mov x5, #1
    0xF9400022,    # 0x10004 ldr x2, [x1]
    0xD2800046,    # 0x10008 mov x6, #2
    0xD53BE047,    # 0x1000c mrs x7, cntvct_el0
    0xD2800068,    # 0x10010 mov x8, #3
    0xF9400423,    # 0x10014 ldr x3, [x1, #8]
    0xD2800089,    # 0x10018 mov x9, #4
    0xD503201F))   # 0x1001c nop


def _stop_run(setup) -> tuple:
    """Run _STOPS (X1 = 0x18000, where 0x1234 is) after ``setup(uc)``: (PC, X2, X5, X6, X8,
    X9) where it stopped, and the error emu_start raised (None)."""
    from unicorn import UcError
    uc = _code_at(_STOPS)
    uc.mem_write(0x18000, (0x1234).to_bytes(8, "little"))
    uc.reg_write(A.UC_ARM64_REG_X1, 0x18000)
    setup(uc)
    err = None
    try:
        uc.emu_start(0x10000, 0x1001c)
    except UcError as exc:
        err = exc.errno
    regs = [uc.reg_read(r) for r in (A.UC_ARM64_REG_PC, A.UC_ARM64_REG_X2, A.UC_ARM64_REG_X5,
                                      A.UC_ARM64_REG_X6, A.UC_ARM64_REG_X8,
                                      A.UC_ARM64_REG_X9)]
    return (*regs, err)


def test_a_memory_hook_that_stops_leaves_the_block_at_its_access():
    # 0010: the slow path of the access checks the exit request: the run leaves at the
    # accessing instruction (PC restored to it, made again when the run resumes), before
    # the next instruction and before the load's register is written (Unicorn 2.1.4 wrote
    # X2 first: 0x1234)
    def setup(uc):
        uc.hook_add(UC_HOOK_MEM_READ, lambda u, *_: u.emu_stop(), None, 0x18000, 0x18007)
    assert _stop_run(setup) == (0x10004, 0, 1, 0, 0, 0, None)


def test_a_stop_requested_by_an_mrs_hook_is_taken_after_that_mrs():
    # 0010: after an instruction a UC_HOOK_INSN hook was called for, a stop the hook
    # requested is taken at the next instruction (before 0010: after the next load, whose
    # access was made, with the PC back on that load: 0x10014, X8 = 3)
    def setup(uc):
        uc.hook_add(UC_HOOK_INSN, lambda u, *_: (u.emu_stop(), 0)[1], None, 1, 0,
                    A.UC_ARM64_INS_MRS)
    assert _stop_run(setup) == (0x10010, 0x1234, 1, 2, 0, 0, None)



def test_the_trace_sees_an_access_a_hook_stopped_once_when_it_is_made_again():
    # 0002 + 0010: the access a memory hook stopped the run in is left out of the memory
    # trace (it is made again when the run resumes), and only that one
    seen = []

    def fn(_user, pc, pa, _size, _store):
        seen.append((pc, pa))
    uc = _code_at(_STOPS, X1=0x18000)
    callback = _set_trace(uc, fn)  # noqa: F841  (kept while the trace is set)
    stops = []
    stop_once = _stopping_once(stops)
    uc.hook_add(UC_HOOK_MEM_READ, stop_once, None, 0x18000, 0x18007)
    uc.emu_start(0x10000, 0x1001c)
    assert stops == [0x10004] and seen == [] and uc.reg_read(A.UC_ARM64_REG_PC) == 0x10004
    uc.emu_start(0x10004, 0x1001c)
    assert seen == [(0x10004, 0x18000), (0x10014, 0x18008)]


def test_a_stop_the_memory_trace_asks_for_is_taken_at_the_next_exit_check():
    # 0011: the trace's callback runs when its buffer is drained (here before the code hook
    # of the instruction after the load), and a stop it asks for is taken at the next exit
    # check (the code hook's): the load done, nothing after it
    from unicorn import UC_HOOK_CODE
    uc = _code_at(_STOPS)
    uc.mem_write(0x18000, (0x1234).to_bytes(8, "little"))
    uc.reg_write(A.UC_ARM64_REG_X1, 0x18000)
    hooked = []
    uc.hook_add(UC_HOOK_CODE, lambda _u, addr, _size, _d: hooked.append(addr))

    def fn(_user, _pc, _pa, _size, _store):
        uc.emu_stop()
    callback = _set_trace(uc, fn)  # noqa: F841  (kept while the trace is set)
    uc.emu_start(0x10000, 0x1001c)
    assert (uc.reg_read(A.UC_ARM64_REG_PC), uc.reg_read(A.UC_ARM64_REG_X2),
            uc.reg_read(A.UC_ARM64_REG_X6)) == (0x10008, 0x1234, 0)


class _TraceEntry(ctypes.Structure):
    """uc_mem_trace_entry (0011): the physical address and the info word."""
    _fields_ = [("addr", ctypes.c_uint64), ("info", ctypes.c_uint64)]


_BATCH_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_TraceEntry),
                                   ctypes.c_size_t)


def _set_batch_trace(uc: Uc, seen: list, batches: list | None = None):
    """uc_mem_trace_batch_set (0011) with a callback that appends (PC, physical address,
    size, store?) to ``seen`` (decoding the info word as unicorn.h says) and each batch's
    length to ``batches``; returns the callback object, which the caller keeps."""
    from unicorn.unicorn_py3.unicorn import uclib

    def fn(_user, entries, count):
        if batches is not None:
            batches.append(count)
        for i in range(count):
            e = entries[i]
            pc = e.info & ((1 << 56) - 1)
            pc |= (0xFF << 56) if pc >> 55 else 0
            seen.append((pc, e.addr, 1 << (e.info >> 56 & 7), e.info >> 59 & 1))
    callback = _BATCH_CALLBACK(fn)
    trace_set = uclib.uc_mem_trace_batch_set
    trace_set.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    assert trace_set(uc._uch, ctypes.cast(callback, ctypes.c_void_p), None) == 0
    return callback


def test_the_batched_trace_hands_over_what_the_per_access_trace_does():
    # 0011: the same accesses as 0002's callback (the test above), from the buffer
    uc = _code_at(_TRACED, X1=0x18040)
    seen = []
    callback = _set_batch_trace(uc, seen)  # noqa: F841  (kept while the trace is set)
    uc.emu_start(0x10000, 0x10000 + len(_TRACED))
    assert seen == _TRACED_ACCESSES


_LOOP = b"".join(w.to_bytes(4, "little") for w in (
    0xF8408422,    # 0x10000 ldr x2, [x1], #8
    0xF1000463,    # 0x10004 subs x3, x3, #1
    0x54FFFFC1,    # 0x10008 b.ne 0x10000
    0xD503201F))   # 0x1000c nop
"""X3 loads of consecutive doublewords from X1 up, in one chain of blocks without a hook."""


def test_the_trace_buffer_drains_when_it_runs_short_and_loses_nothing():
    # 0011: 20,000 accesses in one run without hooks: the buffer (8,192 entries) is drained
    # at block starts when it runs short, and every access arrives once, in order
    uc = _code_at(_LOOP, size=0x40000, X1=0x18000, X3=20000)
    seen, batches = [], []
    callback = _set_batch_trace(uc, seen, batches)  # noqa: F841  (kept while set)
    uc.emu_start(0x10000, 0x1000c)
    assert seen == [(0x10000, 0x18000 + 8 * i, 8, 0) for i in range(20000)]
    assert len(batches) > 2 and max(batches) <= 8192


def test_the_trace_resolves_an_access_whose_tlb_entry_was_replaced_in_the_run():
    # 0011: two pages whose TLB entries collide (1 MiB apart: 256 entries of 1 KiB pages,
    # TARGET_PAGE_BITS_MIN); the first one's entry is
    # replaced by the second's before the buffer is drained, so the buffer is drained before
    # the replacement: the first access keeps the physical address it was made at (the TLB
    # fill hook maps its page elsewhere from its second fill on)
    from unicorn import UC_HOOK_TLB_FILL, UC_PROT_ALL
    from unicorn.unicorn_const import UC_TLB_VIRTUAL
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    uc.mem_map(0x10000, 0x20000)
    uc.mem_write(0x10000, b"".join(w.to_bytes(4, "little") for w in (
        0xF9400022,    # ldr x2, [x1]
        0xF9400083,    # ldr x3, [x4]
        0xD503201F)))  # nop
    uc.ctl_set_tlb_mode(UC_TLB_VIRTUAL)
    fills = []

    def fill(_uc, vaddr, _access, entry, _data):
        page = vaddr & ~0xFFF
        fills.append(page)
        entry.paddr = {0x40000: 0x20000 if fills.count(page) == 1 else 0x28000,
                       0x140000: 0x21000}.get(page, page)
        entry.perms = UC_PROT_ALL
        return True
    uc.hook_add(UC_HOOK_TLB_FILL, fill)
    uc.reg_write(A.UC_ARM64_REG_X1, 0x40010)
    uc.reg_write(A.UC_ARM64_REG_X4, 0x140020)
    seen = []
    callback = _set_batch_trace(uc, seen)  # noqa: F841  (kept while the trace is set)
    uc.emu_start(0x10000, 0x10008)
    assert seen == [(0x10000, 0x20010, 8, 0), (0x10004, 0x21020, 8, 0)]


def test_a_trace_callback_may_clear_the_trace():
    # 0011 (review): the callback of uc_mem_trace_set clearing the trace from inside itself
    # (the buffer's later entries then go nowhere; a NULL callback was called before)
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    uc.mem_map(0x10000, 0x10000)
    uc.mem_write(0x10000, b"".join(w.to_bytes(4, "little") for w in (
        0xF9400022,    # ldr x2, [x1]
        0xF9400423,    # ldr x3, [x1, #8]
        0xF9400824,    # ldr x4, [x1, #16]
        0xD503201F)))  # nop
    uc.reg_write(A.UC_ARM64_REG_X1, 0x18000)
    from unicorn.unicorn_py3.unicorn import uclib
    seen = []

    def fn(_user, pc, pa, _size, _store):
        seen.append((pc, pa))
        uclib.uc_mem_trace_set(uc._uch, None, None)
    callback = _set_trace(uc, fn)  # noqa: F841  (kept while the trace is set)
    uc.emu_start(0x10000, 0x1000c)
    assert seen == [(0x10000, 0x18000)]


_ZVA_STXP = b"".join(w.to_bytes(4, "little") for w in (
    0xC87F0C22,    # 0x10000 ldxp x2, x3, [x1]
    0xC8241825,    # 0x10004 stxp w4, x5, x6, [x1]
    0xD50B7427,    # 0x10008 dc zva, x7
    0xF9400028,    # 0x1000c ldr x8, [x1]
    0xD503201F))   # 0x10010 nop


def test_accesses_of_helpers_a_hook_stopped_in_are_traced_once():
    # 0011 (review): a C helper's instruction completes when a memory hook stops the run in
    # one of its accesses (0010), so the trace keeps those accesses (0002 dropped the next
    # helper access after such a stop, possibly a later run's); STXP's two stores are
    # traced (0002 left the 64-bit pair out)
    uc = _code_at(_ZVA_STXP, X1=0x18000, X7=0x18040)
    seen = []
    callback = _set_batch_trace(uc, seen)  # noqa: F841  (kept while the trace is set)
    stops = []
    stop_once = _stopping_once(stops)
    hook = uc.hook_add(UC_HOOK_MEM_WRITE, stop_once, None, 0x18008, 0x18008)
    uc.emu_start(0x10000, 0x10008)
    assert uc.reg_read(A.UC_ARM64_REG_PC) == 0x10008 and uc.reg_read(A.UC_ARM64_REG_X4) == 0
    uc.hook_del(hook)
    stops.clear()
    uc.hook_add(UC_HOOK_MEM_WRITE, stop_once, None, 0x1807F, 0x1807F)
    uc.emu_start(0x10008, 0x10010)
    uc.emu_start(uc.reg_read(A.UC_ARM64_REG_PC), 0x10010)
    assert seen == [(0x10000, 0x18000, 8, 0), (0x10000, 0x18008, 8, 0),
                    (0x10004, 0x18000, 8, 1), (0x10004, 0x18008, 8, 1),
                    (0x10008, 0x18040, 64, 1), (0x1000C, 0x18000, 8, 0)]


def test_the_instruction_count_of_a_run_does_not_drain_the_trace_at_each_instruction():
    # 0011 (review): uc_emu_start's count is a code hook at every instruction; it needs no
    # accesses, so it drains nothing (the batches stay large)
    uc = _code_at(_LOOP, size=0x40000, X1=0x18000, X3=3000)
    seen, batches = [], []
    callback = _set_batch_trace(uc, seen, batches)  # noqa: F841  (kept while set)
    uc.emu_start(0x10000, 0x1000c, 0, 100000)
    assert len(seen) == 3000 and len(batches) < 100


def test_a_block_hook_sees_the_accesses_before_it_once_it_flushes_the_trace():
    # 0011: a block hook is not drained for (Unicorn may call it straight from the
    # translated code); uc_mem_trace_flush hands the buffer over when the hook needs it
    from unicorn import UC_HOOK_BLOCK
    from unicorn.unicorn_py3.unicorn import uclib
    flush = uclib.uc_mem_trace_flush
    flush.argtypes, flush.restype = (ctypes.c_void_p,), None
    uc = _code_at(_LOOP, X1=0x18000, X3=3)
    seen, at_blocks = [], []

    def block(u, _addr, _size, _data):
        before = len(seen)
        flush(u._uch)
        at_blocks.append((before, len(seen)))
    uc.hook_add(UC_HOOK_BLOCK, block)
    callback = _set_batch_trace(uc, seen)  # noqa: F841  (kept while the trace is set)
    uc.emu_start(0x10000, 0x1000c)
    assert at_blocks == [(0, 0), (0, 1), (1, 2)] and len(seen) == 3


def test_a_store_exclusive_pair_a_hook_stops_in_completes_first():
    # 0010: an access a helper written in C makes (STXP: do_paired_cmpxchg64) is not checked
    # in the middle of its instruction: the pair is written whole and the status is 0
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    uc.mem_map(0x10000, 0x10000)
    uc.mem_write(0x10000, b"".join(w.to_bytes(4, "little") for w in (
        0xC87F0C22,    # ldxp x2, x3, [x1]
        0xC8241825,    # stxp w4, x5, x6, [x1]
        0xD503201F)))  # nop
    uc.mem_write(0x18000, (0x1111).to_bytes(8, "little") + (0x2222).to_bytes(8, "little"))
    for reg, value in ((A.UC_ARM64_REG_X1, 0x18000), (A.UC_ARM64_REG_X4, 0x77),
                       (A.UC_ARM64_REG_X5, 0xAAAA), (A.UC_ARM64_REG_X6, 0xBBBB)):
        uc.reg_write(reg, value)
    uc.hook_add(UC_HOOK_MEM_WRITE, lambda u, *_: u.emu_stop())
    uc.emu_start(0x10000, 0x10008)
    words = [int.from_bytes(uc.mem_read(0x18000 + o, 8), "little") for o in (0, 8)]
    assert (words, uc.reg_read(A.UC_ARM64_REG_X4)) == ([0xAAAA, 0xBBBB], 0)


def test_the_inline_counter_counts_no_instruction_for_the_run_until_address():
    # 0009: a block that the run's "until" address ends counts the instructions it executed
    # (the exit's pseudo-instruction is in the block's icount, not in its size)
    from unicorn.unicorn_py3.unicorn import uclib
    from unicorn import UC_HOOK_BLOCK
    uc = _code_at(_STOPS, X1=0x18000)
    hook = uc.hook_add(UC_HOOK_BLOCK, lambda *_: None)
    counter = _BlockCounter(count=0, limit=1000)
    counter_set = uclib.uc_hook_block_counter
    counter_set.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    assert counter_set(uc._uch, hook, ctypes.byref(counter)) == 0
    uc.emu_start(0x10000, 0x10008)
    assert (counter.count, counter.last_insns) == (2, 2)


def test_code_translated_with_the_inline_counter_calls_the_hook_once_it_is_removed():
    # 0009: the fast path checks at run time that the counter is still installed
    every = [(0x10000, 8), (0x10008, 12), (0x10014, 4)]
    from unicorn import UC_HOOK_BLOCK
    from unicorn.unicorn_py3.unicorn import uclib
    uc = _code_at(_BLOCKS)
    called = []
    hook = uc.hook_add(UC_HOOK_BLOCK, lambda _u, addr, size, _d: called.append((addr, size)))
    counter = _BlockCounter(count=0, limit=1000)
    counter_set = uclib.uc_hook_block_counter
    counter_set.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    assert counter_set(uc._uch, hook, ctypes.byref(counter)) == 0
    uc.emu_start(0x10000, 0x10018)
    assert (called, counter.count) == ([], 6)
    assert counter_set(uc._uch, hook, None) == 0
    uc.emu_start(0x10000, 0x10018)
    assert (called, counter.count) == (every, 6)


def _traced_blocks(limit: int, blocks: bool = True) -> tuple:
    """Run _LOOP three times round (X3 = 3) with a block hook that has the inline counter
    (limit ``limit``), the batched trace set and, with ``blocks``, uc_mem_trace_blocks (0014):
    (the entries handed over, each a block (address, instructions, last word) or an access
    (PC, physical address); the blocks the hook was called for; the counter's fields)."""
    from unicorn import UC_HOOK_BLOCK
    from unicorn.unicorn_py3.unicorn import uclib
    uc = _code_at(_LOOP, X1=0x18000, X3=3)
    called, seen = [], []
    hook = uc.hook_add(UC_HOOK_BLOCK, lambda _u, addr, size, _d: called.append((addr, size)))
    counter = _BlockCounter(count=0, limit=limit)
    counter_set = uclib.uc_hook_block_counter
    counter_set.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    assert counter_set(uc._uch, hook, ctypes.byref(counter)) == 0

    def fn(_user, entries, count):
        for i in range(count):
            e = entries[i]
            if e.info >> 60 == 0xF:   # (uc_mem_trace_entry_is_block)
                seen.append((e.addr, e.info >> 32 & 0xFFFFFFF, e.info & 0xFFFFFFFF))
            else:
                seen.append((e.info & ((1 << 56) - 1), e.addr))
    callback = _BATCH_CALLBACK(fn)  # noqa: F841  (kept while the trace is set)
    trace_set = uclib.uc_mem_trace_batch_set
    trace_set.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    assert trace_set(uc._uch, ctypes.cast(callback, ctypes.c_void_p), None) == 0
    if blocks:
        trace_blocks = uclib.uc_mem_trace_blocks
        trace_blocks.argtypes = (ctypes.c_void_p, ctypes.c_bool)
        assert trace_blocks(uc._uch, True) == 0
    uc.emu_start(0x10000, 0x1000c)
    return seen, called, (counter.count, counter.last_pc, counter.last_insns)


def test_the_blocks_the_inline_counter_counts_go_to_the_trace_with_their_last_word():
    # 0014: each block the translated code counts is an entry of the buffer, before its
    # accesses: its address, its length and the word of its last instruction (b.ne); the
    # counter's last_pc and last_insns are left to the embedder
    loop = [(0x10000, 3, 0x54FFFFC1)]
    access = [(0x10000, 0x18000 + 8 * i) for i in range(3)]
    seen, called, counter = _traced_blocks(limit=1000)
    assert seen == [loop[0], access[0], loop[0], access[1], loop[0], access[2]]
    assert (called, counter) == ([], (9, 0, 0))
    # the blocks the hook is called for (past the limit) are not in the buffer
    seen, called, counter = _traced_blocks(limit=6)
    assert seen == [loop[0], access[0], loop[0], access[1], access[2]]
    assert (called, counter) == ([(0x10000, 12)], (6, 0, 0))
    # without uc_mem_trace_blocks, the fast path sets last_pc and last_insns as before
    seen, called, counter = _traced_blocks(limit=1000, blocks=False)
    assert (seen, called, counter) == (access, [], (9, 0x10000, 3))


def test_translated_code_is_dropped_by_physical_address():
    """0012: UC_CTL_TB_REMOVE_CACHE_PHYS drops an engine's translated code of a physical
    range that another engine over the same memory rewrote (its own stores would have been
    seen), and only that range; addresses without RAM are skipped, an empty range is an
    error."""
    from unicorn import UcError
    ram = ctypes.create_string_buffer(0x10000)
    words = {0x0: 0xD2800020,      # mov x0, #1
             0x4: 0x14000040,      # b .+0x100 (the run's end in a block of its own)
             0x104: 0xD503201F}    # nop
    for offset, word in words.items():
        ram[offset:offset + 4] = word.to_bytes(4, "little")
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    uc.mem_map_ptr(0x10000, 0x10000, 7, ctypes.addressof(ram))

    def run() -> int:
        uc.emu_start(0x10000, 0x10104)
        return uc.reg_read(A.UC_ARM64_REG_X0)

    def drop(start: int, end: int) -> None:
        uc.ctl(native.UC_CTL_TB_REMOVE_CACHE_PHYS, UC_CTL_IO_WRITE, ctypes.c_uint64(start),
               ctypes.c_uint64(end))

    assert run() == 1
    ram[0:4] = (0xD2800040).to_bytes(4, "little")      # mov x0, #2, by another engine
    assert run() == 1                                   # (translated before: not seen)
    drop(0x11000, 0x11040)
    drop(0x9000_0000, 0x9000_0040)
    assert run() == 1
    drop(0xFFC0, 0x10004)                               # (from below RAM, a hole)
    assert run() == 2
    try:
        drop(0x10004, 0x10000)
    except UcError as exc:
        assert exc.errno == 15   # UC_ERR_ARG
    else:
        raise AssertionError("an empty range was accepted")


def test_a_run_returns_at_a_yield_when_asked():
    """0013: with UC_CTL_EXIT_ON_YIELD set, uc_emu_start returns after a WFE (EXCP_YIELD) with
    the PC after it; without, the loop goes on through every WFE. Reading the control gives
    the yields so far either way."""
    from unicorn.unicorn_const import UC_CTL_IO_READ
    UC_CTL_EXIT_ON_YIELD = native.UC_CTL_EXIT_ON_YIELD
    uc = _code_at(b"".join(w.to_bytes(4, "little") for w in (
        0x91000400,     # add x0, x0, #1
        0xD503205F,     # wfe
        0x17FFFFFE)))   # b .-8
    yields = ctypes.c_uint64()

    def read() -> int:
        uc.ctl(UC_CTL_EXIT_ON_YIELD, UC_CTL_IO_READ, ctypes.byref(yields))
        return yields.value

    uc.emu_start(0x10000, 0, 0, 30)
    assert uc.reg_read(A.UC_ARM64_REG_X0) == 10 and read() == 10
    uc.ctl(UC_CTL_EXIT_ON_YIELD, UC_CTL_IO_WRITE, ctypes.c_int(1))
    uc.emu_start(uc.reg_read(A.UC_ARM64_REG_PC), 0)
    assert uc.reg_read(A.UC_ARM64_REG_PC) == 0x10008
    assert uc.reg_read(A.UC_ARM64_REG_X0) == 11 and read() == 11
