"""The SPU inside the machine, driven by bare-metal code at EL1 (no firmware): exact sample
intervals, buffer-full syndrome and pointer, no writes past the limit, PSB CSYNC, EL0 UNDEF,
and fast path == reference mode."""


import pytest
from asmrun import EXIT, run_asm, xregs

from spe_emu.spe.config import SpeConfig
from spe_emu.spe.packets import iter_records

BUF = 0x4200_0000


def program(interval=1, limit_size=0x10000, loop=20000, pmscr=0b100010, extra=""):
    """Program SPE like the Linux driver (PMBPTR, PMBLIMITR|E, filters, PMSIRR, PMSICR=0,
    PMSCR last), run a loop of ``loop`` iterations (5 instructions each), then stop and drain,
    and exit with x0 = 0. Final PMBSR_EL1 / PMBPTR_EL1 are left in x20 / x21."""
    return f"""
    movz x0, #{BUF >> 16:#x}, lsl #16
    msr pmbptr_el1, x0
    movz x1, #{(BUF + limit_size) >> 16:#x}, lsl #16
    movk x1, #{(BUF + limit_size) & 0xFFFF:#x}
    orr x1, x1, #1
    msr pmblimitr_el1, x1
    msr pmsfcr_el1, xzr
    msr pmsevfr_el1, xzr
    msr pmslatfr_el1, xzr
    mov x2, #{interval << 8:#x}
    msr pmsirr_el1, x2
    isb
    msr pmsicr_el1, xzr
    isb
    mov x3, #{pmscr:#x}
    msr pmscr_el1, x3
    {extra}
    movz x4, #{loop & 0xFFFF:#x}
    movk x4, #{loop >> 16:#x}, lsl #16
    mov x5, #0
loop:
    add x5, x5, #3
    eor x6, x5, x4
    subs x4, x4, #1
    nop
    b.ne loop
    msr pmscr_el1, xzr
    isb
    psb csync
    dsb nsh
    msr pmblimitr_el1, xzr
    isb
    mrs x20, pmbsr_el1
    mrs x21, pmbptr_el1
    mov x0, #0
""" + EXIT


def records(m):
    ptr = xregs(m, 21)[0]
    data = bytes(m.uc.mem_read(BUF, ptr - BUF))
    return data, list(iter_records(data))


def test_distance_between_samples_is_interval_256_plus_1(tmp_path):
    # PMSCR_EL1.E1SPE | TS: every EL1 instruction is a population member; the timestamp is
    # the instruction count at the sampled operation.
    m = run_asm(program(interval=1), tmp_path)
    assert m.result.exit_status == 0
    _, recs = records(m)
    ts = [r.timestamp for r in recs]
    assert len(ts) > 300
    assert {b - a for a, b in zip(ts, ts[1:])} == {257}
    assert m.result.samples == m.result.records_written == len(recs)


def test_interval_counts_only_enabled_el(tmp_path):
    # E0SPE only: nothing at EL1 is sampled.
    m = run_asm(program(interval=1, pmscr=0b100001), tmp_path)
    assert m.result.population == 0 and m.result.samples == 0
    assert xregs(m, 21)[0] == BUF


def test_buffer_full_syndrome_pointer_and_limit(tmp_path):
    # Pre-fill the page after the limit with a pattern: the SPU must never write there.
    limit = 0x1000
    m = run_asm(program(interval=1, limit_size=limit, loop=200000), tmp_path)
    pmbsr, pmbptr = xregs(m, 20, 21)
    # PMBSR_EL1: S (bit 17) = 1, EC [31:26] = 0, DL = 0, MSS.BSC [5:0] = 0b000001 (§3.5.2).
    assert pmbsr == (1 << 17) | 0b000001
    data, recs = records(m)
    # PMBPTR_EL1 points after the last complete record, within MaxSize (64) of the limit.
    assert sum(r.length for r in recs) == pmbptr - BUF
    assert 0 < BUF + limit - pmbptr < 64
    assert bytes(m.uc.mem_read(BUF + limit, 0x1000)) == bytes(0x1000)
    # Profiling stopped at the event: later samples were neither taken nor written.
    assert m.result.records_written == len(recs)
    assert m.result.management_events == 1


@pytest.mark.parametrize("data_loss", (False, True))
def test_misprogrammed_empty_buffer_is_reported(tmp_path, data_loss):
    # PMBLIMITR_EL1.LIMIT == PMBPTR_EL1: no room for a record (software broke §3.4.1). The model
    # discards the record and raises a buffer-full management event (docs/model.md), and says
    # so: by default with DL = 0 (no byte reached memory: PMBPTR_EL1 still points after the
    # last complete record), with SpeConfig.no_space_data_loss DL = 1.
    m = run_asm(program(interval=1, limit_size=0), tmp_path,
                spe=SpeConfig(no_space_data_loss=data_loss))
    pmbsr, pmbptr = xregs(m, 20, 21)
    assert pmbsr == (data_loss << 19) | (1 << 17) | 0b000001
    assert pmbptr == BUF
    assert m.result.records_written == 0 and m.result.samples == 1
    assert any("no-space" in e and f"PMBSR_EL1={pmbsr:#x}" in e
               for e in m.result.guest_errors)


def test_psb_csync_then_pmbptr_covers_every_record(tmp_path):
    m = run_asm(program(interval=4), tmp_path)
    data, recs = records(m)
    assert len(recs) == m.result.records_written > 0
    assert sum(r.length for r in recs) == len(data)


def test_el0_access_to_spe_register_is_undefined(tmp_path):
    # VBAR_EL1 vector at +0x400 (lower EL, synchronous) records ESR/ELR and exits.
    text = """
    adr x0, vectors
    msr vbar_el1, x0
    adr x1, el0code
    msr elr_el1, x1
    msr spsr_el1, xzr
    eret
el0code:
    mrs x2, pmscr_el1
    b el0code
    .balign 2048
vectors:
    .skip 0x400
    mrs x20, esr_el1
    mrs x21, elr_el1
    mrs x22, spsr_el1
    mov x0, #0
""" + EXIT
    m = run_asm(text, tmp_path)
    esr, elr, spsr = xregs(m, 20, 21, 22)
    assert esr == 0x2000000            # EC 0x00 (Unknown), IL = 1, ISS = 0
    assert elr == 0x4000_0000 + 4 * 8   # el0code: 2 prologue + 6 set-up instructions
    assert spsr & 0xF == 0              # taken from EL0t


@pytest.mark.parametrize("interval", [1, 3])
def test_reference_mode_gives_the_same_records(tmp_path, interval):
    fast = run_asm(program(interval=interval, limit_size=0x2000, loop=30000), tmp_path / "f")
    ref = run_asm(program(interval=interval, limit_size=0x2000, loop=30000), tmp_path / "r",
                  mode="reference")
    assert records(fast)[0] == records(ref)[0]
    assert xregs(fast, 20, 21) == xregs(ref, 20, 21)
    assert fast.spu.interval.value == ref.spu.interval.value
    assert fast.result.population == ref.result.population
    assert fast.result.instructions == ref.result.instructions


HOLE = 0x2000_0000
"""No memory or device there on the board (docs/design.md memory map)."""


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_buffer_write_to_no_memory_is_reported_as_an_external_abort(tmp_path, monkeypatch,
                                                                     mode):
    monkeypatch.setitem(globals(), "BUF", HOLE)
    m = run_asm(program(interval=1), tmp_path, mode=mode)
    pmbsr, pmbptr = xregs(m, 20, 21)
    # §3.5.4 (reported to the SPU, synchronously): EA (bit 18) = 1, S = 1, EC [31:26] =
    # 0b100100 (stage 1 Data Abort on a write to the buffer), MSS.FSC = 0b010000 (synchronous
    # External abort), DL = 0 (nothing of the record was written), PMBPTR_EL1 = the address.
    assert pmbsr == (0b100100 << 26) | (1 << 18) | (1 << 17) | 0b010000
    assert pmbptr == HOLE
    assert m.result.management_events == 1 and m.result.records_written == 0
    assert m.result.exit_status == 0


def test_buffer_external_abort_ignored_by_board_option(tmp_path, monkeypatch):
    from spe_emu.spe.config import SpeConfig
    monkeypatch.setitem(globals(), "BUF", HOLE)
    m = run_asm(program(interval=1), tmp_path, spe=SpeConfig(external_abort="ignore"))
    pmbsr, pmbptr = xregs(m, 20, 21)
    # Arm ARM D17.8.4.1: the same visible behaviour as a write with no abort.
    assert pmbsr == 0 and m.result.management_events == 0
    assert m.result.records_written > 300 and pmbptr > HOLE


HVC_LOOP = """
    adr x0, vectors_el2
    msr vbar_el2, x0
    mov x0, #(1 << 31)           // HCR_EL2.RW
    msr hcr_el2, x0
    mov x0, #(0b11 << 12)        // MDCR_EL2.E2PB = 0b11: EL1 owns the buffer, no traps
    msr mdcr_el2, x0
    movz x7, #0x4100, lsl #16
    msr sp_el1, x7
    adr x5, el1
    msr elr_el2, x5
    mov x6, #0x3c5               // EL1h, DAIF masked
    msr spsr_el2, x6
    eret
el1:
    movz x0, #{buf_hi:#x}, lsl #16
    msr pmbptr_el1, x0
    movz x1, #{lim_hi:#x}, lsl #16
    orr x1, x1, #1
    msr pmblimitr_el1, x1
    mov x2, #0x100
    msr pmsirr_el1, x2
    msr pmsicr_el1, xzr
    mov x3, #0b10                // PMSCR_EL1.E1SPE only: profiling is disabled at EL2
    msr pmscr_el1, x3
    isb
    ldr x10, ={n}
loop:
    {body}
    subs x10, x10, #1
    b.ne loop
    msr pmscr_el1, xzr
    isb
    psb csync
    dsb nsh
    mrs x21, pmbptr_el1
    mov x0, #0
""" + EXIT + """
    .balign 2048
vectors_el2:
    .skip 0x400                  // lower EL, AArch64, synchronous
    eret
"""


@pytest.mark.parametrize("mode", ["fast", "reference"])
@pytest.mark.parametrize("body", ["hvc #0", "nop"])
def test_exceptions_to_a_disabled_el_keep_the_sampling_interval(tmp_path, mode, body):
    """An HVC loop at EL1 (each HVC taken to EL2, where profiling is disabled, and ERET back)
    samples as often as a NOP loop: the counter stops at EL2 and goes on (§3.1.3), and a
    COUNT that reached zero just before the HVC still selects the next EL1 member; §3.1.1's
    reload applies only to a zero software wrote. 4,000 iterations of 3 EL1 instructions plus
    the 3 after ``isb``: 12,003 members, the first selected is member 257 (INTERVAL 1), then
    every 257th: 12,003 // 257 = 46 samples, each written as a record."""
    m = run_asm(HVC_LOOP.format(buf_hi=BUF >> 16, lim_hi=(BUF + 0x10000) >> 16, n=4000,
                                body=body), tmp_path, boot_el=2, mode=mode)
    assert m.result.exit_status == 0
    assert m.result.population == 12_003
    assert m.result.samples == m.result.records_written == 12_003 // 257 == 46
    _, recs = records(m)
    assert len(recs) == 46
