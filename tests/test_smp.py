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
    subprocess.run([AS, "-march=armv8.2-a", str(src), "-o", str(obj)], check=True)
    subprocess.run([LD, f"-Ttext={LOAD:#x}", str(obj), "-o", str(elf)], check=True)
    subprocess.run([OBJCOPY, "-O", "binary", str(elf), str(raw)], check=True)
    return raw.read_bytes()


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


@pytest.mark.parametrize("quantum", [7, 13, 100_000])
def test_exclusives_and_atomics_give_the_exact_total(tmp_path, quantum):
    """Four PEs each add COUNT with LDXR/STXR and COUNT with LDADD to one counter: the total
    is exact whether time slices end between a load-exclusive and its store-exclusive (a
    quantum of 7 or 13 instructions) or not; the secondaries' CPU_OFF leaves the others
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
    runs = [boot(tmp_path / str(i), code, quantum=13)
            for i in range(2) if (tmp_path / str(i)).mkdir() is None]
    assert runs[0][1].per_pe == runs[1][1].per_pe
    assert runs[0][2] == runs[1][2] == b"ok\n"
    # (slices of 13 instructions split LDXR/STXR pairs: store-exclusives failed and were
    # retried, which slices of 100,000 hardly do)
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
