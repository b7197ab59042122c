"""The Generic Timer device (spe_emu.devices.generic_timer) against the Arm ARM (DDI 0487 M.a):
D12.2 (counters, virtual offset, CompareValue/TimerValue views), the register descriptions
and access pseudocode of D24.10, and QEMU 7.2 ``-cpu max`` where the Arm ARM leaves a choice.

The clock is a :class:`VirtualClock` over a counter the test sets (one tick per "retired
instruction"), with schedule/cancel recorded, so event times and counts are exact.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

import pytest

from spe_emu.arch.context import HCR_EL2, SCR_EL3, AccessContext
from spe_emu.devices.generic_timer import (CNTHCTL_EL2, CNTKCTL_EL1, IRQ_OUTPUTS, TIMER_REGISTERS,
                                           GenericTimer, redirect, timer_output,
                                           virtual_offset_applies)
from spe_emu.errors import DeviceError
from spe_emu.platform.board import VIRT, Platform
from spe_emu.platform.clock import NEVER, CNTFRQ_HZ, VirtualClock
from spe_emu.platform.device import DEVICE_TYPES
from spe_emu.sysreg import Access
from qemu_probe import check

OK, UNDEF = Access.OK, Access.UNDEFINED
TRAP1, TRAP2 = Access.TRAP_EL1, Access.TRAP_EL2
M64 = (1 << 64) - 1


class SpyClock(VirtualClock):
    """A VirtualClock over a settable count that records every schedule and cancel."""

    def __init__(self):
        self.count = 0
        super().__init__(lambda: self.count)
        self.scheduled: list = []
        self.cancelled: list = []

    def schedule(self, when, name, callback):
        ev = super().schedule(when, name, callback)
        self.scheduled.append(ev)
        return ev

    def cancel(self, event):
        if event is not None:
            self.cancelled.append(event)
        super().cancel(event)

    def live(self, name: str | None = None) -> list:
        return [e for e in self.scheduled if not e.cancelled and (name is None or name in e.name)]

    def advance_to(self, ticks: int) -> int:
        self.count = ticks
        return self.run_due()


@dataclass
class Rig:
    clock: SpyClock
    timer: GenericTimer
    errors: list[str] = field(default_factory=list)
    changes: list[int] = field(default_factory=list)

    def read(self, name: str, ctx: AccessContext | None = None) -> int:
        return self.timer.sysreg_read(name, ctx or EL2)

    def write(self, name: str, value: int, ctx: AccessContext | None = None) -> None:
        self.timer.sysreg_write(name, value, ctx or EL2)

    def level(self, output: str) -> bool:
        return self.timer.irqs[output].level


def context(el: int, *, e2h: int = 0, tge: int = 0, ns: int = 1, have_el2: bool = True,
            have_el3: bool = True) -> AccessContext:
    return AccessContext(el=el, have_el2=have_el2, have_el3=have_el3,
                         scr_el3=SCR_EL3.make(NS=ns, RW=1),
                         hcr_el2=HCR_EL2.make(RW=1, E2H=e2h, TGE=tge) if have_el2 else 0)


EL0, EL1, EL2, EL3 = (context(el) for el in range(4))
HOST0, HOST2 = context(0, e2h=1, tge=1), context(2, e2h=1, tge=1)


@pytest.fixture
def rig(tmp_path) -> Rig:
    clock = SpyClock()
    errors: list[str] = []
    timer = GenericTimer.for_board(VIRT, Platform(clock, tmp_path, errors.append))
    r = Rig(clock, timer, errors)
    timer.on_change = lambda: r.changes.append(clock.count)
    return r


# ------------------------------------------------------------------ declarations ----------
def test_encodings_are_the_arm_arm_ones():
    """(op0, op1, CRn, CRm, op2) from the "Accessing" tables of D24.10."""
    expected = {
        "CNTFRQ_EL0": (3, 3, 14, 0, 0), "CNTPCT_EL0": (3, 3, 14, 0, 1),
        "CNTVCT_EL0": (3, 3, 14, 0, 2), "CNTKCTL_EL1": (3, 0, 14, 1, 0),
        "CNTP_TVAL_EL0": (3, 3, 14, 2, 0), "CNTP_CTL_EL0": (3, 3, 14, 2, 1),
        "CNTP_CVAL_EL0": (3, 3, 14, 2, 2), "CNTV_TVAL_EL0": (3, 3, 14, 3, 0),
        "CNTV_CTL_EL0": (3, 3, 14, 3, 1), "CNTV_CVAL_EL0": (3, 3, 14, 3, 2),
        "CNTVOFF_EL2": (3, 4, 14, 0, 3), "CNTHCTL_EL2": (3, 4, 14, 1, 0),
        "CNTHP_TVAL_EL2": (3, 4, 14, 2, 0), "CNTHP_CTL_EL2": (3, 4, 14, 2, 1),
        "CNTHP_CVAL_EL2": (3, 4, 14, 2, 2), "CNTHV_TVAL_EL2": (3, 4, 14, 3, 0),
        "CNTHV_CTL_EL2": (3, 4, 14, 3, 1), "CNTHV_CVAL_EL2": (3, 4, 14, 3, 2),
        "CNTKCTL_EL12": (3, 5, 14, 1, 0), "CNTP_TVAL_EL02": (3, 5, 14, 2, 0),
        "CNTP_CTL_EL02": (3, 5, 14, 2, 1), "CNTP_CVAL_EL02": (3, 5, 14, 2, 2),
        "CNTV_TVAL_EL02": (3, 5, 14, 3, 0), "CNTV_CTL_EL02": (3, 5, 14, 3, 1),
        "CNTV_CVAL_EL02": (3, 5, 14, 3, 2),
    }
    assert {s.name: s.encoding.tuple for s in TIMER_REGISTERS} == expected
    for name, enc in expected.items():
        assert GenericTimer.lookup(enc).name == name
    assert GenericTimer.lookup((3, 7, 14, 2, 1)) is None  # CNTPS_CTL_EL1: not modelled


def test_field_layouts():
    ctl = TIMER_REGISTERS["CNTV_CTL_EL0"]
    assert (ctl.field_mask, ctl.write_mask) == (0b111, 0b011)  # ISTATUS is RO (D24.10.25)
    assert TIMER_REGISTERS["CNTP_TVAL_EL0"].res0 == M64 & ~0xFFFF_FFFF
    assert TIMER_REGISTERS["CNTFRQ_EL0"].res0 == M64 & ~0xFFFF_FFFF
    assert CNTKCTL_EL1.field_mask == 0x3FF
    assert (CNTHCTL_EL2.field("EL1PCTEN").lsb, CNTHCTL_EL2.field("EL1PTEN").lsb) == (10, 11)
    assert TIMER_REGISTERS["CNTPCT_EL0"].read_only and TIMER_REGISTERS["CNTVCT_EL0"].read_only


def test_registered_and_wired_from_the_board(rig):
    assert DEVICE_TYPES["generic_timer"] is GenericTimer
    assert rig.timer.size == 0 and rig.timer.REGISTERS is None
    assert {out: rig.timer.spec.irq(out) for out in IRQ_OUTPUTS} == {
        "cntp": 30, "cntv": 27, "cnthp": 26, "cnthv": 28}


# ------------------------------------------------------------------ reset ------------------
def test_reset_values(rig):
    rig.clock.count = 1234
    assert rig.read("CNTFRQ_EL0", EL3) == CNTFRQ_HZ == 100_000_000
    assert rig.read("CNTPCT_EL0", EL3) == 1234
    assert rig.read("CNTKCTL_EL1", EL1) == 0
    assert rig.read("CNTHCTL_EL2") == 0b11   # EL1PCEN, EL1PCTEN: as QEMU after reset
    assert rig.read("CNTVOFF_EL2") == 0
    for name in ("CNTP_CTL_EL0", "CNTV_CTL_EL0", "CNTHP_CTL_EL2", "CNTHV_CTL_EL2",
                 "CNTP_CVAL_EL0", "CNTV_CVAL_EL0", "CNTHP_CVAL_EL2", "CNTHV_CVAL_EL2"):
        assert rig.read(name, EL3) == 0, name
    assert not any(line.level for line in rig.timer.irqs.values())
    assert rig.clock.live() == []


def test_reset_cancels_events_and_lowers_outputs(rig):
    rig.write("CNTP_CVAL_EL0", 50)
    rig.write("CNTP_CTL_EL0", 1)
    rig.write("CNTV_CTL_EL0", 1)            # CVAL 0: met at once
    assert rig.level("cntv") and len(rig.clock.live()) == 1
    rig.timer.reset()
    assert rig.clock.live() == [] and not rig.level("cntv")
    assert rig.read("CNTP_CVAL_EL0") == 0


# ------------------------------------------------------------------ timer condition -------
def test_istatus_and_level_as_the_count_crosses_cval(rig):
    """D12.2.4.1: met when count - CVAL >= 0; ISTATUS = 1 and, with IMASK 0, the interrupt."""
    rig.clock.count = 900
    rig.write("CNTP_CVAL_EL0", 1000)
    rig.write("CNTP_CTL_EL0", 0b001)
    assert rig.read("CNTP_CTL_EL0") == 0b001 and not rig.level("cntp")
    [ev] = rig.clock.live()
    assert ev.when == 1000
    rig.clock.count = 999
    assert rig.clock.run_due() == 0 and rig.read("CNTP_CTL_EL0") == 0b001
    rig.changes.clear()
    assert rig.clock.advance_to(1000) == 1
    assert rig.level("cntp") and rig.read("CNTP_CTL_EL0") == 0b101
    assert rig.changes == [1000]            # the device told the machine once
    assert rig.clock.live() == []           # nothing further can rise by itself
    rig.clock.advance_to(5000)
    assert rig.level("cntp") and rig.read("CNTP_CTL_EL0") == 0b101


def test_imask_masks_the_interrupt_not_istatus(rig):
    rig.clock.count = 10
    rig.write("CNTV_CVAL_EL0", 5)
    rig.write("CNTV_CTL_EL0", 0b011)         # ENABLE, IMASK
    assert rig.read("CNTV_CTL_EL0") == 0b111 and not rig.level("cntv")
    rig.write("CNTV_CTL_EL0", 0b001)
    assert rig.level("cntv")
    rig.write("CNTV_CTL_EL0", 0b011)
    assert not rig.level("cntv")


def test_enable_zero_clears_istatus_and_the_output(rig):
    rig.clock.count = 10
    rig.write("CNTHP_CVAL_EL2", 5)
    rig.write("CNTHP_CTL_EL2", 1)
    assert rig.level("cnthp") and rig.read("CNTHP_CTL_EL2") == 0b101
    rig.write("CNTHP_CTL_EL2", 0b110)        # ENABLE 0 (ISTATUS written 1: RO, ignored)
    assert not rig.level("cnthp") and rig.read("CNTHP_CTL_EL2") == 0b010


def test_compare_is_unsigned_64_bit(rig):
    """D12.2.4.1: CompareValue and count are unsigned: a CVAL near 2^64 is not met by a small
    count (a signed compare would be): its event is that far away. A virtual timer whose
    condition the physical counter cannot reach before it wraps gets no event."""
    rig.clock.count = 100
    rig.write("CNTP_CVAL_EL0", M64 - 5)
    rig.write("CNTP_CTL_EL0", 1)
    assert not rig.level("cntp") and [e.when for e in rig.clock.live()] == [M64 - 5]
    rig.write("CNTVOFF_EL2", 10)
    rig.write("CNTV_CVAL_EL0", M64 - 5)       # physical tick 2^64 + 4: beyond the counter
    rig.write("CNTV_CTL_EL0", 1)
    assert not rig.level("cntv") and rig.clock.live("CNTV") == []
    assert timer_output(1, M64 - 5, 100) == (False, False)
    assert timer_output(1, 100, M64) == (True, True)
    assert timer_output(0, 0, 1) == (False, False)
    assert timer_output(0b11, 0, 1) == (True, False)


def test_four_timers_drive_their_own_lines(rig):
    rig.clock.count = 0
    for i, (reg_, out) in enumerate(zip(("CNTP", "CNTV", "CNTHP", "CNTHV"), IRQ_OUTPUTS)):
        suffix = "_EL0" if reg_ in ("CNTP", "CNTV") else "_EL2"
        rig.write(f"{reg_}_CVAL{suffix}", 100 * (i + 1))
        rig.write(f"{reg_}_CTL{suffix}", 1)
    assert sorted(e.when for e in rig.clock.live()) == [100, 200, 300, 400]
    rig.clock.advance_to(250)
    assert [rig.level(o) for o in IRQ_OUTPUTS] == [True, True, False, False]
    rig.clock.advance_to(400)
    assert all(rig.level(o) for o in IRQ_OUTPUTS)


# ------------------------------------------------------------------ TimerValue view -------
def test_tval_reads_signed_32_bit_difference_zero_extended(rig):
    """D12.2.4.2, D24.10.18: TimerValue = (CVAL - count)<31:0>, ZeroExtend to 64 bits; after
    the condition is met it counts the time since (negative)."""
    rig.clock.count = 1000
    rig.write("CNTP_CVAL_EL0", 1100)
    rig.write("CNTP_CTL_EL0", 1)
    assert rig.read("CNTP_TVAL_EL0") == 100
    rig.clock.advance_to(1110)
    assert rig.read("CNTP_TVAL_EL0") == 0xFFFF_FFF6     # -10 as 32 bits, bits 63:32 zero
    rig.clock.count = 1100 + (1 << 32) + 7                # wraps modulo 2^32
    assert rig.read("CNTP_TVAL_EL0") == (-7) & 0xFFFF_FFFF


def test_tval_write_sign_extends(rig):
    """CVAL = count + SignExtend(TimerValue<31:0>, 64); bits 63:32 of the write are ignored."""
    rig.clock.count = 1000
    rig.write("CNTP_TVAL_EL0", 0x1234_5678_0000_0010)
    assert rig.read("CNTP_CVAL_EL0") == 1016
    rig.write("CNTP_TVAL_EL0", (-100) & M64)
    assert rig.read("CNTP_CVAL_EL0") == 900
    rig.write("CNTP_TVAL_EL0", 0x7FFF_FFFF)
    assert rig.read("CNTP_CVAL_EL0") == 1000 + 0x7FFF_FFFF
    rig.write("CNTP_TVAL_EL0", 0x8000_0000)             # -2^31: CVAL wraps below zero ...
    assert rig.read("CNTP_CVAL_EL0") == (1000 - (1 << 31)) & M64
    rig.write("CNTP_CTL_EL0", 1)                        # ... so it is far in the future
    assert not rig.level("cntp")
    assert [e.when for e in rig.clock.live()] == [(1000 - (1 << 31)) & M64]


def test_tval_write_schedules_and_fires(rig):
    rig.clock.count = 500
    rig.write("CNTV_CTL_EL0", 1)                        # CVAL 0: met at once
    assert rig.level("cntv")
    rig.write("CNTV_TVAL_EL0", 20)
    assert not rig.level("cntv")
    assert [e.when for e in rig.clock.live()] == [520]
    rig.clock.advance_to(520)
    assert rig.level("cntv") and rig.read("CNTV_TVAL_EL0") == 0


# ------------------------------------------------------------------ virtual offset --------
@pytest.mark.parametrize("ctx, applies", [
    (EL0, True), (EL1, True), (EL2, True), (EL3, True),
    (context(2, e2h=1), False),             # ELIsInHost(EL2)
    (context(0, e2h=1), True),              # E2H without TGE: EL0 is not in the host
    (HOST0, False),                          # ELIsInHost(EL0)
    (context(0, e2h=1, tge=1, ns=0), True),  # EL2 not enabled (Secure, no FEAT_SEL2 here)
    (context(1, have_el2=False), False),     # no EL2: fixed offset 0 (D12.2.2.2)
], ids=["EL0", "EL1", "EL2", "EL3", "EL2-E2H", "EL0-E2H", "EL0-host", "EL0-secure", "noEL2"])
def test_cntvct_offset_by_exception_level(rig, ctx, applies):
    """D24.10.28 / VirtualCounterTimer() (J1.3.3.77): PhysicalCountInt() - CNTVOFF_EL2 unless
    EL2 is absent or the access is from EL2 or EL0 in a host."""
    assert virtual_offset_applies(ctx) is applies
    rig.clock.count = 10_000
    rig.write("CNTVOFF_EL2", 3000)
    assert rig.read("CNTVCT_EL0", ctx) == (7000 if applies else 10_000)
    assert rig.read("CNTPCT_EL0", ctx) == 10_000


def test_cntvoff_moves_the_virtual_timer_event(rig):
    """The EL1 virtual timer compares PhysicalCountInt() - CNTVOFF_EL2 with CNTV_CVAL_EL0
    (AArch64.CheckTimerConditions()), so its event is at CVAL + CNTVOFF in physical ticks."""
    rig.clock.count = 1000
    rig.write("CNTVOFF_EL2", 500)
    rig.write("CNTV_CVAL_EL0", 600)
    rig.write("CNTV_CTL_EL0", 1)
    [first] = rig.clock.live()
    assert first.when == 1100 and rig.read("CNTV_TVAL_EL0", EL1) == 100
    rig.write("CNTVOFF_EL2", 450)
    [second] = rig.clock.live()
    assert second.when == 1050 and first.cancelled
    rig.write("CNTVOFF_EL2", 300)            # virtual count 700 >= 600: met now
    assert rig.level("cntv") and rig.clock.live() == []
    rig.write("CNTVOFF_EL2", (-5000) & M64)  # virtual count 6000 ... still met
    assert rig.level("cntv")


def test_virtual_offset_wraps_modulo_2_64(rig):
    rig.clock.count = 10
    rig.write("CNTVOFF_EL2", 20)
    assert rig.read("CNTVCT_EL0", EL1) == M64 - 9
    rig.write("CNTV_CVAL_EL0", 5)            # virtual count 2^64 - 10 >= 5: met
    rig.write("CNTV_CTL_EL0", 1)
    assert rig.level("cntv")


def test_physical_and_el2_timers_ignore_cntvoff(rig):
    rig.clock.count = 1000
    rig.write("CNTVOFF_EL2", 400)
    for name in ("CNTP", "CNTHP", "CNTHV"):
        suffix = "_EL0" if name == "CNTP" else "_EL2"
        rig.write(f"{name}_CVAL{suffix}", 1200)
        rig.write(f"{name}_CTL{suffix}", 1)
    assert sorted(e.when for e in rig.clock.live()) == [1200, 1200, 1200]


# ------------------------------------------------------------------ events ----------------
def test_exactly_one_event_per_timer(rig):
    rig.clock.count = 0
    rig.write("CNTP_CTL_EL0", 1)             # CVAL 0: met, no event
    assert rig.clock.live() == []
    for cval in (100, 300, 200):
        rig.write("CNTP_CVAL_EL0", cval)
        assert [e.when for e in rig.clock.live("CNTP")] == [cval]
    assert len(rig.clock.scheduled) == 3 and len(rig.clock.cancelled) == 2
    rig.write("CNTP_CVAL_EL0", 200)          # same deadline: the event stays
    rig.write("CNTP_CTL_EL0", 1)
    assert len(rig.clock.scheduled) == 3
    rig.read("CNTP_TVAL_EL0")                # reads schedule nothing
    rig.read("CNTP_CTL_EL0")
    assert len(rig.clock.scheduled) == 3
    rig.write("CNTP_CTL_EL0", 0b011)          # masked: no event needed
    assert rig.clock.live() == []
    rig.write("CNTP_CTL_EL0", 0b001)
    assert [e.when for e in rig.clock.live()] == [200]
    rig.write("CNTP_CTL_EL0", 0)              # disabled
    assert rig.clock.live() == []
    assert rig.clock.next_deadline() == NEVER


def test_masked_timer_unmasked_after_its_deadline(rig):
    rig.clock.count = 0
    rig.write("CNTP_CVAL_EL0", 100)
    rig.write("CNTP_CTL_EL0", 0b011)
    rig.clock.advance_to(150)
    assert rig.read("CNTP_CTL_EL0") == 0b111 and not rig.level("cntp")
    rig.changes.clear()
    rig.write("CNTP_CTL_EL0", 0b001)
    assert rig.level("cntp") and rig.changes == [150] and rig.clock.live() == []


def test_write_that_changes_nothing_does_not_notify(rig):
    rig.write("CNTP_CVAL_EL0", 7)
    assert rig.changes == []
    rig.write("CNTP_CTL_EL0", 1)             # output rises: notify
    assert rig.changes == [0]


# ------------------------------------------------------------------ VHE forms -------------
def test_host_accesses_reach_the_el2_timers(rig):
    """D24.10.16-.18, .25-.27: with ELIsInHost(EL2) at EL2, or ELIsInHost(EL0) at EL0,
    CNTP_*_EL0 are CNTHP_*_EL2 and CNTV_*_EL0 are CNTHV_*_EL2; *_EL02 reach the EL1 timers."""
    rig.clock.count = 1000
    rig.write("CNTVOFF_EL2", 300)
    rig.write("CNTV_CVAL_EL0", 1500, HOST2)
    rig.write("CNTV_CTL_EL0", 1, HOST2)
    assert rig.read("CNTHV_CVAL_EL2") == 1500 and rig.read("CNTHV_CTL_EL2") == 1
    assert rig.read("CNTV_CVAL_EL0", EL1) == 0
    assert [e.when for e in rig.clock.live()] == [1500]   # CNTHV: no virtual offset
    assert rig.read("CNTV_TVAL_EL0", HOST0) == 500
    rig.write("CNTV_CVAL_EL02", 900, HOST2)               # the EL1 virtual timer
    rig.write("CNTV_CTL_EL02", 1, HOST2)
    assert rig.read("CNTV_CVAL_EL0", EL1) == 900
    assert rig.read("CNTV_TVAL_EL02", HOST2) == 200       # 900 - (1000 - 300)
    rig.write("CNTP_TVAL_EL0", 50, HOST0)
    assert rig.read("CNTHP_CVAL_EL2") == 1050 and rig.read("CNTP_CVAL_EL0", EL1) == 0
    assert redirect("CNTP_CTL_EL0", context(0, e2h=1)) == "CNTP_CTL_EL0"   # not a host


def test_cntkctl_el1_at_el2_in_host_is_cnthctl_el2(rig):
    """D24.10.15: at EL2 with ELIsInHost(EL2), CNTKCTL_EL1 reaches CNTHCTL_EL2. Bits that are
    RES0 in CNTKCTL_EL1 are UNKNOWN after the write (CNTHCTL_EL2_VHE()); like QEMU 7.2 the
    device stores them as written (tests/baremetal/timer_access.S case 0xd35: 3)."""
    rig.write("CNTHCTL_EL2", 0xC00)
    rig.write("CNTKCTL_EL1", 3, HOST2)
    assert rig.read("CNTHCTL_EL2") == 3 and rig.read("CNTKCTL_EL1", HOST2) == 3
    assert rig.read("CNTKCTL_EL1", EL1) == 0
    rig.write("CNTKCTL_EL12", 0x303, HOST2)
    assert rig.read("CNTKCTL_EL1", EL1) == 0x303


# ------------------------------------------------------------------ CNTFRQ_EL0, no EL2 ----
def test_cntfrq_is_storage_written_at_the_highest_el(rig):
    """D24.10.1: reads return the value; only the highest implemented EL writes it (not
    interpreted by hardware: the counter's rate does not change)."""
    rig.write("CNTFRQ_EL0", 0xFFFF_FFFF_0000_1000, EL3)
    assert rig.read("CNTFRQ_EL0", EL0) == 0x1000
    t = rig.timer
    assert t.access("CNTFRQ_EL0", EL3, False) is OK
    assert t.access("CNTFRQ_EL0", EL2, False) is UNDEF
    assert t.access("CNTFRQ_EL0", EL1, False) is UNDEF
    assert t.access("CNTFRQ_EL0", context(2, have_el3=False), False) is OK
    assert t.access("CNTFRQ_EL0", context(1, have_el3=False), False) is UNDEF
    assert t.access("CNTFRQ_EL0", context(1, have_el2=False, have_el3=False), False) is OK


def test_el2_registers_are_res0_from_el3_without_el2(rig):
    """D24.10.2 "If EL2 is not implemented, this register is RES0 from EL3" (likewise the
    other EL2 timer registers, as QEMU's registers for EL3 without EL2)."""
    no_el2 = context(3, have_el2=False)
    for name in ("CNTHCTL_EL2", "CNTVOFF_EL2", "CNTHP_CVAL_EL2"):
        assert rig.timer.access(name, no_el2, True) is OK
        rig.write(name, 0x55, no_el2)
        assert rig.read(name, no_el2) == 0
    assert rig.read("CNTVOFF_EL2", EL3) == 0


def test_host_misuse_raises(rig):
    with pytest.raises(DeviceError, match="read-only"):
        rig.write("CNTPCT_EL0", 1)
    with pytest.raises(DeviceError, match="no Generic Timer register"):
        rig.read("CNTPS_CTL_EL1")
    with pytest.raises(DeviceError, match="no Generic Timer register"):
        rig.timer.access("PMSCR_EL1", EL1, True)


# ------------------------------------------------------------------ access checks ---------
HCTL_NVHE_ALL = 0b11                 # EL1PCEN | EL1PCTEN (E2H == 0 layout)
HCTL_VHE = {"EL0PCTEN": 1 << 0, "EL0VCTEN": 1 << 1, "EL0VTEN": 1 << 8, "EL0PTEN": 1 << 9,
            "EL1PCTEN": 1 << 10, "EL1PTEN": 1 << 11}
KCTL = {"EL0PCTEN": 1 << 0, "EL0VCTEN": 1 << 1, "EL0VTEN": 1 << 8, "EL0PTEN": 1 << 9}
KCTL_ALL = sum(KCTL.values())
PTIMER = ("CNTP_CTL_EL0", "CNTP_CVAL_EL0", "CNTP_TVAL_EL0")
VTIMER = ("CNTV_CTL_EL0", "CNTV_CVAL_EL0", "CNTV_TVAL_EL0")
EL2_REGS = ("CNTHCTL_EL2", "CNTVOFF_EL2", "CNTHP_CTL_EL2", "CNTHP_CVAL_EL2", "CNTHP_TVAL_EL2",
            "CNTHV_CTL_EL2", "CNTHV_CVAL_EL2", "CNTHV_TVAL_EL2")
ALIASES = ("CNTKCTL_EL12", "CNTP_CTL_EL02", "CNTP_CVAL_EL02", "CNTP_TVAL_EL02",
           "CNTV_CTL_EL02", "CNTV_CVAL_EL02", "CNTV_TVAL_EL02")

# (registers, is_read or None for both, ctx, CNTKCTL_EL1, CNTHCTL_EL2, verdict, why) -- the
# "why" names the pseudocode line of D24.10 that gives the verdict.
ROWS = [
    # EL0, HCR_EL2.{E2H, TGE} = {0, 0}: CNTKCTL_EL1 enables, else trap to EL1.
    (("CNTPCT_EL0",), True, EL0, KCTL_ALL & ~KCTL["EL0PCTEN"], HCTL_NVHE_ALL, TRAP1,
     "CNTKCTL_EL1.EL0PCTEN == 0: SystemAccessTrap(EL1, 0x18)"),
    (("CNTPCT_EL0",), True, EL0, KCTL["EL0PCTEN"], HCTL_NVHE_ALL, OK, "EL0PCTEN == 1"),
    (("CNTVCT_EL0",), True, EL0, KCTL_ALL & ~KCTL["EL0VCTEN"], HCTL_NVHE_ALL, TRAP1,
     "CNTKCTL_EL1.EL0VCTEN == 0"),
    (("CNTVCT_EL0",), True, EL0, KCTL["EL0VCTEN"], 0, OK, "EL0VCTEN == 1 (no EL2 control)"),
    (PTIMER, None, EL0, KCTL_ALL & ~KCTL["EL0PTEN"], HCTL_NVHE_ALL, TRAP1,
     "CNTKCTL_EL1.EL0PTEN == 0"),
    (PTIMER, None, EL0, KCTL["EL0PTEN"], HCTL_NVHE_ALL, OK, "EL0PTEN == 1"),
    (VTIMER, None, EL0, KCTL_ALL & ~KCTL["EL0VTEN"], HCTL_NVHE_ALL, TRAP1,
     "CNTKCTL_EL1.EL0VTEN == 0"),
    (VTIMER, None, EL0, KCTL["EL0VTEN"], 0, OK, "EL0VTEN == 1 (no EL2 control)"),
    (("CNTFRQ_EL0",), True, EL0, KCTL["EL0VTEN"] | KCTL["EL0PTEN"], HCTL_NVHE_ALL, TRAP1,
     "CNTKCTL_EL1.<EL0PCTEN,EL0VCTEN> == '00'"),
    (("CNTFRQ_EL0",), True, EL0, KCTL["EL0PCTEN"], HCTL_NVHE_ALL, OK, "EL0PCTEN alone"),
    (("CNTFRQ_EL0",), True, EL0, KCTL["EL0VCTEN"], HCTL_NVHE_ALL, OK, "EL0VCTEN alone"),
    (("CNTFRQ_EL0",), False, EL0, KCTL_ALL, HCTL_NVHE_ALL, UNDEF, "MSR: not the highest EL"),
    (("CNTKCTL_EL1",), None, EL0, KCTL_ALL, HCTL_NVHE_ALL, UNDEF, "PSTATE.EL == EL0: UNDEFINED"),
    # EL0 with HCR_EL2.TGE == 1 (E2H == 0): the same controls trap to EL2.
    (("CNTVCT_EL0", "CNTFRQ_EL0"), True, context(0, tge=1), 0, HCTL_NVHE_ALL, TRAP2,
     "EL2Enabled() && HCR_EL2.TGE == '1': SystemAccessTrap(EL2, 0x18)"),
    (PTIMER + VTIMER, None, context(0, tge=1), 0, HCTL_NVHE_ALL, TRAP2, "TGE == 1"),
    # EL0, EL2 enabled, E2H == 0: CNTHCTL_EL2.EL1PCEN / EL1PCTEN trap EL0 too.
    (PTIMER, None, EL0, KCTL_ALL, 1, TRAP2,
     "EL2Enabled() && !ELIsInHost(EL2) && CNTHCTL_EL2.EL1PCEN == '0'"),
    (("CNTPCT_EL0",), True, EL0, KCTL_ALL, 2, TRAP2, "CNTHCTL_EL2.EL1PCTEN == '0' (bit 0)"),
    (("CNTPCT_EL0",), True, EL0, KCTL_ALL, 1, OK, "EL1PCTEN == 1, EL1PCEN does not matter"),
    (VTIMER + ("CNTVCT_EL0", "CNTFRQ_EL0"), True, EL0, KCTL_ALL, 0, OK,
     "no EL2 control of the virtual timer and counter (without FEAT_ECV)"),
    (PTIMER + ("CNTPCT_EL0",), True, context(0, ns=0), KCTL_ALL, 0, OK,
     "EL2 not enabled (Secure): CNTHCTL_EL2 has no effect"),
    # EL0, E2H == 1, TGE == 0: the E2H layout's EL1 bits.
    (PTIMER, None, context(0, e2h=1), KCTL_ALL, HCTL_VHE["EL1PCTEN"], TRAP2,
     "ELIsInHost(EL2) && HCR_EL2.TGE == '0' && CNTHCTL_EL2.EL1PTEN == '0'"),
    (("CNTPCT_EL0",), True, context(0, e2h=1), KCTL_ALL, HCTL_VHE["EL1PTEN"], TRAP2,
     "... CNTHCTL_EL2.EL1PCTEN == '0' (bit 10)"),
    (PTIMER + ("CNTPCT_EL0",), True, context(0, e2h=1), KCTL_ALL,
     HCTL_VHE["EL1PTEN"] | HCTL_VHE["EL1PCTEN"], OK, "EL1PTEN, EL1PCTEN set"),
    # EL0 in a host (E2H == TGE == 1): CNTHCTL_EL2's EL0 bits, CNTKCTL_EL1 ignored.
    (("CNTPCT_EL0",), True, HOST0, 0, sum(HCTL_VHE.values()) & ~HCTL_VHE["EL0PCTEN"], TRAP2,
     "ELIsInHost(EL0) && CNTHCTL_EL2.EL0PCTEN == '0'"),
    (("CNTVCT_EL0",), True, HOST0, KCTL_ALL, sum(HCTL_VHE.values()) & ~HCTL_VHE["EL0VCTEN"],
     TRAP2, "ELIsInHost(EL0) && CNTHCTL_EL2.EL0VCTEN == '0'"),
    (PTIMER, None, HOST0, KCTL_ALL, sum(HCTL_VHE.values()) & ~HCTL_VHE["EL0PTEN"], TRAP2,
     "ELIsInHost(EL0) && CNTHCTL_EL2.EL0PTEN == '0'"),
    (VTIMER, None, HOST0, KCTL_ALL, sum(HCTL_VHE.values()) & ~HCTL_VHE["EL0VTEN"], TRAP2,
     "ELIsInHost(EL0) && CNTHCTL_EL2.EL0VTEN == '0'"),
    (("CNTFRQ_EL0",), True, HOST0, KCTL_ALL, HCTL_VHE["EL0VTEN"] | HCTL_VHE["EL0PTEN"], TRAP2,
     "ELIsInHost(EL0) && CNTHCTL_EL2.<EL0PCTEN,EL0VCTEN> == '00'"),
    (PTIMER + VTIMER + ("CNTPCT_EL0", "CNTVCT_EL0", "CNTFRQ_EL0"), True, HOST0, 0,
     HCTL_VHE["EL0PTEN"] | HCTL_VHE["EL0VTEN"] | HCTL_VHE["EL0PCTEN"] | HCTL_VHE["EL0VCTEN"],
     OK, "host EL0 with CNTHCTL_EL2's EL0 bits set (EL1 bits do not apply: TGE == 1)"),
    # EL1.
    (PTIMER, None, EL1, 0, 2, OK, "CNTHCTL_EL2.EL1PCEN == 1"),
    (PTIMER, None, EL1, 0, 1, TRAP2,
     "EL2Enabled() && !ELIsInHost(EL2) && CNTHCTL_EL2.EL1PCEN == '0'"),
    (("CNTPCT_EL0",), True, EL1, 0, 2, TRAP2, "EL2Enabled() && CNTHCTL_EL2.EL1PCTEN == '0'"),
    (("CNTPCT_EL0",), True, EL1, 0, 1, OK, "EL1PCTEN == 1"),
    (PTIMER + ("CNTPCT_EL0",), True, context(1, ns=0), 0, 0, OK, "EL2 not enabled (Secure)"),
    (PTIMER + ("CNTPCT_EL0",), True, context(1, have_el2=False), 0, 0, OK, "no EL2"),
    (VTIMER + ("CNTKCTL_EL1",), None, EL1, 0, 0, OK,
     "no EL1 trap of the virtual timer and CNTKCTL_EL1"),
    (("CNTVCT_EL0", "CNTFRQ_EL0"), True, EL1, 0, 0, OK, "EL1 reads CNTVCT_EL0, CNTFRQ_EL0"),
    (("CNTPCT_EL0", "CNTVCT_EL0"), False, EL1, KCTL_ALL, HCTL_NVHE_ALL, UNDEF,
     "read-only: no MSR form (UNDEFINED)"),
    (("CNTFRQ_EL0",), False, EL1, KCTL_ALL, HCTL_NVHE_ALL, UNDEF,
     "MSR CNTFRQ_EL0: !IsHighestEL(PSTATE.EL): UNDEFINED"),
    (PTIMER, None, context(1, e2h=1), 0, HCTL_VHE["EL1PCTEN"], TRAP2,
     "ELIsInHost(EL2) && CNTHCTL_EL2.EL1PTEN == '0'"),
    (("CNTPCT_EL0",), True, context(1, e2h=1), 0, HCTL_VHE["EL1PTEN"] | 0b11, TRAP2,
     "E2H layout: EL1PCTEN is bit 10 (bits 1:0 are the EL0 bits)"),
    (PTIMER + ("CNTPCT_EL0",), True, context(1, e2h=1), 0,
     HCTL_VHE["EL1PTEN"] | HCTL_VHE["EL1PCTEN"], OK, "EL1PTEN and EL1PCTEN set"),
    # EL2 registers and aliases.
    (EL2_REGS, None, EL0, KCTL_ALL, HCTL_NVHE_ALL, UNDEF, "PSTATE.EL == EL0: UNDEFINED"),
    (EL2_REGS, None, EL1, KCTL_ALL, HCTL_NVHE_ALL, UNDEF,
     "PSTATE.EL == EL1: UNDEFINED (the NV trap needs FEAT_NV)"),
    (EL2_REGS + PTIMER + VTIMER + ("CNTKCTL_EL1",), None, EL2, 0, 0, OK, "EL2: no traps"),
    (("CNTPCT_EL0", "CNTVCT_EL0", "CNTFRQ_EL0"), True, EL2, 0, 0, OK, "EL2 reads"),
    (EL2_REGS + PTIMER + VTIMER + ("CNTKCTL_EL1", "CNTFRQ_EL0"), None, EL3, 0, 0, OK, "EL3"),
    (ALIASES, None, EL0, KCTL_ALL, HCTL_NVHE_ALL, UNDEF, "*_EL02 at EL0"),
    (ALIASES, None, context(1, e2h=1), KCTL_ALL, HCTL_NVHE_ALL, UNDEF, "*_EL02 at EL1"),
    (ALIASES, None, EL2, KCTL_ALL, HCTL_NVHE_ALL, UNDEF, "EL2, !ELIsInHost(EL2): UNDEFINED"),
    (ALIASES, None, context(2, e2h=1), 0, 0, OK, "EL2, ELIsInHost(EL2)"),
    (ALIASES, None, context(3, e2h=1), 0, 0, OK, "EL3, ELIsInHost(EL2)"),
    (ALIASES, None, EL3, 0, 0, UNDEF, "EL3, !ELIsInHost(EL2)"),
]


def _row_params():
    for regs, is_read, ctx, kctl, hctl, verdict, why in ROWS:
        for name in regs:
            for read in ((True, False) if is_read is None else (is_read,)):
                yield pytest.param(name, read, ctx, kctl, hctl, verdict, why,
                                   id=f"{name}-{'r' if read else 'w'}-EL{ctx.el}-"
                                      f"h{HCR_EL2.get(ctx.hcr_el2, 'E2H')}"
                                      f"{HCR_EL2.get(ctx.hcr_el2, 'TGE')}-k{kctl:x}-c{hctl:x}")


@pytest.mark.parametrize("name, is_read, ctx, kctl, hctl, verdict, why", list(_row_params()))
def test_access_verdict(rig, name, is_read, ctx, kctl, hctl, verdict, why):
    rig.write("CNTKCTL_EL1", kctl, EL1)
    rig.write("CNTHCTL_EL2", hctl, EL2)
    assert rig.timer.access(name, ctx, is_read) is verdict, why


def test_checks_read_the_devices_controls(rig):
    """access() hands the check the device's own CNTKCTL_EL1 and CNTHCTL_EL2."""
    assert rig.timer.access("CNTVCT_EL0", EL0, True) is TRAP1
    rig.write("CNTKCTL_EL1", KCTL["EL0VCTEN"], EL1)
    assert rig.timer.access("CNTVCT_EL0", EL0, True) is OK
    tctx = rig.timer.context(EL0)
    assert (tctx.el, tctx.hcr_el2, tctx.cntkctl_el1, tctx.cnthctl_el2) == (0, EL0.hcr_el2, 2, 3)


# ------------------------------------------------------------------ against QEMU 7.2 ------
# tests/baremetal/timer_access.S: each case's state (see its header) and the register it
# accesses. The verdict of the device's check decides what QEMU must show: no exception (OK),
# UNDEFINED (EC 0x00) at the current EL, or a trap (EC 0x18) to EL1/EL2.
QEMU_CASES = {
    0xd02: ("CNTP_CTL_EL0", True, context(1), 0, 0),
    0xd03: ("CNTPCT_EL0", True, context(1), 0, 0),
    0xd04: ("CNTV_CTL_EL0", True, context(1), 0, 0),
    0xd05: ("CNTHP_CTL_EL2", True, context(1), 0, 0),
    0xd06: ("CNTVOFF_EL2", True, context(1), 0, 0),
    0xd07: ("CNTFRQ_EL0", False, context(1), 0, 0),
    0xd08: ("CNTKCTL_EL12", True, context(1), 0, 0),
    0xd09: ("CNTVCT_EL0", False, context(1), 0, 0),
    0xd10: ("CNTV_CTL_EL0", True, context(0), 0, 0),
    0xd11: ("CNTP_CTL_EL0", True, context(0), 0, 0),
    0xd12: ("CNTVCT_EL0", True, context(0), 0, 0),
    0xd13: ("CNTP_CTL_EL0", True, context(0), 0x303, 0),
    0xd14: ("CNTPCT_EL0", True, context(0), 0x303, 0),
    0xd15: ("CNTV_CVAL_EL0", True, context(0), 0x303, 0),
    0xd16: ("CNTPCT_EL0", True, context(0), 0x303, 2),
    0xd17: ("CNTP_CTL_EL0", True, context(0), 0x303, 2),
    0xd18: ("CNTPCT_EL0", True, context(0), 0x303, 1),
    0xd19: ("CNTP_CTL_EL0", True, context(0), 0x303, 1),
    0xd20: ("CNTV_CTL_EL0", True, context(0, tge=1), 0, 3),
    0xd21: ("CNTVCT_EL0", True, context(0, tge=1), 0, 3),
    0xd25: ("CNTV_CTL_EL0", True, HOST0, 0, 0),
    0xd26: ("CNTVCT_EL0", True, HOST0, 0, 0),
    0xd27: ("CNTFRQ_EL0", True, HOST0, 0, 0),
    0xd30: ("CNTP_CTL_EL0", True, context(1, e2h=1), 0, 1 << 10),
    0xd31: ("CNTPCT_EL0", True, context(1, e2h=1), 0, 1 << 10),
    0xd33: ("CNTPCT_EL0", True, context(1, e2h=1), 0, 1 << 11),
    0xd34: ("CNTP_CTL_EL0", True, context(1, e2h=1), 0, 1 << 11),
    0xd40: ("CNTFRQ_EL0", False, context(3), 0, 3),
}
QEMU_BUGS = {
    0xd16: "QEMU 7.2 tests CNTHCTL_EL2.EL1PCEN for an EL0 CNTPCT_EL0 read (E2H == 0) instead of "
           "EL1PCTEN (D24.10.19): no trap where the Arm ARM traps to EL2",
    0xd18: "the same QEMU 7.2 deviation the other way: a trap to EL2 where EL1PCTEN == 1",
}


def _device_values(rig: Rig) -> dict[int, int]:
    """The values timer_access.S records, computed by the device from the same operations."""
    r, t = rig, rig.timer
    r.clock.count = 1 << 30
    r.write("CNTVOFF_EL2", 1 << 40)
    vdiff = {tag: ((r.read("CNTPCT_EL0", c) - r.read("CNTVCT_EL0", c) + (1 << 20)) & M64) >> 36
             for tag, c in ((0xd01, EL2), (0xd22, HOST2), (0xd29, HOST0),
                            (0xd32, context(1, e2h=1)))}
    r.write("CNTHV_CVAL_EL2", M64)
    r.write("CNTHV_CTL_EL2", 3)
    values = {0xd23: r.read("CNTV_CTL_EL0", HOST2), 0xd24: r.read("CNTV_CTL_EL02", HOST2),
              0xd28: r.read("CNTV_CTL_EL0", HOST0)}
    r.write("CNTHCTL_EL2", 0xC00)
    r.write("CNTKCTL_EL1", 3, HOST2)
    values |= {0xd35: r.read("CNTHCTL_EL2"), 0xd36: r.read("CNTKCTL_EL1", HOST2)}
    r.write("CNTP_CVAL_EL0", r.read("CNTPCT_EL0") - 100)
    r.write("CNTP_CTL_EL0", 3)
    values |= {0xd37: r.read("CNTP_TVAL_EL0") >> 31, 0xd38: r.read("CNTP_CTL_EL0")}
    r.write("CNTP_CTL_EL0", 0)
    values[0xd39] = r.read("CNTP_CTL_EL0")
    assert t.access("CNTP_CTL_EL0", EL2, True) is OK
    return vdiff | values


@pytest.mark.skipif(shutil.which("qemu-system-aarch64") is None,
                    reason="qemu-system-aarch64 not installed (Debian: qemu-system-arm)")
def test_access_checks_and_values_match_qemu(rig, tmp_path):
    routing = pytest.importorskip("test_exception_routing")
    if shutil.which(routing.AS) is None:
        pytest.skip(f"{routing.AS} not installed (Debian: binutils-aarch64-linux-gnu)")
    objs = []
    for src in ("common.S", "timer_access.S"):
        obj = tmp_path / (src[:-2] + ".o")
        check([routing.AS, "-march=armv8.2-a+profile", "-I", str(routing.SRC), "-o",
               str(obj), str(routing.SRC / src)])
        objs.append(str(obj))
    elf = tmp_path / "timer_access.elf"
    check([routing.LD, "--no-warn-rwx-segments", "-T", str(routing.SRC / "link.ld"),
           "-o", str(elf), *objs])
    outcome = routing.Runs._qemu(elf, 3, tmp_path / "qemu")
    assert outcome.error is None, outcome.error
    got = {r.tag: r for r in outcome.records}

    for tag, (name, is_read, ctx, kctl, hctl) in QEMU_CASES.items():
        rig.write("CNTKCTL_EL1", kctl, EL1)
        rig.write("CNTHCTL_EL2", hctl, EL2)
        verdict = rig.timer.access(name, ctx, is_read)
        if tag in QEMU_BUGS:
            assert (tag in got) == (verdict is OK), QEMU_BUGS[tag]   # still QEMU's deviation
            continue
        if verdict is OK:
            assert tag not in got, f"{tag:#x} {name}: QEMU took {got[tag]}"
            continue
        enc = TIMER_REGISTERS[name].encoding
        if verdict is UNDEF:
            target, esr = ctx.el, routing.UNDEF
        else:
            target = verdict.target_el
            esr = routing.esr(routing.EC_SYSREG, routing.sysreg_iss(*enc.tuple, 1, is_read))
        rec = got.get(tag)
        assert rec is not None and not rec.is_value, f"{tag:#x} {name}: {verdict} expected"
        assert ((rec.entry >> 2) & 3, hex(rec.esr)) == (target, hex(esr)), f"{tag:#x} {name}"

    values = _device_values(rig)
    assert {tag: got[tag].entry for tag in values} == values
    assert got[0xd41].entry == 62_500_000   # QEMU 7.2's CNTFRQ_EL0 (spe_emu: CNTFRQ_HZ)


# ------------------------------------------------------------------ Unicorn 2.1.4 ---------
def _sys(read: bool, enc: tuple[int, int, int, int, int], rt: int) -> bytes:
    """MRS/MSR (register) Xt, S<op0>_<op1>_C<n>_C<m>_<op2> (Arm ARM C6.2 MRS, MSR)."""
    op0, op1, crn, crm, op2 = enc
    word = (0xD510_0000 | int(read) << 21 | (op0 - 2) << 19 | op1 << 16 | crn << 12 | crm << 8
            | op2 << 5 | rt)
    return word.to_bytes(4, "little")


def _unicorn_run(code: bytes, el: int, skip: bool, count: int = 40):
    """Run ``code`` at ``el`` on Unicorn's "max" CPU with MRS/MSR hooks that (``skip``) supply
    0xAB00 + n and return 1, or return 0. Returns (hook log, INTR numbers and PCs, final PC,
    X1)."""
    unicorn = pytest.importorskip("unicorn")
    a = unicorn.arm64_const
    uc = unicorn.Uc(unicorn.UC_ARCH_ARM64, unicorn.UC_MODE_ARM)
    uc.ctl_set_cpu_model(a.UC_CPU_ARM64_MAX)
    uc.mem_map(0, 0x10000)
    uc.mem_write(0x1000, code)
    log, intr = [], []

    def hook(kind):
        def on_sys(uc_, reg_, cp, _data):
            log.append((kind, uc_.reg_read(a.UC_ARM64_REG_PC), (cp.op0, cp.op1, cp.crn, cp.crm,
                                                                 cp.op2)))
            if skip and kind == "mrs":
                uc_.reg_write(reg_, 0xAB00 + len(log))
            return int(skip)
        return on_sys

    def on_intr(uc_, intno, _data):
        pc = uc_.reg_read(a.UC_ARM64_REG_PC)
        intr.append((intno, pc))
        uc_.reg_write(a.UC_ARM64_REG_PC, pc + 4)

    uc.hook_add(unicorn.UC_HOOK_INSN, hook("mrs"), None, 1, 0, a.UC_ARM64_INS_MRS)
    uc.hook_add(unicorn.UC_HOOK_INSN, hook("msr"), None, 1, 0, a.UC_ARM64_INS_MSR)
    uc.hook_add(unicorn.UC_HOOK_INTR, on_intr)
    uc.reg_write(a.UC_ARM64_REG_PSTATE, 0x3C0 | el << 2 | (el > 0))
    uc.cpr_write(3, 3, 13, 0, 2, 0)   # any CP write makes QEMU take the new EL (notes)
    uc.emu_start(0x1000, 0x1000 + len(code), count=count)
    return log, intr, uc.reg_read(a.UC_ARM64_REG_PC), uc.reg_read(a.UC_ARM64_REG_X1)


@pytest.mark.parametrize("el", [0, 1])
def test_unicorn_hooks_see_timer_accesses_and_skip_them(el):
    """UC_HOOK_INSN MRS/MSR fires for the timer registers QEMU knows, before QEMU's own checks
    (at EL0 with CNTKCTL_EL1 = 0 QEMU would trap), and returning 1 skips the instruction
    (PC + 4) with the hook's value in Xt: the device's values win."""
    encs = [TIMER_REGISTERS[n].encoding.tuple for n in ("CNTV_CTL_EL0", "CNTV_CVAL_EL0",
                                                          "CNTP_TVAL_EL0", "CNTP_CTL_EL0")]
    code = b"".join(_sys(True, e, 1) + _sys(False, e, 1) for e in encs)
    code += _sys(True, (3, 3, 14, 0, 2), 1) + _sys(True, (3, 3, 14, 0, 0), 1)  # CNTVCT, CNTFRQ
    log, intr, pc, x1 = _unicorn_run(code, el, skip=True)
    assert intr == [] and pc == 0x1000 + len(code)
    assert [(kind, addr) for kind, addr, _ in log] == [
        ("mrs" if i % 2 == 0 or i >= 8 else "msr", 0x1000 + 4 * i) for i in range(10)]
    assert [enc for _, _, enc in log][::2][:4] == encs
    assert x1 == 0xAB00 + len(log)            # the last MRS's value, from the hook


def test_unicorn_skip_loops_where_qemu_undefs():
    """Where QEMU's static permission fails (an EL2 register at EL1, MSR to a read-only
    counter), returning 1 re-executes the same MRS/MSR forever; returning 0 gives UNDEF
    (INTR 1, PC on the instruction). The machine must return 0 unless the verdict is OK."""
    cases = (((3, 4, 14, 0, 3), True, 1),    # MRS CNTVOFF_EL2 at EL1
             ((3, 3, 14, 0, 2), False, 1),   # MSR CNTVCT_EL0
             ((3, 3, 14, 0, 0), False, 0))   # MSR CNTFRQ_EL0 at EL0 (QEMU: PL1_RW | PL0_R)
    for enc, read, el in cases:
        code = _sys(read, enc, 1)
        log, intr, pc, _ = _unicorn_run(code, el, skip=True, count=20)
        assert pc == 0x1000 and len(log) >= 10 and intr == []
        log, intr, pc, _ = _unicorn_run(code, el, skip=False)
        assert len(log) == 1 and intr == [(1, 0x1000)]


def test_unicorn_raises_no_timer_interrupt():
    """Unicorn 2.1.4 compiles out QEMU's timer model (gt_recalc_timer and gt_ctl_write are
    '#if 0'): CTL writes are dropped and no timer interrupt is ever taken, so the device is
    the only timer."""
    cntv_ctl, cntv_cval = (TIMER_REGISTERS[n].encoding.tuple for n in ("CNTV_CTL_EL0",
                                                                      "CNTV_CVAL_EL0"))
    code = (_sys(False, cntv_cval, 31)                   # CVAL = 0 (XZR)
            + bytes.fromhex("200080d2")                  # mov x0, #1
            + _sys(False, cntv_ctl, 0)                   # ENABLE = 1, IMASK = 0
            + bytes.fromhex("ff4f03d5")                  # msr daifclr, #0xf
            + _sys(True, cntv_ctl, 1)                    # x1 = CNTV_CTL_EL0
            + bytes.fromhex("00000014"))                 # b . (spin)
    unicorn = pytest.importorskip("unicorn")
    uc = unicorn.Uc(unicorn.UC_ARCH_ARM64, unicorn.UC_MODE_ARM)
    uc.ctl_set_cpu_model(unicorn.arm64_const.UC_CPU_ARM64_MAX)
    uc.mem_map(0, 0x10000)
    uc.mem_write(0x1000, code)
    intr = []
    uc.hook_add(unicorn.UC_HOOK_INTR, lambda uc_, n, _d: (intr.append(n), uc_.emu_stop()))
    uc.emu_start(0x1000, 0x10000, count=200_000)
    assert intr == []
    assert uc.reg_read(unicorn.arm64_const.UC_ARM64_REG_X1) == 0      # the write was dropped
    assert uc.reg_read(unicorn.arm64_const.UC_ARM64_REG_PC) == 0x1000 + len(code) - 4
