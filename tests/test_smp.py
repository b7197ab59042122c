"""Several PEs (``--smp``, spe_emu/cpu/smp.py): PSCI CPU_ON/CPU_OFF/AFFINITY_INFO with the
PSCI spec's return codes (DEN 0022D.b §5.1.4, §5.1.5), MPIDR_EL1 per PE, exclusives and LSE
atomics across PEs (an exact total), instruction-cache maintenance reaching the other PEs'
translated code (Arm ARM B2.4.4), WFI parking, and deterministic interleaving.

The guests are assembled with binutils (``aarch64-linux-gnu-as``; skipped without it) and
booted as raw binaries at the virt board's kernel address, PSCI through HVC (boot EL 1)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from asmrun import alias_stage1

from spe_emu.cpu.machine import Machine, MachineConfig
from spe_emu.devices.psci import AffinityState, PsciReturn

AS, LD, OBJCOPY = (shutil.which(f"aarch64-linux-gnu-{t}") for t in ("as", "ld", "objcopy"))
pytestmark = pytest.mark.skipif(not (AS and LD and OBJCOPY),
                                reason="binutils-aarch64-linux-gnu is not installed")

LOAD = 0x4008_0000   # the virt board's raw-binary address (BoardSpec.kernel_offset)

PRELUDE = """
        .equ UART, 0x09000000
        .equ PSCI_CPU_ON, 0xC4000003
        .equ PSCI_AFF_INFO, 0xC4000004
        .equ PSCI_CPU_OFF, 0x84000002
        .equ PSCI_SYSTEM_OFF, 0x84000008
        .global _start
        .text
_start:
        ldr x1, =stacks + 4096
        mov sp, x1
"""
# (secondary entry: x0 = context id = the PE number; its own 4 KiB stack)
SECONDARY_STACK = """
        ldr x1, =stacks
        add x2, x0, #1
        lsl x2, x2, #12
        add x1, x1, x2
        add sp, x1, #4096
"""
LIBRARY = """
puts:   ldr x1, =UART
1:      ldrb w2, [x0], #1
        cbz w2, 2f
        strb w2, [x1]
        b 1b
2:      ret
off:    ldr w0, =PSCI_SYSTEM_OFF
        hvc #0
fail:   adr x0, failmsg
        bl puts
        b off
okmsg:  .asciz "ok\\n"
failmsg: .asciz "FAIL\\n"
        .balign 8
        .ltorg
        .bss
        .balign 4096
stacks: .space 4096 * 9
"""


def build(tmp_path: Path, body: str) -> bytes:
    """Assemble PRELUDE + body + LIBRARY and link it at LOAD; the flat binary."""
    src = tmp_path / "smp.S"
    src.write_text(PRELUDE + body + LIBRARY)
    obj, elf, raw = (tmp_path / n for n in ("smp.o", "smp.elf", "smp.bin"))
    subprocess.run([AS, "-march=armv8.2-a+profile", str(src), "-o", str(obj)], check=True)
    subprocess.run([LD, f"-Ttext={LOAD:#x}", str(obj), "-o", str(elf)], check=True)
    subprocess.run([OBJCOPY, "-O", "binary", str(elf), str(raw)], check=True)
    return raw.read_bytes()


def profile_el1(size: int) -> str:
    """Profiling at EL1 on: the Profiling Buffer from X0 (``size`` bytes, a multiple of 4 KiB
    below 16 MiB), interval 256, no filter (uses X0, X1)."""
    return f"""
        msr pmbptr_el1, x0
        add x1, x0, #{size:#x}
        orr x1, x1, #1                // PMBLIMITR_EL1: LIMIT, E = 1
        msr pmblimitr_el1, x1
        msr pmbsr_el1, xzr
        mov x0, #0x100                // PMSIRR_EL1.INTERVAL: 256
        msr pmsirr_el1, x0
        msr pmsicr_el1, xzr
        msr pmsfcr_el1, xzr
        mov x0, #2                    // PMSCR_EL1.E1SPE
        msr pmscr_el1, x0
        isb
"""


def symbols(tmp_path: Path) -> dict[str, int]:
    """The addresses of the symbols of the program :func:`build` linked last in ``tmp_path``."""
    nm = subprocess.run([shutil.which("aarch64-linux-gnu-nm"), str(tmp_path / "smp.elf")],
                        capture_output=True, text=True, check=True).stdout
    return {line.split()[2]: int(line.split()[0], 16) for line in nm.splitlines()}


def boot(tmp_path: Path, code: bytes, smp: int = 4, quantum: int = 100_000,
         mode: str = "fast") -> tuple[Machine, object, bytes]:
    out: list[bytes] = []
    m = Machine(MachineConfig(smp=smp, psci="hvc", max_insns=None, mode=mode,
                              console=out.append, outdir=tmp_path, smp_quantum=quantum))
    m.uc.mem_write(LOAD, code)
    m.reset(LOAD)
    result = m.run()
    return m, result, b"".join(out)


def start_all(n: int) -> str:
    """PE 0 starts PEs 1..n-1 at ``secondary`` with their number as context id; any
    result but SUCCESS fails."""
    return f"""
        mov x19, #1
10:     ldr w0, =PSCI_CPU_ON
        mov x1, x19
        adr x2, secondary
        mov x3, x19
        hvc #0
        cbnz x0, fail
        add x19, x19, #1
        cmp x19, #{n}
        b.ne 10b
"""


COUNT = 3000
ATOMICS = start_all(4) + f"""
        bl work
        ldr x1, =done
20:     ldr w2, [x1]
        cmp w2, #3
        b.ne 20b
        ldr x1, =counter
        ldr x0, [x1]
        ldr x2, ={8 * COUNT}
        cmp x0, x2
        b.ne fail
        adr x0, okmsg
        bl puts
        b off
secondary:
{SECONDARY_STACK}
        bl work
        ldr x1, =done
        mov w2, #1
        ldadd w2, w3, [x1]
        ldr w0, =PSCI_CPU_OFF
        hvc #0
        b fail
work:   ldr x1, =counter
        ldr x4, ={COUNT}
1:      ldxr x2, [x1]
        add x2, x2, #1
        stxr w3, x2, [x1]
        cbnz w3, 1b
        subs x4, x4, #1
        b.ne 1b
        ldr x4, ={COUNT}
        mov x5, #1
2:      ldadd x5, x6, [x1]
        subs x4, x4, #1
        b.ne 2b
        ret
        .data
        .balign 64
counter: .quad 0
done:   .word 0
        .text
"""


@pytest.mark.parametrize("quantum", [1, 2, 100_000])
def test_exclusives_and_atomics_give_the_exact_total(tmp_path, quantum):
    """Four PEs each add COUNT with LDXR/STXR and COUNT with LDADD to one counter: the total
    is exact whether time slices end between a load-exclusive and its store-exclusive (a
    quantum of 1 or 2 instructions, shorter than the loop's block, splits it) or not; the secondaries' CPU_OFF leaves the others
    running, and PE 0's SYSTEM_OFF ends the run."""
    m, result, console = boot(tmp_path, build(tmp_path, ATOMICS), quantum=quantum)
    assert console == b"ok\n"
    assert result.exit_via == "psci-system-off"
    assert [p["pe"] for p in result.per_pe] == [0, 1, 2, 3]
    assert result.instructions == sum(p["instructions"] for p in result.per_pe)
    assert all(p["instructions"] > 5 * COUNT for p in result.per_pe)
    assert [x.pe.powered for x in m.smp.machines] == [True, False, False, False]


def test_interleaving_is_deterministic(tmp_path):
    """The same program and quantum give the same instruction counts on every PE (the
    store-exclusive retries included) and the same console."""
    code = build(tmp_path, ATOMICS)
    runs = [boot(tmp_path / str(i), code, quantum=2)
            for i in range(2) if (tmp_path / str(i)).mkdir() is None]
    assert runs[0][1].per_pe == runs[1][1].per_pe
    assert runs[0][2] == runs[1][2] == b"ok\n"
    # (slices of 2 instructions split LDXR/STXR pairs: store-exclusives failed and were
    # retried, which slices of 100,000, ending at block boundaries, never do)
    (tmp_path / "big").mkdir()
    big = boot(tmp_path / "big", code, quantum=100_000)[1]
    assert runs[0][1].per_pe[1]["instructions"] > big.per_pe[1]["instructions"] + 100


PSCI = f"""
        // MPIDR_EL1 of PE 0: Aff0 = 0, bit 31 set, U = 0
        mrs x0, mpidr_el1
        ldr x1, =0x80000000
        cmp x0, x1
        b.ne fail
        // AFFINITY_INFO of PE 1 before CPU_ON: OFF (1); of Aff0 = 9: INVALID_PARAMETERS
        ldr w0, =PSCI_AFF_INFO
        mov x1, #1
        mov x2, #0
        hvc #0
        cmp x0, #{AffinityState.OFF}
        b.ne fail
        ldr w0, =PSCI_AFF_INFO
        mov x1, #9
        mov x2, #0
        hvc #0
        cmn x0, #{-PsciReturn.INVALID_PARAMETERS}
        b.ne fail
        // CPU_ON: of Aff0 = 9 INVALID_PARAMETERS, a misaligned entry INVALID_ADDRESS, of
        // PE 0 itself ALREADY_ON
        ldr w0, =PSCI_CPU_ON
        mov x1, #9
        adr x2, secondary
        hvc #0
        cmn x0, #{-PsciReturn.INVALID_PARAMETERS}
        b.ne fail
        ldr w0, =PSCI_CPU_ON
        mov x1, #1
        adr x2, secondary
        add x2, x2, #2
        hvc #0
        cmn x0, #{-PsciReturn.INVALID_ADDRESS}
        b.ne fail
        ldr w0, =PSCI_CPU_ON
        mov x1, #0
        adr x2, secondary
        hvc #0
        cmn x0, #{-PsciReturn.ALREADY_ON}
        b.ne fail
        // start PE 1 with context id 0x1234: it stores its MPIDR_EL1 and x0, then turns off
        ldr w0, =PSCI_CPU_ON
        mov x1, #1
        adr x2, secondary
        ldr x3, =0x1234
        hvc #0
        cbnz x0, fail
        ldr w0, =PSCI_CPU_ON      // ON now: ALREADY_ON
        mov x1, #1
        adr x2, secondary
        hvc #0
        cmn x0, #{-PsciReturn.ALREADY_ON}
        b.ne fail
30:     ldr w0, =PSCI_AFF_INFO    // until it is OFF again
        mov x1, #1
        mov x2, #0
        hvc #0
        cmp x0, #{AffinityState.OFF}
        b.ne 30b
        ldr x1, =seen
        ldp x2, x3, [x1]
        ldr x4, =0x80000001
        cmp x2, x4
        b.ne fail
        ldr x4, =0x1234
        cmp x3, x4
        b.ne fail
        adr x0, okmsg
        bl puts
        b off
secondary:
        mrs x2, mpidr_el1
        ldr x1, =seen
        stp x2, x0, [x1]
        ldr w0, =PSCI_CPU_OFF
        hvc #0
        b fail
        .data
        .balign 16
seen:   .quad 0, 0
        .text
"""


def test_psci_power_states_and_mpidr(tmp_path):
    """DEN 0022D.b: CPU_ON of a PE that does not exist is INVALID_PARAMETERS, of an ON PE
    ALREADY_ON, with a misaligned entry INVALID_ADDRESS; a started PE enters at the entry
    point with the context id in X0 and reads its own MPIDR_EL1 (0x80000001); AFFINITY_INFO
    follows it OFF -> ON -> OFF (CPU_OFF)."""
    m, result, console = boot(tmp_path, build(tmp_path, PSCI), smp=2)
    assert console == b"ok\n", console
    assert result.exit_via == "psci-system-off"


SMC_CODE = start_all(2) + """
        // PE 0 runs `patched` (translated now: it returns 1), lets PE 1 rewrite it to
        // return 2 (with DC CVAU, IC IVAU, DSB, ISB), and runs it again: 2.
        bl patched
        cmp x0, #1
        b.ne fail
        ldr x1, =flag
        mov w2, #1
        str w2, [x1]
40:     ldr w2, [x1]
        cmp w2, #2
        b.ne 40b
        isb
        bl patched
        cmp x0, #2
        b.ne fail
        adr x0, okmsg
        bl puts
        b off
patched:
        mov x0, #1
        ret
secondary:
        ldr x1, =flag
50:     ldr w2, [x1]
        cmp w2, #1
        b.ne 50b
        adr x3, patched
        ldr w4, =0xd2800040       // mov x0, #2
        str w4, [x3]
        dc cvau, x3
        dsb ish
        ic ivau, x3
        dsb ish
        isb
        mov w2, #2
        str w2, [x1]
        ldr w0, =PSCI_CPU_OFF
        hvc #0
        .data
        .balign 64
flag:   .word 0
        .text
"""


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_instruction_cache_maintenance_reaches_the_other_pe(tmp_path, mode):
    """Arm ARM B2.4.4: code one PE writes, cleaned to the PoU and invalidated from the
    instruction caches (IC IVAU is broadcast to the Inner Shareable domain), runs as written
    on another PE after its ISB, though that PE had translated the old code."""
    m, result, console = boot(tmp_path, build(tmp_path, SMC_CODE), smp=2, mode=mode)
    assert console == b"ok\n", console


SMC_ALIAS_CODE = SMC_CODE.replace("""
        adr x3, patched
""", f"""
        // stage 1: VA 0x4000_0000 and its alias VA 0x1_4000_0000 map PA 0x4000_0000
{alias_stage1(LOAD + 0x10_0000, "x5")}
        adr x3, patched
        movz x5, #1, lsl #32
        add x3, x3, x5                     // `patched` at the alias (ALIAS)
""")


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_instruction_cache_maintenance_by_an_alias_reaches_the_other_pe(tmp_path, mode):
    """IC IVAU names a line by the virtual address of the PE that executes it: PE 1 rewrites
    ``patched`` and invalidates it through an alias (VA = PA + 4 GiB, its MMU on) that PE 0
    (MMU off) has no mapping for; PE 0 runs the new code (the line is dropped from its
    translated code by physical address: native.ic_replay)."""
    assert SMC_ALIAS_CODE != SMC_CODE
    m, result, console = boot(tmp_path, build(tmp_path, SMC_ALIAS_CODE), smp=2, mode=mode)
    assert console == b"ok\n", console
    assert m.smp.machines[1].sysreg_filter.ic_logged == 1


IC_ALL = """
        ic iallu                           // EL2, HCR_EL2.FB 0: this PE's alone
        ldr x0, =(1 << 31) | (1 << 9)      // HCR_EL2.{RW, FB}
        msr hcr_el2, x0
        adr x0, vectors
        msr vbar_el1, x0
        adr x0, el1
        msr elr_el2, x0
        mov x0, #0x3c5                     // EL1h, DAIF masked
        msr spsr_el2, x0
        eret
el1:    msr hcr_el2, xzr                   // UNDEFINED at EL1: HCR_EL2.FB stays 1
        ic iallu                           // EL1 under HCR_EL2.FB: IC IALLUIS
        ic ialluis
        adr x1, el1
        ic ivau, x1
        b off
        .balign 2048
vectors: .space 0x200
        mrs x9, elr_el1                    // (current EL, SP_ELx, synchronous: skip it)
        add x9, x9, #4
        msr elr_el1, x9
        eret
"""


def test_only_broadcast_instruction_cache_invalidations_drop_all_the_others_code(tmp_path):
    """Arm ARM C5.3: IC IALLU invalidates the executing PE's instruction caches, IC IALLUIS
    every PE's in the Inner Shareable domain, and so does IC IALLU at EL1 while
    HCR_EL2.FB is 1 (D19.2, "Force broadcast"); IC IVAU names a line. The native SYS hook
    counts those that make the other PEs drop all their translated code (``ic_all``) and
    logs the line (``ic_logged``). An MSR HCR_EL2 at EL1 (UNDEFINED) changes nothing."""
    out: list[bytes] = []
    m = Machine(MachineConfig(smp=2, psci="hvc", boot_el=2, max_insns=None,
                              console=out.append, outdir=tmp_path))
    m.uc.mem_write(LOAD, build(tmp_path, IC_ALL))
    m.reset(LOAD)
    m.run()
    flt = m.sysreg_filter
    assert m.exceptions_taken == 1   # (the UNDEFINED MSR)
    assert (flt.ic_seen, flt.ic_all, flt.ic_logged) == (4, 2, 1)


# (PE 1 rewrites `patched` and cleans it to the PoU only; PE 0, which runs it, invalidates
# it from its own instruction cache, by IC_FORM, and runs the new code)
OWN_IC = SMC_CODE.replace("""
        isb
        bl patched
        cmp x0, #2
""", """
        adr x3, patched
        IC_FORM
        dsb ish
        isb
        bl patched
        cmp x0, #2
""").replace("""
        ic ivau, x3
        dsb ish
        isb
        mov w2, #2
""", """
        mov w2, #2
""")


@pytest.mark.parametrize("form", ["ic ivau, x3", "ic iallu", "ic ialluis"])
def test_the_pe_that_runs_code_another_wrote_may_invalidate_it_itself(tmp_path, form):
    """Arm ARM B2.4.4: the PE that executes code another PE wrote (and cleaned to the PoU) may
    do the instruction cache invalidation itself, by line (IC IVAU) or whole (IC IALLU, its
    own caches; IC IALLUIS); its engine, which saw none of those stores, drops that code."""
    assert OWN_IC.count("IC_FORM") == 1 and OWN_IC.count("ic ivau") == 0
    code = build(tmp_path, OWN_IC.replace("IC_FORM", form))
    m, result, console = boot(tmp_path, code, smp=2)
    assert console == b"ok\n", console


WFE_WAIT = start_all(2) + """
        // PE 0 works 400,000 instructions, then sets the flag PE 1 waits for in WFE
        ldr x4, =200000
30:     subs x4, x4, #1
        b.ne 30b
        ldr x1, =flag
        mov w2, #1
        stlr w2, [x1]
        sev
        ldr x1, =done
31:     ldr w2, [x1]
        cbz w2, 31b
        adr x0, okmsg
        bl puts
        b off
secondary:
        ldr x1, =flag
        sevl
32:     wfe
        ldr w2, [x1]
        cbz w2, 32b
        ldr x1, =done
        mov w2, #1
        str w2, [x1]
        ldr w0, =PSCI_CPU_OFF
        hvc #0
        .data
        .balign 64
flag:   .word 0
done:   .word 0
        .text
"""


def test_a_pe_waiting_in_wfe_yields_to_the_others(tmp_path):
    """A PE that waits for an event in WFE while another PE runs ends its slice at the WFE
    (QEMU's round-robin loop runs the next vCPU at EXCP_YIELD; patches/unicorn/0013): it
    retires a few instructions a round instead of spinning through every quantum of PE 0's
    400,000-instruction loop, and its time keeps up with PE 0's."""
    m, result, console = boot(tmp_path, build(tmp_path, WFE_WAIT), smp=2)
    assert console == b"ok\n", console
    waiter = result.per_pe[1]["instructions"]
    assert waiter < 100, waiter
    pe0, pe1 = m.smp.machines
    assert abs(pe1.clock.ticks() - pe0.clock.ticks()) < 2 * MachineConfig.smp_quantum


WFE_DEADLOCK = start_all(2) + """
        ldr x1, =flag
30:     wfe
        ldr w2, [x1]
        cbz w2, 30b
        b off
secondary:
        ldr x1, =flag
31:     wfe
        ldr w2, [x1]
        cbz w2, 31b
        b off
        .data
        .balign 64
flag:   .word 0
        .text
"""


def test_pes_that_all_wait_in_wfe_spend_the_instruction_budget(tmp_path):
    """Every runnable PE waiting in WFE for a flag nobody sets (a guest deadlock): after a
    round in which every PE yielded, the next runs the slices through, so the run ends at
    its instruction budget as one PE's would, and the PEs' time stays near their instruction
    counts (a yield moves a PE's time to the round's end: with every PE yielding, time would
    run a quantum a round for a few instructions)."""
    from spe_emu.errors import GuestRunaway
    budget = 1_000_000
    out: list[bytes] = []
    m = Machine(MachineConfig(smp=2, psci="hvc", max_insns=budget, console=out.append,
                              outdir=tmp_path))
    m.uc.mem_write(LOAD, build(tmp_path, WFE_DEADLOCK))
    m.reset(LOAD)
    with pytest.raises(GuestRunaway):
        m.run()
    assert all(pe.clock.ticks() < 3 * budget for pe in m.smp.machines), \
        [pe.clock.ticks() for pe in m.smp.machines]


RESTART = """
        // PE 1 profiles the load at `patchme` and turns off; PE 0 rewrites it to a store
        // (DC CVAU, IC IVAU, ISB) and starts PE 1 again, which profiles it into the second
        // half of the buffer
        ldr w0, =PSCI_CPU_ON
        mov x1, #1
        adr x2, secondary
        mov x3, #0
        hvc #0
        cbnz x0, fail
        bl waitoff
        adr x3, patchme
        ldr w4, =0xf9000022       // str x2, [x1]
        str w4, [x3]
        dc cvau, x3
        dsb ish
        ic ivau, x3
        dsb ish
        isb
        ldr w0, =PSCI_CPU_ON
        mov x1, #1
        adr x2, secondary
        mov x3, #1
        hvc #0
        cbnz x0, fail
        bl waitoff
        adr x0, okmsg
        bl puts
        b off
waitoff:
        mov x21, x30
130:    ldr w0, =PSCI_AFF_INFO
        mov x1, #1
        mov x2, #0
        hvc #0
        cmp x0, #1                // OFF
        b.ne 130b
        ret x21
secondary:
        ldr x5, =spebuf
        add x0, x5, x0, lsl #15   // its half of the buffer (context id 0, then 1)
""" + profile_el1(0x8000) + """
        ldr x4, =20000
140:    bl bump
        subs x4, x4, #1
        b.ne 140b
        msr pmscr_el1, xzr
        isb
        psb csync
        dsb nsh
        ldr w0, =PSCI_CPU_OFF
        hvc #0
bump:   ldr x1, =data
patchme:
        ldr x2, [x1]
        add x2, x2, #1
        ret
        .data
        .balign 64
data:   .quad 0
        .bss
        .balign 4096
spebuf: .space 0x10000
        .text
"""


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_a_pe_started_again_profiles_the_code_as_it_is_now(tmp_path, mode):
    """A PE that CPU_OFF turned off and CPU_ON starts again misses the instruction cache
    maintenance done meanwhile: it starts with nothing of code remembered (translated
    code, TLB, the native hooks' verdicts and record templates), so its samples of an
    instruction another PE rewrote meanwhile (a load, now a store) are of the new one."""
    from spe_emu.spe.packets import iter_records
    m, result, console = boot(tmp_path, build(tmp_path, RESTART), smp=2, mode=mode)
    assert console == b"ok\n", console
    syms = symbols(tmp_path)
    phases = []
    for half in (0, 1):
        data = bytes(m.uc.mem_read(syms["spebuf"] + half * 0x8000, 0x8000))
        phases.append({r.operation[:2] for r in iter_records(data.rstrip(b"\0") + bytes(64))
                       if r.pc == syms["patchme"]})
    assert phases == [{"LD"}, {"ST"}], phases


WFI_IDLE = start_all(2) + """
        ldr x1, =flag
60:     ldr w2, [x1]
        cbz w2, 60b
        adr x0, okmsg
        bl puts
        b off
secondary:
        ldr x1, =flag
        mov w2, #1
        str w2, [x1]
70:     wfi
        b 70b
        .data
        .balign 64
flag:   .word 0
        .text
"""


def test_a_pe_waiting_in_wfi_parks(tmp_path):
    """A PE in WFI with no interrupt to wake it retires nothing while the others run (its
    instruction count stays where its WFI was)."""
    m, result, console = boot(tmp_path, build(tmp_path, WFI_IDLE), smp=2)
    assert console == b"ok\n"
    pe1 = result.per_pe[1]["instructions"]
    assert pe1 < 20
    assert m.smp.machines[1].pe.parked


def test_every_pe_waiting_with_nothing_to_wake_it_is_a_guest_error(tmp_path):
    """Every ON PE in WFI and no event on the clock: a guest error naming the PEs, as one
    PE's WFI is."""
    code = build(tmp_path, start_all(2) + """
80:     wfi
        b 80b
secondary:
90:     wfi
        b 90b
""")
    from spe_emu.errors import GuestError
    with pytest.raises(GuestError, match=r"every PE waits in WFI \(PE 0 at 0x.*PE 1 at"):
        boot(tmp_path, code, smp=2)


def test_one_pe_is_unchanged_by_the_smp_machinery(tmp_path):
    """smp=1: no scheduler, no per-PE list in the result, MPIDR_EL1 not hooked."""
    code = build(tmp_path, """
        mrs x0, mpidr_el1
        ldr x1, =0x80000000
        cmp x0, x1
        b.ne fail
        adr x0, okmsg
        bl puts
        b off
""")
    m, result, console = boot(tmp_path, code, smp=1)
    assert console == b"ok\n"
    assert m.smp is None and result.per_pe == []


def test_models_of_several_pes_are_coherent():
    """model.c spe_model_join: a store invalidates the line in the other PEs' L1D and L2; a
    load that misses its own caches while a peer holds the line modified is served by the
    peer (LEVEL_PEER), which keeps a shared copy (its next store snoops again); the LLC is
    shared."""
    from spe_emu import native
    geometry = (64, 0, 512, 4, 0, 0, 16384, 16)
    pe0, pe1, pe2 = (native.Model(geometry) for _ in range(3))
    native.join_models([pe0, pe1, pe2])
    level = lambda out: out >> native.OUT_LEVEL_SHIFT   # noqa: E731
    line = 0x1000
    assert level(pe0.access(line, True)) == native.LEVEL_DRAM
    assert level(pe1.access(line, True)) == native.LEVEL_LLC      # (the shared LLC)
    assert level(pe1.store(line)) == native.LEVEL_L1D             # PE 1 owns it now
    assert not pe0.touch(native.TOUCH_L1D, line, update=False)    # PE 0's copy invalidated
    assert level(pe0.access(line, False)) == native.LEVEL_PEER    # (read only: no change)
    assert level(pe2.access(line, True)) == native.LEVEL_PEER     # served by PE 1
    assert level(pe0.access(line, True)) == native.LEVEL_LLC      # shared now: not a peer's
    assert level(pe1.access(line, True)) == native.LEVEL_L1D      # PE 1 keeps its copy
    pe0.store(line)                                               # PE 0 writes: snoops
    assert not pe1.touch(native.TOUCH_L1D, line, update=False)
    assert not pe2.touch(native.TOUCH_L1D, line, update=False)
    assert level(pe2.access(line, True)) == native.LEVEL_PEER
    assert pe2.stats()["peer_hits"] == 2
    # false sharing: two PEs writing one line in turn -> every load of the other is a peer's
    # (a store to a line the PE still holds shared hits its L1D, and invalidates the other's)
    other = 0x2000
    pe0.store(other)
    pe1.store(other)
    assert [level(pe0.access(other, True)), level(pe1.store(other)),
            level(pe0.access(other, True))] == [native.LEVEL_PEER, native.LEVEL_L1D,
                                                 native.LEVEL_PEER]


def false_sharing(offset: int) -> str:
    """PE 0 profiles itself (SPE at EL1, interval 256, buffer at ``spebuf``) while it and PE
    1 each increment their own counter 2,000 times: counters 8 bytes apart share a line
    (``offset`` 8), 64 apart do not."""
    return start_all(2) + f"""
        ldr x0, =spebuf
{profile_el1(0x10000)}
        ldr x1, =counters + {offset}
        bl bump
        ldr x1, =done
110:    ldr w2, [x1]
        cbz w2, 110b
        msr pmscr_el1, xzr
        isb
        psb csync
        dsb nsh
        adr x0, okmsg
        bl puts
        b off
secondary:
        ldr x1, =counters
        bl bump
        ldr x1, =done
        mov w2, #1
        str w2, [x1]
        ldr w0, =PSCI_CPU_OFF
        hvc #0
bump:   mov x4, #2000
120:    ldr x2, [x1]
        add x2, x2, #1
        str x2, [x1]
        subs x4, x4, #1
        b.ne 120b
        ret
        .data
        .balign 64
counters: .space 128
done:   .word 0
        .bss
        .balign 4096
spebuf: .space 0x10000
        .text
"""


@pytest.mark.parametrize("offset, peer", [(8, True), (64, False)])
def test_false_sharing_shows_as_peer_core_loads(tmp_path, offset, peer):
    """Two PEs incrementing counters in one cache line 100,000 times each (the default
    quantum: sharing shortens the slices): some of PE 0's sampled loads of its counter are
    served by PE 1's cache (Data Source 0x9, peer core, as Neoverse cores encode it;
    PMSIDR_EL1.LDS = 1) with peer_latency; counters in separate lines never are."""
    from spe_emu.spe.config import SpeConfig
    from spe_emu.spe.packets import iter_records
    from spe_emu.spe.records import DS_PEER_CORE
    code = build(tmp_path, false_sharing(offset).replace("mov x4, #2000", "ldr x4, =100000"))
    out: list[bytes] = []
    m = Machine(MachineConfig(smp=2, psci="hvc", max_insns=None, console=out.append,
                              outdir=tmp_path, spe=SpeConfig(lds=1)))
    m.uc.mem_write(LOAD, code)
    m.reset(LOAD)
    result = m.run()
    assert b"".join(out) == b"ok\n"
    syms = symbols(tmp_path)
    spebuf, counter = syms["spebuf"], syms["counters"] + offset
    end = m.spu.regs["PMBPTR_EL1"]
    records = list(iter_records(bytes(m.uc.mem_read(spebuf, end - spebuf))))
    loads = [r for r in records
             if r.data_va == counter and r.operation.startswith("LD")]
    assert len(loads) >= 5, (len(records), result.samples)
    sources = {r.data_source for r in loads}
    assert (DS_PEER_CORE in sources) == peer, sources
    # (the execution latency of a peer's line: peer_latency cycles, within TOT)
    peers = [r for r in loads if r.data_source == DS_PEER_CORE]
    assert all(r.latency_total >= SpeConfig().peer_latency for r in peers)


@pytest.mark.parametrize("offset", [8, 64])
def test_sharing_shortens_the_slices(tmp_path, offset):
    """With the default quantum (100,000 instructions) a line two PEs fight over would change
    hands once a slice; rounds whose loads find lines another PE holds modified shorten the
    quantum (Smp._adapt_quantum: SHARING_QUANTUM), so the PEs interleave finely and about one
    access in a hundred of each is served by the other's cache. Counters in separate lines
    leave the quantum long."""
    from spe_emu.cpu.smp import SHARING_QUANTUM
    from spe_emu.spe.config import SpeConfig
    code = build(tmp_path, false_sharing(offset).replace("mov x4, #2000", "ldr x4, =100000"))
    seen = []
    m = Machine(MachineConfig(smp=2, psci="hvc", max_insns=None, console=lambda b: None,
                              outdir=tmp_path, spe=SpeConfig(lds=1)))
    m.uc.mem_write(LOAD, code)
    m.reset(LOAD)
    adapt = m.smp._adapt_quantum

    def watch():
        adapt()
        seen.append(m.smp.quantum)
    m.smp._adapt_quantum = watch
    m.run()
    hits = [x.spu.builder.model.stats()["peer_hits"] for x in m.smp.machines]
    if offset == 8:
        assert SHARING_QUANTUM in seen
        assert min(hits) > 500, hits
    else:
        assert set(seen) == {MachineConfig.smp_quantum} and max(hits) < 5, (seen, hits)
