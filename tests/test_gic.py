"""GICv3 subset: register reset values, the PMBIRQ life cycle, gating, W1S/W1C, logging and
access checks. Every expectation is an exact value."""

from __future__ import annotations

import pytest

from spe_emu.board.gic import (
    GICD_BASE, GICR_BASE, ICC_REGISTERS, WRITE_ONLY, GicV3, icc_el1_access, icc_el2_access,
    icc_el3_access,
)
from spe_emu.cpu.context import AccessContext
from spe_emu.errors import DeviceError
from spe_emu.sysreg import Access

SGI = GICR_BASE + 0x1_0000
PMBIRQ = 21

# architectural offsets (IHI 0069), written out independently of the module's map
GICD_CTLR, GICD_TYPER, GICD_IIDR, GICD_PIDR2 = 0x0000, 0x0004, 0x0008, 0xFFE8
GICD_IGROUPR1, GICD_ISENABLER1, GICD_ICENABLER1 = 0x0084, 0x0104, 0x0184
GICD_ISPENDR1, GICD_ISACTIVER1, GICD_IPRIORITYR8, GICD_ICFGR2 = 0x0204, 0x0304, 0x0420, 0x0C08
GICD_IROUTER32 = 0x6100
GICR_CTLR, GICR_IIDR, GICR_TYPER, GICR_WAKER, GICR_PIDR2 = 0x0, 0x4, 0x8, 0x14, 0xFFE8
GICR_IGROUPR0, GICR_ISENABLER0, GICR_ICENABLER0 = 0x080, 0x100, 0x180
GICR_ISPENDR0, GICR_ICPENDR0, GICR_ISACTIVER0, GICR_ICACTIVER0 = 0x200, 0x280, 0x300, 0x380
GICR_IPRIORITYR0, GICR_ICFGR0, GICR_ICFGR1, GICR_IGRPMODR0 = 0x400, 0xC00, 0xC04, 0xD00


class Recorder:
    def __init__(self):
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)


@pytest.fixture
def log() -> Recorder:
    return Recorder()


@pytest.fixture
def gic(log) -> GicV3:
    return GicV3(log=log)


def rd(gic, base, off, size=4):
    return gic.mmio_read(base + off, size)


def wr(gic, base, off, value, size=4):
    gic.mmio_write(base + off, size, value)


def driver_enable(gic: GicV3, intid: int = PMBIRQ, prio: int = 0xA0, group1: bool = True) -> None:
    """What firmware/gic.c and Linux's gic_cpu_init/gic_dist_init do for one PPI."""
    wr(gic, GICR_BASE, GICR_WAKER, rd(gic, GICR_BASE, GICR_WAKER) & ~0b10)
    assert rd(gic, GICR_BASE, GICR_WAKER) & 0b100 == 0          # ChildrenAsleep clear
    gic.sysreg_write("ICC_SRE_EL1", 1)
    assert gic.sysreg_read("ICC_SRE_EL1") & 1 == 1
    if group1:
        wr(gic, SGI, GICR_IGROUPR0, rd(gic, SGI, GICR_IGROUPR0) | (1 << intid))
    wr(gic, SGI, GICR_IPRIORITYR0 + intid, prio, size=1)          # byte access
    cfg = rd(gic, SGI, GICR_ICFGR1) & ~(0b11 << (2 * (intid - 16)))
    wr(gic, SGI, GICR_ICFGR1, cfg)                                  # level-sensitive
    wr(gic, SGI, GICR_ISENABLER0, 1 << intid)
    wr(gic, GICD_BASE, GICD_CTLR, (1 << 4) | (1 << 1))              # ARE_NS | EnableGrp1NS
    gic.sysreg_write("ICC_PMR_EL1", 0xFF)
    gic.sysreg_write("ICC_BPR1_EL1", 0)
    gic.sysreg_write("ICC_IGRPEN1_EL1", 1)


# ---- reset values ---------------------------------------------------------------------------


def test_distributor_reset_values(gic):
    assert rd(gic, GICD_BASE, GICD_CTLR) == 0x0000_0050          # DS | ARE_NS, RWP 0
    assert rd(gic, GICD_BASE, GICD_TYPER) == 0x0278_0002         # No1N, IDbits 15, 64 SPIs
    assert rd(gic, GICD_BASE, GICD_IIDR) == 0x0000_043B
    assert rd(gic, GICD_BASE, GICD_PIDR2) == 0x3B                # ArchRev 3
    assert rd(gic, GICD_BASE, GICD_PIDR2) >> 4 & 0xF == 3
    assert rd(gic, GICD_BASE, GICD_IGROUPR1) == 0
    assert rd(gic, GICD_BASE, GICD_IROUTER32, 8) == 0


def test_redistributor_reset_values(gic):
    assert rd(gic, GICR_BASE, GICR_CTLR) == 0
    assert rd(gic, GICR_BASE, GICR_IIDR) == 0x43B
    assert rd(gic, GICR_BASE, GICR_TYPER, 8) == 0x10             # Last, processor 0, aff 0
    assert rd(gic, GICR_BASE, GICR_TYPER) == 0x10                # low half
    assert rd(gic, GICR_BASE, GICR_TYPER + 4) == 0               # high half (affinity)
    assert rd(gic, GICR_BASE, GICR_WAKER) == 0b110               # asleep
    assert rd(gic, GICR_BASE, GICR_PIDR2) == 0x3B
    for off in (GICR_IGROUPR0, GICR_ISENABLER0, GICR_ICENABLER0, GICR_ISPENDR0,
                GICR_ICPENDR0, GICR_ISACTIVER0, GICR_ICACTIVER0, GICR_ICFGR1, GICR_IGRPMODR0):
        assert rd(gic, SGI, off) == 0, hex(off)
    for n in range(8):
        assert rd(gic, SGI, GICR_IPRIORITYR0 + 4 * n) == 0
    assert rd(gic, SGI, GICR_ICFGR0) == 0xAAAA_AAAA               # SGIs edge


def test_cpu_interface_reset_values(gic):
    expected = {
        "ICC_PMR_EL1": 0, "ICC_BPR0_EL1": 2, "ICC_BPR1_EL1": 3, "ICC_CTLR_EL1": 0x400,
        "ICC_SRE_EL1": 0b111, "ICC_IGRPEN0_EL1": 0, "ICC_IGRPEN1_EL1": 0, "ICC_AP0R0_EL1": 0,
        "ICC_AP1R0_EL1": 0, "ICC_RPR_EL1": 0xFF, "ICC_IAR1_EL1": 1023, "ICC_HPPIR1_EL1": 1023,
        "ICC_IAR0_EL1": 1023, "ICC_SRE_EL2": 0b1111, "ICC_SRE_EL3": 0b1111,
        "ICC_CTLR_EL3": 0x400, "ICC_IGRPEN1_EL3": 0,
    }
    for name, value in expected.items():
        assert gic.sysreg_read(name) == value, name
    assert gic.irq_line() is False


def test_reset_restores_everything(gic):
    driver_enable(gic)
    gic.set_level(PMBIRQ, True)
    assert gic.sysreg_read("ICC_IAR1_EL1") == PMBIRQ
    gic.reset()
    assert rd(gic, GICR_BASE, GICR_WAKER) == 0b110
    assert rd(gic, SGI, GICR_ISACTIVER0) == 0
    assert rd(gic, SGI, GICR_ISPENDR0) == 0      # input level is reset low too
    assert gic.sysreg_read("ICC_AP1R0_EL1") == 0
    assert gic.sysreg_read("ICC_PMR_EL1") == 0


# ---- the PMBIRQ life cycle ------------------------------------------------------------------


def test_pmbirq_life_cycle(gic):
    changes = []
    gic.on_change = lambda: changes.append(gic.irq_line())
    driver_enable(gic)
    assert gic.irq_line() is False
    assert rd(gic, SGI, GICR_IPRIORITYR0 + 20) == 0xA000         # INTID 21 in byte 1

    changes.clear()
    gic.set_level(PMBIRQ, True)
    assert gic.irq_line() is True
    assert changes == [True]
    assert gic.sysreg_read("ICC_HPPIR1_EL1") == PMBIRQ
    assert rd(gic, SGI, GICR_ISPENDR0) == 1 << PMBIRQ

    # acknowledge: active, still pending (level high), line drops, running priority 0xA0
    assert gic.sysreg_read("ICC_IAR1_EL1") == PMBIRQ
    assert gic.irq_line() is False
    assert rd(gic, SGI, GICR_ISACTIVER0) == 1 << PMBIRQ
    assert rd(gic, SGI, GICR_ICACTIVER0) == 1 << PMBIRQ
    assert rd(gic, SGI, GICR_ISPENDR0) == 1 << PMBIRQ
    assert gic.sysreg_read("ICC_RPR_EL1") == 0xA0
    assert gic.sysreg_read("ICC_AP1R0_EL1") == 1 << (0xA0 >> 3)
    assert gic.sysreg_read("ICC_IAR1_EL1") == 1023               # nothing else to take
    assert gic.sysreg_read("ICC_HPPIR1_EL1") == 1023             # the only pending one is active

    # EOI with the level still high: pending again, line again
    gic.sysreg_write("ICC_EOIR1_EL1", PMBIRQ)
    assert rd(gic, SGI, GICR_ISACTIVER0) == 0
    assert gic.sysreg_read("ICC_RPR_EL1") == 0xFF
    assert gic.sysreg_read("ICC_AP1R0_EL1") == 0
    assert gic.irq_line() is True

    # the handler clears the source (PMBSR_EL1.S = 0) before EOI this time
    assert gic.sysreg_read("ICC_IAR1_EL1") == PMBIRQ
    gic.set_level(PMBIRQ, False)
    assert rd(gic, SGI, GICR_ISPENDR0) == 0
    gic.sysreg_write("ICC_EOIR1_EL1", PMBIRQ)
    assert gic.irq_line() is False
    assert rd(gic, SGI, GICR_ISACTIVER0) == 0
    assert gic.sysreg_read("ICC_IAR1_EL1") == 1023
    assert gic.sysreg_read("ICC_RPR_EL1") == 0xFF


def test_set_level_unchanged_does_not_notify(gic):
    calls = []
    gic.on_change = lambda: calls.append(1)
    gic.set_level(PMBIRQ, False)
    assert calls == []
    gic.set_level(PMBIRQ, True)
    gic.set_level(PMBIRQ, True)
    assert calls == [1]


def test_set_level_rejects_sgis_and_unknown_intids(gic):
    with pytest.raises(DeviceError, match="INTID 5"):
        gic.set_level(5, True)
    with pytest.raises(DeviceError, match="INTID 96"):
        gic.set_level(96, True)


# ---- masking and gating ---------------------------------------------------------------------


def test_pmr_masking(gic):
    driver_enable(gic)
    gic.set_level(PMBIRQ, True)
    gic.sysreg_write("ICC_PMR_EL1", 0xA0)          # priority must be strictly lower than PMR
    assert gic.irq_line() is False
    assert gic.sysreg_read("ICC_IAR1_EL1") == 1023
    assert gic.sysreg_read("ICC_HPPIR1_EL1") == PMBIRQ  # HPPIR ignores PMR
    gic.sysreg_write("ICC_PMR_EL1", 0xA7)          # low 3 bits are not implemented
    assert gic.sysreg_read("ICC_PMR_EL1") == 0xA0
    assert gic.irq_line() is False
    gic.sysreg_write("ICC_PMR_EL1", 0xA8)
    assert gic.irq_line() is True


@pytest.mark.parametrize("gate", ["IGRPEN1", "EnableGrp1NS", "ProcessorSleep", "disabled",
                                  "group0"])
def test_gating(gic, gate):
    driver_enable(gic)
    gic.set_level(PMBIRQ, True)
    assert gic.irq_line() is True
    if gate == "IGRPEN1":
        gic.sysreg_write("ICC_IGRPEN1_EL1", 0)
    elif gate == "EnableGrp1NS":
        wr(gic, GICD_BASE, GICD_CTLR, 1 << 4)
        assert rd(gic, GICD_BASE, GICD_CTLR) == 0x50
    elif gate == "ProcessorSleep":
        wr(gic, GICR_BASE, GICR_WAKER, 0b10)
        assert rd(gic, GICR_BASE, GICR_WAKER) == 0b110
    elif gate == "disabled":
        wr(gic, SGI, GICR_ICENABLER0, 1 << PMBIRQ)
    else:
        wr(gic, SGI, GICR_IGROUPR0, 0)
    assert gic.irq_line() is False
    assert gic.sysreg_read("ICC_IAR1_EL1") == 1023
    assert rd(gic, SGI, GICR_ISACTIVER0) == 0


def test_group0_goes_to_fiq_not_iar1(gic):
    driver_enable(gic, group1=False)
    wr(gic, GICD_BASE, GICD_CTLR, 0b1 | (1 << 1))  # EnableGrp0 | EnableGrp1NS
    gic.sysreg_write("ICC_IGRPEN0_EL1", 1)
    gic.set_level(PMBIRQ, True)
    assert gic.irq_line() is False
    assert gic.fiq_line() is True
    assert gic.sysreg_read("ICC_HPPIR1_EL1") == 1023
    assert gic.sysreg_read("ICC_IAR1_EL1") == 1023
    assert gic.sysreg_read("ICC_HPPIR0_EL1") == PMBIRQ
    assert gic.sysreg_read("ICC_IAR0_EL1") == PMBIRQ
    assert gic.sysreg_read("ICC_AP0R0_EL1") == 1 << 20
    gic.sysreg_write("ICC_EOIR1_EL1", PMBIRQ)       # wrong group: ignored, logged
    assert rd(gic, SGI, GICR_ISACTIVER0) == 1 << PMBIRQ
    gic.sysreg_write("ICC_EOIR0_EL1", PMBIRQ)
    assert rd(gic, SGI, GICR_ISACTIVER0) == 0
    assert gic.sysreg_read("ICC_AP0R0_EL1") == 0


def test_preemption_by_group_priority(gic):
    driver_enable(gic)
    driver_enable(gic, intid=22, prio=0x80)
    driver_enable(gic, intid=23, prio=0xA0)
    gic.set_level(PMBIRQ, True)
    assert gic.sysreg_read("ICC_IAR1_EL1") == PMBIRQ
    gic.set_level(23, True)                         # same priority: no preemption
    assert gic.irq_line() is False
    gic.set_level(22, True)                         # higher priority: preempts
    assert gic.irq_line() is True
    assert gic.sysreg_read("ICC_IAR1_EL1") == 22
    assert gic.sysreg_read("ICC_RPR_EL1") == 0x80
    assert gic.sysreg_read("ICC_AP1R0_EL1") == (1 << 16) | (1 << 20)
    gic.set_level(22, False)
    gic.sysreg_write("ICC_EOIR1_EL1", 22)
    assert gic.sysreg_read("ICC_RPR_EL1") == 0xA0
    assert gic.irq_line() is False
    gic.set_level(PMBIRQ, False)
    gic.sysreg_write("ICC_EOIR1_EL1", PMBIRQ)
    assert gic.irq_line() is True                   # now INTID 23
    assert gic.sysreg_read("ICC_IAR1_EL1") == 23


def test_equal_priority_lowest_intid_first(gic):
    driver_enable(gic, intid=22)
    driver_enable(gic, intid=PMBIRQ)
    gic.set_level(22, True)
    gic.set_level(PMBIRQ, True)
    assert gic.sysreg_read("ICC_HPPIR1_EL1") == PMBIRQ


def test_coarse_binary_point_blocks_preemption(gic):
    driver_enable(gic, prio=0xB8)
    driver_enable(gic, intid=22, prio=0xA0)
    gic.sysreg_write("ICC_BPR1_EL1", 5)             # group priority [7:5]: 0xB8, 0xA0 -> 0xA0
    assert gic.sysreg_read("ICC_BPR1_EL1") == 5
    gic.set_level(PMBIRQ, True)
    assert gic.sysreg_read("ICC_IAR1_EL1") == PMBIRQ
    assert gic.sysreg_read("ICC_AP1R0_EL1") == 1 << (0xA0 >> 3)
    assert gic.sysreg_read("ICC_RPR_EL1") == 0xA0
    gic.set_level(22, True)                         # same group priority: no preemption
    assert gic.irq_line() is False
    gic.sysreg_write("ICC_BPR1_EL1", 3)             # the running priority stays the recorded
    assert gic.irq_line() is False                  # 0xA0, which 0xA0 does not beat
    gic.set_level(PMBIRQ, False)
    gic.sysreg_write("ICC_EOIR1_EL1", PMBIRQ)
    assert gic.sysreg_read("ICC_IAR1_EL1") == 22


def test_eoimode_split(gic):
    driver_enable(gic)
    gic.sysreg_write("ICC_CTLR_EL1", 0b10)          # EOImode
    assert gic.sysreg_read("ICC_CTLR_EL1") == 0x402
    assert gic.sysreg_read("ICC_CTLR_EL3") == 0x410  # EOImode_EL1NS alias
    gic.set_level(PMBIRQ, True)
    assert gic.sysreg_read("ICC_IAR1_EL1") == PMBIRQ
    gic.sysreg_write("ICC_EOIR1_EL1", PMBIRQ)       # priority drop only
    assert gic.sysreg_read("ICC_RPR_EL1") == 0xFF
    assert rd(gic, SGI, GICR_ISACTIVER0) == 1 << PMBIRQ
    assert gic.irq_line() is False
    gic.sysreg_write("ICC_DIR_EL1", PMBIRQ)
    assert rd(gic, SGI, GICR_ISACTIVER0) == 0
    assert gic.irq_line() is True


def test_dir_with_eoimode_0_is_ignored_and_logged(gic, log):
    driver_enable(gic)
    gic.set_level(PMBIRQ, True)
    gic.sysreg_read("ICC_IAR1_EL1")
    gic.sysreg_write("ICC_DIR_EL1", PMBIRQ)
    assert rd(gic, SGI, GICR_ISACTIVER0) == 1 << PMBIRQ
    assert log.lines == ["gic: guest error: ICC_DIR_EL1 written while ICC_CTLR_EL1.EOImode == 0: "
                         "ignored"]


def test_spurious_eoi_is_ignored(gic, log):
    gic.sysreg_write("ICC_EOIR1_EL1", 1023)
    assert log.lines == []
    gic.sysreg_write("ICC_EOIR1_EL1", PMBIRQ)
    assert log.lines == [f"gic: guest error: ICC_EOIR1_EL1 write of INTID {PMBIRQ} with no "
                         f"active priority"]


# ---- W1S / W1C and other register semantics -------------------------------------------------


def test_enable_w1s_w1c(gic):
    wr(gic, SGI, GICR_ISENABLER0, 0x0020_0005)
    assert rd(gic, SGI, GICR_ISENABLER0) == 0x0020_0005
    assert rd(gic, SGI, GICR_ICENABLER0) == 0x0020_0005
    wr(gic, SGI, GICR_ISENABLER0, 0)                # writing 0 changes nothing
    assert rd(gic, SGI, GICR_ISENABLER0) == 0x0020_0005
    wr(gic, SGI, GICR_ICENABLER0, 0x0000_0001)
    assert rd(gic, SGI, GICR_ISENABLER0) == 0x0020_0004
    wr(gic, SGI, GICR_ICENABLER0, 0xFFFF_FFFF)
    assert rd(gic, SGI, GICR_ICENABLER0) == 0


def test_pending_w1s_w1c_and_level(gic):
    wr(gic, SGI, GICR_ISPENDR0, 1 << PMBIRQ)        # latch on a level interrupt
    assert rd(gic, SGI, GICR_ISPENDR0) == 1 << PMBIRQ
    assert rd(gic, SGI, GICR_ICPENDR0) == 1 << PMBIRQ
    wr(gic, SGI, GICR_ICPENDR0, 1 << PMBIRQ)
    assert rd(gic, SGI, GICR_ISPENDR0) == 0
    gic.set_level(PMBIRQ, True)                     # the level keeps it pending
    wr(gic, SGI, GICR_ICPENDR0, 1 << PMBIRQ)
    assert rd(gic, SGI, GICR_ISPENDR0) == 1 << PMBIRQ
    gic.set_level(PMBIRQ, False)
    assert rd(gic, SGI, GICR_ISPENDR0) == 0


def test_pending_latched_by_ispendr_is_delivered_and_cleared_by_ack(gic):
    driver_enable(gic)
    wr(gic, SGI, GICR_ISPENDR0, 1 << PMBIRQ)
    assert gic.irq_line() is True
    assert gic.sysreg_read("ICC_IAR1_EL1") == PMBIRQ
    assert rd(gic, SGI, GICR_ISPENDR0) == 0
    gic.sysreg_write("ICC_EOIR1_EL1", PMBIRQ)
    assert gic.irq_line() is False


def test_active_w1s_w1c(gic):
    wr(gic, SGI, GICR_ISACTIVER0, 0x8000_0001)
    assert rd(gic, SGI, GICR_ICACTIVER0) == 0x8000_0001
    wr(gic, SGI, GICR_ICACTIVER0, 0x8000_0000)
    assert rd(gic, SGI, GICR_ISACTIVER0) == 0x0000_0001


def test_edge_triggered_ppi(gic):
    driver_enable(gic)
    wr(gic, SGI, GICR_ICFGR1, 0b10 << (2 * (PMBIRQ - 16)))
    assert rd(gic, SGI, GICR_ICFGR1) == 0b10 << 10
    wr(gic, SGI, GICR_ICFGR1, 0xFFFF_FFFF)          # only Int_config[1] bits are implemented
    assert rd(gic, SGI, GICR_ICFGR1) == 0xAAAA_AAAA
    gic.set_level(PMBIRQ, True)                     # rising edge latches
    assert gic.sysreg_read("ICC_IAR1_EL1") == PMBIRQ
    assert rd(gic, SGI, GICR_ISPENDR0) == 0          # acknowledged: no longer pending
    gic.sysreg_write("ICC_EOIR1_EL1", PMBIRQ)
    assert gic.irq_line() is False                  # level still high, but no new edge
    gic.set_level(PMBIRQ, False)
    gic.set_level(PMBIRQ, True)
    assert gic.irq_line() is True


def test_group_priority_and_byte_access(gic):
    wr(gic, SGI, GICR_IGROUPR0, 0xFFFF_FFFF)
    assert rd(gic, SGI, GICR_IGROUPR0) == 0xFFFF_FFFF
    wr(gic, SGI, GICR_IPRIORITYR0 + 20, 0xFFFF_FFFF)
    assert rd(gic, SGI, GICR_IPRIORITYR0 + 20) == 0xF8F8_F8F8   # 5 priority bits
    wr(gic, SGI, GICR_IPRIORITYR0 + 21, 0xA5, size=1)
    assert rd(gic, SGI, GICR_IPRIORITYR0 + 20) == 0xF8F8_A0F8
    assert rd(gic, SGI, GICR_IPRIORITYR0 + 21, size=1) == 0xA0
    assert rd(gic, SGI, GICR_IPRIORITYR0 + 22, size=1) == 0xF8


def test_icfgr0_is_read_only(gic, log):
    wr(gic, SGI, GICR_ICFGR0, 0)
    assert rd(gic, SGI, GICR_ICFGR0) == 0xAAAA_AAAA
    assert log.lines == ["gic: guest error: write of 0x0 to read-only GICR_ICFGR0 ignored"]


def test_read_only_registers_ignore_writes_with_a_log(gic, log):
    wr(gic, GICD_BASE, GICD_TYPER, 0)
    wr(gic, GICR_BASE, GICR_TYPER, 0xFFFF, size=8)
    assert rd(gic, GICD_BASE, GICD_TYPER) == 0x0278_0002
    assert rd(gic, GICR_BASE, GICR_TYPER, 8) == 0x10
    assert log.lines == ["gic: guest error: write of 0x0 to read-only GICD_TYPER ignored",
                         "gic: guest error: write of 0xffff to read-only GICR_TYPER ignored"]


def test_gicd_ctlr_fixed_bits(gic):
    wr(gic, GICD_BASE, GICD_CTLR, 0xFFFF_FFFF)
    assert rd(gic, GICD_BASE, GICD_CTLR) == 0x53    # RWP reads 0, DS/ARE fixed at 1
    wr(gic, GICD_BASE, GICD_CTLR, 0)
    assert rd(gic, GICD_BASE, GICD_CTLR) == 0x50


def test_waker_children_asleep_follows(gic):
    wr(gic, GICR_BASE, GICR_WAKER, 0)
    assert rd(gic, GICR_BASE, GICR_WAKER) == 0
    wr(gic, GICR_BASE, GICR_WAKER, 0b100)           # ChildrenAsleep is read-only
    assert rd(gic, GICR_BASE, GICR_WAKER) == 0
    wr(gic, GICR_BASE, GICR_WAKER, 0b010)
    assert rd(gic, GICR_BASE, GICR_WAKER) == 0b110


def test_spi_state_and_routing(gic):
    wr(gic, GICD_BASE, GICD_IGROUPR1, 1)            # SPI 32 -> Group 1
    wr(gic, GICD_BASE, GICD_IPRIORITYR8, 0x40, size=1)
    wr(gic, GICD_BASE, GICD_ICFGR2, 0b10)
    wr(gic, GICD_BASE, GICD_ISENABLER1, 1)
    assert rd(gic, GICD_BASE, GICD_ISENABLER1) == 1
    assert rd(gic, GICD_BASE, GICD_ICENABLER1) == 1
    assert rd(gic, GICD_BASE, GICD_ICFGR2) == 0b10
    assert rd(gic, GICD_BASE, GICD_IPRIORITYR8) == 0x40
    wr(gic, GICD_BASE, GICD_IROUTER32, 0x0000_0001_0000_0100, size=8)  # another PE
    assert rd(gic, GICD_BASE, GICD_IROUTER32, 8) == 0x0000_0001_0000_0100
    assert rd(gic, GICD_BASE, GICD_IROUTER32 + 4) == 1
    driver_enable(gic)
    wr(gic, GICD_BASE, GICD_ISPENDR1, 1)
    assert rd(gic, GICD_BASE, GICD_ISPENDR1) == 1
    assert gic.irq_line() is False                  # routed elsewhere
    wr(gic, GICD_BASE, GICD_IROUTER32 + 4, 0)       # 32-bit half writes
    wr(gic, GICD_BASE, GICD_IROUTER32, 0)
    assert gic.irq_line() is True
    assert gic.sysreg_read("ICC_IAR1_EL1") == 32
    assert rd(gic, GICD_BASE, GICD_ISACTIVER1) == 1
    assert rd(gic, GICD_BASE, GICD_ISPENDR1) == 0


def test_distributor_banked_range_is_raz_wi(gic, log):
    wr(gic, GICD_BASE, 0x100, 0xFFFF_FFFF)          # GICD_ISENABLER0 with ARE = 1
    assert rd(gic, GICD_BASE, 0x100) == 0
    assert rd(gic, SGI, GICR_ISENABLER0) == 0
    assert log.lines == []


def test_unknown_offsets_and_bad_sizes_log(gic, log):
    assert rd(gic, GICD_BASE, 0x5000) == 0
    wr(gic, GICR_BASE, 0x0040, 1)
    assert rd(gic, SGI, GICR_ISENABLER0, size=2) == 0
    assert rd(gic, GICD_BASE, GICD_CTLR + 1, size=1) == 0
    assert rd(gic, GICD_BASE, GICD_CTLR, size=8) == 0
    assert log.lines == [
        "gic: guest error: read of unknown offset GICD+0x5000 (size 4)",
        "gic: guest error: write of unknown offset GICR+0x0040 (size 4)",
        "gic: guest error: read of GICR_ISENABLER0 with unsupported size/alignment at "
        "GICR_SGI+0x0100 (size 2)",
        "gic: guest error: read of GICD_CTLR with unsupported size/alignment at "
        "GICD+0x0001 (size 1)",
        "gic: guest error: read of GICD_CTLR with unsupported size/alignment at "
        "GICD+0x0000 (size 8)",
    ]


def test_host_errors_raise(gic):
    with pytest.raises(DeviceError, match="outside the GIC"):
        gic.mmio_read(0x0900_0000, 4)
    with pytest.raises(DeviceError, match="size 3"):
        gic.mmio_write(GICD_BASE, 3, 0)
    with pytest.raises(DeviceError, match="not a GIC CPU interface register"):
        gic.sysreg_read("PMBSR_EL1")
    with pytest.raises(DeviceError, match="write-only"):
        gic.sysreg_read("ICC_EOIR1_EL1")
    with pytest.raises(DeviceError, match="read-only"):
        gic.sysreg_write("ICC_IAR1_EL1", 0)


# ---- CPU interface register details ---------------------------------------------------------


def test_bpr_minimum_and_cbpr(gic):
    gic.sysreg_write("ICC_BPR1_EL1", 0)
    gic.sysreg_write("ICC_BPR0_EL1", 0)
    assert gic.sysreg_read("ICC_BPR1_EL1") == 3
    assert gic.sysreg_read("ICC_BPR0_EL1") == 2
    gic.sysreg_write("ICC_BPR0_EL1", 4)
    gic.sysreg_write("ICC_CTLR_EL1", 1)             # CBPR: BPR1 reads BPR0 + 1
    assert gic.sysreg_read("ICC_BPR1_EL1") == 5
    gic.sysreg_write("ICC_BPR1_EL1", 7)             # ignored while CBPR
    gic.sysreg_write("ICC_CTLR_EL1", 0)
    assert gic.sysreg_read("ICC_BPR1_EL1") == 3


def test_sre_bits_are_fixed(gic):
    gic.sysreg_write("ICC_SRE_EL1", 0)
    assert gic.sysreg_read("ICC_SRE_EL1") == 0b111
    gic.sysreg_write("ICC_SRE_EL2", 0)
    assert gic.sysreg_read("ICC_SRE_EL2") == 0b0111     # Enable is writable
    gic.sysreg_write("ICC_SRE_EL3", 0b1000)
    assert gic.sysreg_read("ICC_SRE_EL3") == 0b1111


def test_ctlr_identification_fields_are_read_only(gic):
    gic.sysreg_write("ICC_CTLR_EL1", 0xFFFF_FFFF)
    assert gic.sysreg_read("ICC_CTLR_EL1") == 0x403     # PRIbits 4, EOImode, CBPR


def test_el3_aliases(gic):
    gic.sysreg_write("ICC_IGRPEN1_EL3", 0b11)
    assert gic.sysreg_read("ICC_IGRPEN1_EL1") == 1
    assert gic.sysreg_read("ICC_IGRPEN1_EL3") == 0b11
    gic.sysreg_write("ICC_IGRPEN1_EL1", 0)
    assert gic.sysreg_read("ICC_IGRPEN1_EL3") == 0b10
    gic.sysreg_write("ICC_CTLR_EL3", 0b10010)          # EOImode_EL1NS, CBPR_EL1NS
    assert gic.sysreg_read("ICC_CTLR_EL1") == 0x403


def test_sgi1r_is_accepted_and_logged(gic, log):
    gic.sysreg_write("ICC_SGI1R_EL1", 0x0100_0001)
    assert log.lines == ["gic: unimplemented: ICC_SGI1R_EL1 write 0x1000001 ignored: SGI "
                         "generation is not modelled"]
    assert rd(gic, SGI, GICR_ISPENDR0) == 0


# ---- the system-register table and access checks --------------------------------------------

ENCODINGS = {
    "ICC_PMR_EL1": (3, 0, 4, 6, 0), "ICC_IAR1_EL1": (3, 0, 12, 12, 0),
    "ICC_EOIR1_EL1": (3, 0, 12, 12, 1), "ICC_HPPIR1_EL1": (3, 0, 12, 12, 2),
    "ICC_BPR1_EL1": (3, 0, 12, 12, 3), "ICC_CTLR_EL1": (3, 0, 12, 12, 4),
    "ICC_SRE_EL1": (3, 0, 12, 12, 5), "ICC_IGRPEN0_EL1": (3, 0, 12, 12, 6),
    "ICC_IGRPEN1_EL1": (3, 0, 12, 12, 7), "ICC_DIR_EL1": (3, 0, 12, 11, 1),
    "ICC_RPR_EL1": (3, 0, 12, 11, 3), "ICC_SGI1R_EL1": (3, 0, 12, 11, 5),
    "ICC_AP1R0_EL1": (3, 0, 12, 9, 0), "ICC_AP0R0_EL1": (3, 0, 12, 8, 4),
    "ICC_IAR0_EL1": (3, 0, 12, 8, 0), "ICC_EOIR0_EL1": (3, 0, 12, 8, 1),
    "ICC_HPPIR0_EL1": (3, 0, 12, 8, 2),
    "ICC_BPR0_EL1": (3, 0, 12, 8, 3), "ICC_SRE_EL2": (3, 4, 12, 9, 5),
    "ICC_SRE_EL3": (3, 6, 12, 12, 5), "ICC_CTLR_EL3": (3, 6, 12, 12, 4),
    "ICC_IGRPEN1_EL3": (3, 6, 12, 12, 7),
}


def test_table_encodings():
    assert {spec.name: spec.encoding.tuple for spec in ICC_REGISTERS} == ENCODINGS
    assert ICC_REGISTERS.by_encoding((3, 0, 12, 12, 0)).name == "ICC_IAR1_EL1"
    assert {s.name for s in ICC_REGISTERS if s.read_only} == {
        "ICC_IAR0_EL1", "ICC_IAR1_EL1", "ICC_HPPIR0_EL1", "ICC_HPPIR1_EL1", "ICC_RPR_EL1"}
    assert WRITE_ONLY == {"ICC_EOIR0_EL1", "ICC_EOIR1_EL1", "ICC_DIR_EL1", "ICC_SGI1R_EL1"}


def verdict(name: str, el: int, is_read: bool) -> Access:
    return ICC_REGISTERS[name].check(AccessContext(el=el), is_read)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_everything_undefined_at_el0(name):
    assert verdict(name, 0, True) is Access.UNDEFINED
    assert verdict(name, 0, False) is Access.UNDEFINED


def test_access_verdicts_el1_el2_el3():
    U, OK = Access.UNDEFINED, Access.OK
    cases = [
        # name, el, (read verdict, write verdict)
        ("ICC_PMR_EL1", 1, (OK, OK)),
        ("ICC_IAR1_EL1", 1, (OK, U)),
        ("ICC_HPPIR1_EL1", 1, (OK, U)),
        ("ICC_RPR_EL1", 1, (OK, U)),
        ("ICC_EOIR1_EL1", 1, (U, OK)),
        ("ICC_DIR_EL1", 1, (U, OK)),
        ("ICC_SGI1R_EL1", 1, (U, OK)),
        ("ICC_IGRPEN1_EL1", 2, (OK, OK)),
        ("ICC_SRE_EL2", 1, (U, U)),
        ("ICC_SRE_EL2", 2, (OK, OK)),
        ("ICC_SRE_EL2", 3, (OK, OK)),
        ("ICC_SRE_EL3", 2, (U, U)),
        ("ICC_CTLR_EL3", 1, (U, U)),
        ("ICC_IGRPEN1_EL3", 3, (OK, OK)),
    ]
    for name, el, (r, w) in cases:
        assert (verdict(name, el, True), verdict(name, el, False)) == (r, w), (name, el)


def test_named_checks_are_pure_functions():
    for el, expect in ((0, Access.UNDEFINED), (1, Access.OK)):
        assert icc_el1_access(AccessContext(el=el), True) is expect
    assert icc_el2_access(AccessContext(el=1), False) is Access.UNDEFINED
    assert icc_el2_access(AccessContext(el=2), False) is Access.OK
    assert icc_el3_access(AccessContext(el=2), True) is Access.UNDEFINED
    assert icc_el3_access(AccessContext(el=3), True) is Access.OK
