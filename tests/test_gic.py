"""GICv3: register reset values, identification, the PMBIRQ life cycle, SGIs, Group 0 (FIQ),
SPI routing, gating, W1S/W1C, logging, access checks, the board device, and (when QEMU is
installed) the identification registers and the SGI path against QEMU 7.2's GICv3. Every
expectation is an exact value."""

from __future__ import annotations

import pytest
from asmrun import irq_vectors, run_asm, xregs
from qemu_probe import needs_qemu
from qemu_probe import run as run_on_qemu

from spe_emu.devices.gicv3 import (
    GICD_BASE, GICR_BASE, ICC_REGISTERS, WRITE_ONLY, GicDevice, GicV3, icc_el1_access,
    icc_el2_access, icc_el3_access,
)
from spe_emu.arch.context import AccessContext
from spe_emu.errors import ConfigError, DeviceError
from spe_emu.platform.board import VIRT, DeviceSpec, Platform
from spe_emu.platform.clock import VirtualClock
from spe_emu.platform.device import DEVICE_TYPES
from spe_emu.platform.irq import IrqLine
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
    if intid >= 16:                                                 # (SGIs: always edge)
        cfg = rd(gic, SGI, GICR_ICFGR1) & ~(0b11 << (2 * (intid - 16)))
        wr(gic, SGI, GICR_ICFGR1, cfg)                              # level-sensitive
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
    assert rd(gic, GICR_BASE, GICR_WAKER) == 0                   # awake (model default)
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
    wr(gic, GICR_BASE, GICR_WAKER, 0b10)            # ProcessorSleep
    gic.reset()
    assert rd(gic, GICR_BASE, GICR_WAKER) == 0      # awake again (model default)
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


# ---- the system-register table and access checks --------------------------------------------

ENCODINGS = {
    "ICC_PMR_EL1": (3, 0, 4, 6, 0), "ICC_IAR1_EL1": (3, 0, 12, 12, 0),
    "ICC_EOIR1_EL1": (3, 0, 12, 12, 1), "ICC_HPPIR1_EL1": (3, 0, 12, 12, 2),
    "ICC_BPR1_EL1": (3, 0, 12, 12, 3), "ICC_CTLR_EL1": (3, 0, 12, 12, 4),
    "ICC_SRE_EL1": (3, 0, 12, 12, 5), "ICC_IGRPEN0_EL1": (3, 0, 12, 12, 6),
    "ICC_IGRPEN1_EL1": (3, 0, 12, 12, 7), "ICC_DIR_EL1": (3, 0, 12, 11, 1),
    "ICC_RPR_EL1": (3, 0, 12, 11, 3), "ICC_SGI1R_EL1": (3, 0, 12, 11, 5),
    "ICC_ASGI1R_EL1": (3, 0, 12, 11, 6), "ICC_SGI0R_EL1": (3, 0, 12, 11, 7),
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
    assert WRITE_ONLY == {"ICC_EOIR0_EL1", "ICC_EOIR1_EL1", "ICC_DIR_EL1", "ICC_SGI0R_EL1",
                          "ICC_SGI1R_EL1", "ICC_ASGI1R_EL1"}


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
        ("ICC_SGI0R_EL1", 1, (U, OK)),
        ("ICC_ASGI1R_EL1", 2, (U, OK)),
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


# ---- identification registers (IHI 0069 Programmers' model; CoreSight IHI 0029) -------------

ID_OFFSETS = {"PIDR4": 0xFFD0, "PIDR5": 0xFFD4, "PIDR6": 0xFFD8, "PIDR7": 0xFFDC,
              "PIDR0": 0xFFE0, "PIDR1": 0xFFE4, "PIDR2": 0xFFE8, "PIDR3": 0xFFEC,
              "CIDR0": 0xFFF0, "CIDR1": 0xFFF4, "CIDR2": 0xFFF8, "CIDR3": 0xFFFC}


def id_regs(gic, base) -> dict[str, int]:
    return {name: rd(gic, base, off) for name, off in ID_OFFSETS.items()}


@pytest.mark.parametrize("base, part", [(GICD_BASE, 0x492), (GICR_BASE, 0x493)])
def test_coresight_id_registers(gic, base, part):
    ids = id_regs(gic, base)
    assert ids["PIDR2"] >> 4 == 3                               # ArchRev: GICv3
    assert ids["PIDR2"] & 0b1000                                 # JEDEC: JEP106 code used
    jep106 = (ids["PIDR2"] & 0b111) << 4 | ids["PIDR1"] >> 4     # identity code 0x3B: Arm
    assert (jep106, ids["PIDR4"] & 0xF) == (0x3B, 4)             # continuation code 4
    assert (ids["PIDR1"] & 0xF) << 8 | ids["PIDR0"] == part      # GIC-500 part numbers
    assert ids["PIDR4"] >> 4 == 4                                # 2^4 4 KiB blocks: 64 KiB
    assert ids["PIDR3"] == ids["PIDR5"] == ids["PIDR6"] == ids["PIDR7"] == 0
    cidr = ids["CIDR3"] << 24 | ids["CIDR2"] << 16 | ids["CIDR1"] << 8 | ids["CIDR0"]
    assert cidr == 0xB105_F00D                                   # preamble, class 0xF
    assert [ids[n] for n in ID_OFFSETS] == [0x44, 0, 0, 0, part & 0xFF, 0xB0 | part >> 8,
                                            0x3B, 0, 0x0D, 0xF0, 0x05, 0xB1]


def test_id_registers_are_read_only(gic, log):
    wr(gic, GICD_BASE, 0xFFE8, 0)
    wr(gic, GICR_BASE, 0xFFE8, 0)
    wr(gic, GICD_BASE, GICD_IIDR, 0)
    assert rd(gic, GICD_BASE, 0xFFE8) == rd(gic, GICR_BASE, 0xFFE8) == 0x3B
    assert rd(gic, GICD_BASE, GICD_IIDR) == 0x43B
    assert log.lines == ["gic: guest error: write of 0x0 to read-only GICD_PIDR2 ignored",
                         "gic: guest error: write of 0x0 to read-only GICR_PIDR2 ignored",
                         "gic: guest error: write of 0x0 to read-only GICD_IIDR ignored"]


def test_iidr_fields():
    gic = GicV3()
    for base in (GICD_BASE, GICR_BASE):
        iidr = rd(gic, base, 0x0008 if base == GICD_BASE else GICR_IIDR)
        assert iidr & 0xFFF == 0x43B                 # Implementer: Arm (JEP106 0x4, 0x3B)
        assert iidr >> 12 == 0                       # Revision, Variant, ProductID: r0p0, 0


def test_gicd_typer_fields():
    typer = rd(GicV3(), GICD_BASE, GICD_TYPER)
    assert typer & 0x1F == 2                         # ITLinesNumber: max SPI INTID 32*3-1 = 95
    assert typer >> 5 & 0b111 == 0                   # CPUNumber (one PE)
    assert typer >> 10 & 1 == 0                      # SecurityExtn: DS == 1
    assert typer >> 16 & 0b11 == 0                   # MBIS, LPIS: no message SPIs, no LPIs
    assert typer >> 19 & 0x1F == 15                  # IDbits: 16-bit INTIDs ...
    assert GicV3().sysreg_read("ICC_CTLR_EL1") >> 11 & 0b111 == 0   # ... as ICC_CTLR_EL1 says
    assert typer >> 24 & 0b11 == 0b10                # A3V 0, No1N 1
    assert typer >> 26 == 0                          # RSS, ESPI_range


@pytest.mark.parametrize("spis, itlines", [(0, 0), (32, 1), (64, 2), (256, 8), (960, 30)])
def test_gicd_typer_follows_the_number_of_spis(spis, itlines):
    gic = GicV3(num_spis=spis)
    assert rd(gic, GICD_BASE, GICD_TYPER) == 0x0278_0000 | itlines
    last = 32 + spis - 1
    if spis:                                         # the last SPI has its registers
        wr(gic, GICD_BASE, 0x0100 + 4 * (last // 32), 1 << (last % 32))
        assert rd(gic, GICD_BASE, 0x0100 + 4 * (last // 32)) == 1 << (last % 32)
        wr(gic, GICD_BASE, 0x6000 + 8 * last, 0x8000_0000, size=8)
        assert rd(gic, GICD_BASE, 0x6000 + 8 * last, size=8) == 0x8000_0000
        gic.set_level(last, True)
    with pytest.raises(DeviceError, match=f"PPIs/SPIs are 16..{last}"):
        gic.set_level(last + 1, True)


def test_registers_beyond_the_last_spi_are_unknown(log):
    gic = GicV3(log=log, num_spis=32)
    assert rd(gic, GICD_BASE, 0x0108) == 0           # GICD_ISENABLER2: INTIDs 64..95
    assert log.lines == ["gic: guest error: read of unknown offset GICD+0x0108 (size 4)"]


@pytest.mark.parametrize("spis", [16, 33, -32, 992, 1024, True, 64.0])
def test_unsupported_spi_counts_are_refused(spis):
    with pytest.raises(ConfigError, match="must be a multiple of 32 from 0 to 960"):
        GicV3(num_spis=spis)


def test_gicr_typer_fields(gic):
    typer = rd(gic, GICR_BASE, GICR_TYPER, 8)
    assert typer >> 32 == 0                          # Affinity_Value: the PE's, 0.0.0.0
    assert typer >> 8 & 0xFFFF == 0                  # Processor_Number 0
    assert typer >> 4 & 1 == 1                       # Last: the only redistributor
    assert typer & 0b1111 == 0                       # PLPIS, VLPIS, Dirty, DirectLPI
    assert typer >> 24 & 0xFF == 0                   # CommonLPIAff, VSGI, PPInum
    assert typer == 0x10


# ---- GICR_WAKER at reset ----------------------------------------------------------------------


def test_redistributor_awake_at_reset_by_default(gic):
    assert rd(gic, GICR_BASE, GICR_WAKER) == 0
    driver_enable(gic)                               # a driver that wakes it still works
    gic.set_level(PMBIRQ, True)
    assert gic.irq_line() is True


def test_redistributor_asleep_at_reset_when_asked(log):
    gic = GicV3(log=log, redistributor_awake_at_reset=False)
    assert rd(gic, GICR_BASE, GICR_WAKER) == 0b110   # ChildrenAsleep, ProcessorSleep
    wr(gic, SGI, GICR_ISENABLER0, 1 << PMBIRQ)
    wr(gic, SGI, GICR_IGROUPR0, 1 << PMBIRQ)
    wr(gic, GICD_BASE, GICD_CTLR, 0b10)
    gic.sysreg_write("ICC_PMR_EL1", 0xFF)
    gic.sysreg_write("ICC_IGRPEN1_EL1", 1)
    gic.set_level(PMBIRQ, True)
    assert gic.irq_line() is False                   # nothing is forwarded while asleep
    wr(gic, GICR_BASE, GICR_WAKER, 0)
    assert rd(gic, GICR_BASE, GICR_WAKER) == 0
    assert gic.irq_line() is True
    gic.reset()
    assert rd(gic, GICR_BASE, GICR_WAKER) == 0b110


# ---- SGIs: ICC_SGI1R_EL1, ICC_SGI0R_EL1, ICC_ASGI1R_EL1 ---------------------------------------


def sgir(intid: int, targets: int = 1, *, aff1: int = 0, aff2: int = 0, aff3: int = 0,
         rs: int = 0, irm: int = 0) -> int:
    """ICC_SGI{0,1}R_EL1 / ICC_ASGI1R_EL1: Aff3 [55:48], RS [47:44], IRM [40], Aff2 [39:32],
    INTID [27:24], Aff1 [23:16], TargetList [15:0]."""
    return (aff3 << 48 | rs << 44 | irm << 40 | aff2 << 32 | intid << 24 | aff1 << 16
            | targets)


def test_sgi1r_self_ipi_end_to_end(gic, log):
    driver_enable(gic, intid=3, prio=0x80)
    assert rd(gic, SGI, GICR_ICFGR0) == 0xAAAA_AAAA              # SGIs: edge
    gic.sysreg_write("ICC_SGI1R_EL1", sgir(3))
    assert rd(gic, SGI, GICR_ISPENDR0) == 1 << 3
    assert gic.irq_line() is True and gic.fiq_line() is False
    assert gic.sysreg_read("ICC_HPPIR1_EL1") == 3
    assert gic.sysreg_read("ICC_IAR1_EL1") == 3
    assert rd(gic, SGI, GICR_ISPENDR0) == 0                     # acknowledged: not pending
    assert rd(gic, SGI, GICR_ISACTIVER0) == 1 << 3
    assert gic.sysreg_read("ICC_RPR_EL1") == 0x80
    assert gic.irq_line() is False
    gic.sysreg_write("ICC_SGI1R_EL1", sgir(3))                  # again while active
    assert rd(gic, SGI, GICR_ISPENDR0) == 1 << 3                # active and pending
    assert gic.irq_line() is False                              # no preemption by itself
    gic.sysreg_write("ICC_EOIR1_EL1", 3)
    assert rd(gic, SGI, GICR_ISACTIVER0) == 0
    assert gic.sysreg_read("ICC_RPR_EL1") == 0xFF
    assert gic.irq_line() is True                               # the second one
    assert gic.sysreg_read("ICC_IAR1_EL1") == 3
    gic.sysreg_write("ICC_EOIR1_EL1", 3)
    assert gic.irq_line() is False                              # edge: nothing left
    assert gic.sysreg_read("ICC_IAR1_EL1") == 1023
    assert log.lines == []


def test_sgi_stays_pending_until_acknowledged(gic):
    driver_enable(gic, intid=0, prio=0x40)
    gic.sysreg_write("ICC_IGRPEN1_EL1", 0)                      # not signalled yet
    gic.sysreg_write("ICC_SGI1R_EL1", sgir(0))
    for _ in range(3):
        assert rd(gic, SGI, GICR_ISPENDR0) == 1
    gic.sysreg_write("ICC_IGRPEN1_EL1", 1)
    assert gic.sysreg_read("ICC_IAR1_EL1") == 0
    assert rd(gic, SGI, GICR_ISPENDR0) == 0


def test_sgi_can_be_cleared_and_set_through_the_redistributor(gic):
    driver_enable(gic, intid=7)
    gic.sysreg_write("ICC_SGI1R_EL1", sgir(7))
    wr(gic, SGI, GICR_ICPENDR0, 1 << 7)
    assert gic.irq_line() is False
    wr(gic, SGI, GICR_ISPENDR0, 1 << 7)
    assert gic.sysreg_read("ICC_IAR1_EL1") == 7


@pytest.mark.parametrize("value, line", [
    (sgir(3, targets=0b10), "SGI 3 to PE 0.0.0.1: no such PE"),
    (sgir(3, targets=0x8001, rs=1), "SGI 3 to PE 0.0.0.16, 0.0.0.31: no such PE"),
    (sgir(3, aff1=1), "SGI 3 to PE 0.0.1.0: no such PE"),
    (sgir(3, aff2=2), "SGI 3 to PE 0.2.0.0: no such PE"),
    (sgir(3, aff3=3), "SGI 3 to PE 3.0.0.0: no such PE"),
    (sgir(3, irm=1), "SGI 3 to every other PE: there is no other PE"),
    (sgir(3, targets=0), None),
])
def test_sgi_to_other_pes_is_logged_and_ignored(gic, log, value, line):
    driver_enable(gic, intid=3)
    gic.sysreg_write("ICC_SGI1R_EL1", value)
    assert rd(gic, SGI, GICR_ISPENDR0) == 0
    assert gic.irq_line() is False
    expected = [] if line is None else [f"gic: ignored: ICC_SGI1R_EL1 write {value:#x}: {line}"]
    assert log.lines == expected


def test_sgi_to_self_and_others(gic, log):
    driver_enable(gic, intid=3)
    gic.sysreg_write("ICC_SGI1R_EL1", sgir(3, targets=0b101))
    assert rd(gic, SGI, GICR_ISPENDR0) == 1 << 3
    assert log.lines == ["gic: ignored: ICC_SGI1R_EL1 write 0x3000005: SGI 3 to PE 0.0.0.2: "
                         "no such PE"]


@pytest.mark.parametrize("register, group, forwarded", [
    ("ICC_SGI1R_EL1", 1, True), ("ICC_SGI1R_EL1", 0, True),
    ("ICC_SGI0R_EL1", 0, True), ("ICC_SGI0R_EL1", 1, False),
    ("ICC_ASGI1R_EL1", 0, True), ("ICC_ASGI1R_EL1", 1, False),
])
def test_sgi_forwarding_by_register_and_group(gic, log, register, group, forwarded):
    """IHI 0069 "Forwarding an SGI to a target PE", GICD_CTLR.DS == 1."""
    wr(gic, SGI, GICR_IGROUPR0, group << 9)
    gic.sysreg_write(register, sgir(9))
    assert rd(gic, SGI, GICR_ISPENDR0) == (1 << 9 if forwarded else 0)
    assert log.lines == []


def test_sgi0r_group0_end_to_end_is_an_fiq(gic):
    wr(gic, SGI, GICR_IPRIORITYR0 + 5, 0x20, size=1)
    wr(gic, SGI, GICR_ISENABLER0, 1 << 5)            # Group 0 (IGROUPR0 bit 5 = 0)
    wr(gic, GICD_BASE, GICD_CTLR, 0b01)              # EnableGrp0
    gic.sysreg_write("ICC_PMR_EL1", 0xFF)
    gic.sysreg_write("ICC_IGRPEN0_EL1", 1)
    gic.sysreg_write("ICC_SGI0R_EL1", sgir(5))
    assert (gic.fiq_line(), gic.irq_line()) == (True, False)
    assert gic.sysreg_read("ICC_HPPIR0_EL1") == 5
    assert gic.sysreg_read("ICC_HPPIR1_EL1") == 1023
    assert gic.sysreg_read("ICC_IAR1_EL1") == 1023  # Group 1 acknowledge: not this one
    assert gic.sysreg_read("ICC_IAR0_EL1") == 5
    assert gic.sysreg_read("ICC_AP0R0_EL1") == 1 << (0x20 >> 3)
    assert gic.fiq_line() is False
    gic.sysreg_write("ICC_EOIR0_EL1", 5)
    assert gic.sysreg_read("ICC_AP0R0_EL1") == 0
    assert rd(gic, SGI, GICR_ISACTIVER0) == 0


def test_sgi_write_needs_no_input_line(gic):
    with pytest.raises(DeviceError, match="INTID 3 has no input line"):
        gic.set_level(3, True)


# ---- Group 0 SPIs are FIQs ----------------------------------------------------------------------


def group0_spi(gic, intid=40, prio=0x40):
    """An SPI in Group 0 (GICD_IGROUPR<n> bit 0), enabled, routed to the PE, with Group 0
    enabled at the distributor and the CPU interface."""
    wr(gic, GICD_BASE, 0x0400 + intid, prio, size=1)
    wr(gic, GICD_BASE, 0x0100 + 4 * (intid // 32), 1 << (intid % 32))
    wr(gic, GICD_BASE, GICD_CTLR, 0b11)
    gic.sysreg_write("ICC_PMR_EL1", 0xFF)
    gic.sysreg_write("ICC_IGRPEN0_EL1", 1)


def test_group0_spi_raises_fiq_not_irq(gic):
    group0_spi(gic)
    assert (gic.fiq_line(), gic.irq_line()) == (False, False)
    gic.set_level(40, True)
    assert (gic.fiq_line(), gic.irq_line()) == (True, False)
    assert gic.sysreg_read("ICC_HPPIR0_EL1") == 40
    assert gic.sysreg_read("ICC_IAR0_EL1") == 40
    assert gic.sysreg_read("ICC_RPR_EL1") == 0x40
    assert gic.fiq_line() is False
    gic.sysreg_write("ICC_EOIR0_EL1", 40)
    assert gic.fiq_line() is True                    # level-sensitive, still high
    gic.set_level(40, False)
    assert gic.fiq_line() is False


def test_group0_gates(gic):
    group0_spi(gic)
    gic.set_level(40, True)
    gic.sysreg_write("ICC_IGRPEN0_EL1", 0)
    assert gic.fiq_line() is False
    assert gic.sysreg_read("ICC_HPPIR0_EL1") == 1023
    gic.sysreg_write("ICC_IGRPEN0_EL1", 1)
    wr(gic, GICD_BASE, GICD_CTLR, 0b10)              # EnableGrp0 off at the distributor
    assert gic.fiq_line() is False
    wr(gic, GICD_BASE, GICD_CTLR, 0b11)
    gic.sysreg_write("ICC_PMR_EL1", 0x40)            # PMR: priority must be below the mask
    assert gic.fiq_line() is False
    gic.sysreg_write("ICC_PMR_EL1", 0x48)
    assert gic.fiq_line() is True


def test_group0_preempts_active_group1(gic):
    driver_enable(gic, prio=0x80)                    # PMBIRQ in Group 1
    group0_spi(gic, prio=0x40)
    gic.set_level(PMBIRQ, True)
    assert gic.sysreg_read("ICC_IAR1_EL1") == PMBIRQ
    gic.set_level(40, True)
    assert (gic.fiq_line(), gic.irq_line()) == (True, False)
    assert gic.sysreg_read("ICC_IAR0_EL1") == 40
    assert gic.sysreg_read("ICC_RPR_EL1") == 0x40
    gic.sysreg_write("ICC_EOIR1_EL1", PMBIRQ)        # not the highest active priority
    assert rd(gic, SGI, GICR_ISACTIVER0) == 1 << PMBIRQ
    gic.set_level(40, False)
    gic.sysreg_write("ICC_EOIR0_EL1", 40)
    assert gic.sysreg_read("ICC_RPR_EL1") == 0x80
    gic.sysreg_write("ICC_EOIR1_EL1", PMBIRQ)
    assert gic.sysreg_read("ICC_RPR_EL1") == 0xFF


def test_bpr0_sets_group0_preemption(gic):
    group0_spi(gic, intid=40, prio=0x70)
    group0_spi(gic, intid=41, prio=0x40)
    gic.sysreg_write("ICC_BPR0_EL1", 5)              # group priority [7:6]: both 0x40
    gic.set_level(40, True)
    assert gic.sysreg_read("ICC_IAR0_EL1") == 40
    assert gic.sysreg_read("ICC_RPR_EL1") == 0x40    # the group priority is recorded
    gic.set_level(41, True)
    assert gic.fiq_line() is False                   # same group priority: no preemption
    gic.sysreg_write("ICC_EOIR0_EL1", 40)
    gic.sysreg_write("ICC_BPR0_EL1", 2)              # group priority [7:3]
    assert gic.sysreg_read("ICC_IAR0_EL1") == 41
    gic.set_level(40, False)
    gic.set_level(40, True)                          # (level: 40 is pending again)
    assert gic.fiq_line() is False                   # 0x70 does not beat 0x40
    gic.sysreg_write("ICC_EOIR0_EL1", 41)
    assert gic.fiq_line() is True


# ---- SPI routing: GICD_IROUTER<n> ---------------------------------------------------------------


def test_irouter_layout_and_reserved_bits(gic):
    assert GICD_IROUTER32 == 0x6000 + 8 * 32
    wr(gic, GICD_BASE, GICD_IROUTER32, (1 << 64) - 1, size=8)
    # Aff3 [39:32], Interrupt_Routing_Mode [31], Aff2 [23:16], Aff1 [15:8], Aff0 [7:0]
    assert rd(gic, GICD_BASE, GICD_IROUTER32, 8) == 0x0000_00FF_80FF_FFFF
    assert rd(gic, GICD_BASE, GICD_IROUTER32 + 4) == 0xFF
    assert rd(gic, GICD_BASE, GICD_IROUTER32 + 8 * 63, 8) == 0    # SPI 95, the last one
    assert rd(gic, GICD_BASE, 0x6000 + 8 * 96, 8) == 0             # beyond: no register


@pytest.mark.parametrize("irouter, routed", [
    (0, True),                                       # affinity 0.0.0.0: the PE
    (0x0000_0000_8000_0000, True),                   # 1-of-N: the only participating PE
    (0x0000_0000_8000_0101, True),                   # 1-of-N: the affinity is ignored
    (0x0000_0000_0000_0001, False),                  # 0.0.0.1
    (0x0000_0000_0000_0100, False),                  # 0.0.1.0
    (0x0000_0000_0001_0000, False),                  # 0.1.0.0
    (0x0000_0001_0000_0000, False),                  # 1.0.0.0
])
def test_irouter_routing(gic, irouter, routed):
    driver_enable(gic)
    wr(gic, GICD_BASE, GICD_IGROUPR1, 1 << 8)        # SPI 40 in Group 1
    wr(gic, GICD_BASE, GICD_ISENABLER1, 1 << 8)
    wr(gic, GICD_BASE, GICD_IROUTER32 + 8 * 8, irouter, size=8)
    gic.set_level(40, True)
    assert rd(gic, GICD_BASE, GICD_ISPENDR1) == 1 << 8          # pending either way
    assert gic.irq_line() is routed
    assert gic.sysreg_read("ICC_IAR1_EL1") == (40 if routed else 1023)


# ---- the board device ---------------------------------------------------------------------------


def platform(log, tmp_path) -> Platform:
    return Platform(clock=VirtualClock(lambda: 0), outdir=tmp_path, guest_error=log)


def test_device_is_registered_and_maps_virt_regions(log, tmp_path):
    spec = VIRT.device("intc")
    assert DEVICE_TYPES[spec.kind] is GicDevice
    dev = GicDevice(spec, platform(log, tmp_path))
    assert dev.read(GICD_TYPER, 4) == 0x0278_0002                # GICD at offset 0
    assert dev.read(0xA_0000 + GICR_TYPER, 8) == 0x10            # GICR at +0xA_0000
    assert dev.read(0xA_0000 + GICR_WAKER, 4) == 0
    dev.write(0xB_0000 + GICR_ISENABLER0, 4, 1 << PMBIRQ)        # SGI_base at +0xB_0000
    assert dev.gic.mmio_read(SGI + GICR_ISENABLER0, 4) == 1 << PMBIRQ
    dev.write(0x5000, 4, 1)
    assert log.lines == ["gic: guest error: write of unknown offset GICD+0x5000 (size 4)"]


def test_device_inputs_drive_interrupts(log, tmp_path):
    dev = GicDevice(VIRT.device("intc"), platform(log, tmp_path))
    changes = []
    dev.on_change = lambda: changes.append((dev.irq_line(), dev.fiq_line()))
    line = IrqLine("pl011.intr -> SPI 1")
    line.connect(dev.input(33))
    dev.write(GICD_IGROUPR1, 4, 1 << 1)
    dev.write(GICD_ISENABLER1, 4, 1 << 1)
    dev.write(GICD_CTLR, 4, 0b10)
    dev.sysreg_write("ICC_PMR_EL1", 0xFF)
    dev.sysreg_write("ICC_IGRPEN1_EL1", 1)
    changes.clear()
    line.set(True)
    assert changes == [(True, False)]
    assert dev.sysreg_read("ICC_IAR1_EL1") == 33
    line.set(False)
    dev.sysreg_write("ICC_EOIR1_EL1", 33)
    assert changes[-1] == (False, False)
    dev.reset()
    assert dev.read(GICD_ISENABLER1, 4) == 0
    with pytest.raises(DeviceError, match="INTID 15 has no input line"):
        dev.input(15)
    with pytest.raises(DeviceError, match=r"INTID 96 has no input line \(PPIs/SPIs are 16..95\)"):
        dev.input(96)


def test_device_properties(log, tmp_path):
    spec = DeviceSpec("gicv3", "intc", 0x0800_0000, 0x1_0000,
                      regions=((0x0800_0000, 0x1_0000), (0x080A_0000, 0x2_0000)),
                      props=(("spis", 128), ("redistributor_awake_at_reset", False)))
    dev = GicDevice(spec, platform(log, tmp_path))
    assert dev.read(GICD_TYPER, 4) & 0x1F == 4
    assert dev.read(0xA_0000 + GICR_WAKER, 4) == 0b110
    dev.input(159)
    bad = DeviceSpec("gicv3", "intc", 0x0800_0000, 0x1_0000)
    with pytest.raises(ConfigError, match=r"a GICv3 of 1 PE\(s\) needs regions"):
        GicDevice(bad, platform(log, tmp_path))
    odd = DeviceSpec("gicv3", "intc", 0x0800_0000, 0x1_0000,
                     regions=((0x0800_0000, 0x1_0000), (0x080A_0000, 0x2_0000)),
                     props=(("spis", 100),))
    with pytest.raises(ConfigError, match="100 SPIs"):
        GicDevice(odd, platform(log, tmp_path))


# ---- against QEMU 7.2 (-M virt,gic-version=3 -cpu max, EL1) --------------------------------------

QEMU_SPIS = 256
"""QEMU's virt board: NUM_IRQS = 256 SPIs (hw/arm/virt.c)."""


def _qemu_probe_steps() -> tuple[list[str], list[str]]:
    """(labels, assembly steps): identification reads, then an SGI self-IPI in Group 1 through
    ICC_SGI1R_EL1, a Group 0 SGI through ICC_SGI0R_EL1, and ICC_SGI1R_EL1 aimed at a Group 0
    SGI. x19 = GICD, x20 = GICR RD_base, x21 = SGI_base."""
    labels, steps = [], []

    def step(label, text):
        labels.append(label)
        steps.append(text)

    setup = "    ldr x19, =0x08000000\n    ldr x20, =0x080A0000\n    ldr x21, =0x080B0000\n"
    step("GICD_CTLR", setup + "    ldr w0, [x19]")
    for name, off in (("GICD_TYPER", 4), ("GICD_IIDR", 8), ("GICD_TYPER2", 0xC)):
        step(name, f"    ldr w0, [x19, #{off}]")
    for name, off in ID_OFFSETS.items():
        step(f"GICD_{name}", f"    mov x1, #{off:#x}\n    ldr w0, [x19, x1]")
    step("GICR_CTLR", "    ldr w0, [x20]")
    step("GICR_IIDR", "    ldr w0, [x20, #4]")
    step("GICR_TYPER", "    ldr x0, [x20, #8]")
    step("GICR_WAKER", "    ldr w0, [x20, #0x14]")
    for name, off in ID_OFFSETS.items():
        step(f"GICR_{name}", f"    mov x1, #{off:#x}\n    ldr w0, [x20, x1]")
    step("ICC_CTLR_EL1", "    mrs x0, s3_0_c12_c12_4")
    # SGI 3 in Group 1 at 0x80, SGI 5 and SGI 6 in Group 0 at 0x20
    step("wake", """
    str wzr, [x20, #0x14]
1:  ldr w0, [x20, #0x14]
    tbnz w0, #2, 1b
    mov w1, #(1 << 3)
    str w1, [x21, #0x80]
    mov w1, #0x80
    strb w1, [x21, #0x403]
    mov w1, #0x20
    strb w1, [x21, #0x405]
    strb w1, [x21, #0x406]
    mov w1, #((1 << 3) | (1 << 5) | (1 << 6))
    str w1, [x21, #0x100]
    mov w1, #3
    str w1, [x19]
    mov x1, #1
    msr s3_0_c12_c12_5, x1          // ICC_SRE_EL1
    mov x1, #0xFF
    msr s3_0_c4_c6_0, x1            // ICC_PMR_EL1
    mov x1, #1
    msr s3_0_c12_c12_7, x1          // ICC_IGRPEN1_EL1
    msr s3_0_c12_c12_6, x1          // ICC_IGRPEN0_EL1
    isb""")
    step("SGI1R->ISPENDR0", "    ldr x1, =0x03000001\n    msr s3_0_c12_c11_5, x1\n    isb\n"
                            "    ldr w0, [x21, #0x200]")
    step("HPPIR1", "    mrs x0, s3_0_c12_c12_2")
    step("IAR1", "    mrs x0, s3_0_c12_c12_0")
    step("ISACTIVER0", "    ldr w0, [x21, #0x300]")
    step("RPR", "    mrs x0, s3_0_c12_c11_3")
    step("EOIR1->ISACTIVER0", "    mov x1, #3\n    msr s3_0_c12_c12_1, x1\n    isb\n"
                              "    ldr w0, [x21, #0x300]")
    step("SGI0R->ISPENDR0", "    ldr x1, =0x05000001\n    msr s3_0_c12_c11_7, x1\n    isb\n"
                            "    ldr w0, [x21, #0x200]")
    step("HPPIR0", "    mrs x0, s3_0_c12_c8_2")
    step("IAR0", "    mrs x0, s3_0_c12_c8_0")
    step("EOIR0->ISACTIVER0", "    mov x1, #5\n    msr s3_0_c12_c8_1, x1\n    isb\n"
                              "    ldr w0, [x21, #0x300]")
    step("SGI1R(G0)->ISPENDR0", "    ldr x1, =0x06000001\n    msr s3_0_c12_c11_5, x1\n"
                                "    isb\n    ldr w0, [x21, #0x200]")
    return labels, steps


def _model_probe(gic: GicV3) -> dict[str, int]:
    """The same sequence as :func:`_qemu_probe_steps` on the model."""
    out: dict[str, int] = {}
    out["GICD_CTLR"] = rd(gic, GICD_BASE, GICD_CTLR)
    for name, off in (("GICD_TYPER", 4), ("GICD_IIDR", 8), ("GICD_TYPER2", 0xC)):
        out[name] = rd(gic, GICD_BASE, off)
    for name, value in id_regs(gic, GICD_BASE).items():
        out[f"GICD_{name}"] = value
    out["GICR_CTLR"] = rd(gic, GICR_BASE, GICR_CTLR)
    out["GICR_IIDR"] = rd(gic, GICR_BASE, GICR_IIDR)
    out["GICR_TYPER"] = rd(gic, GICR_BASE, GICR_TYPER, 8)
    out["GICR_WAKER"] = rd(gic, GICR_BASE, GICR_WAKER)
    for name, value in id_regs(gic, GICR_BASE).items():
        out[f"GICR_{name}"] = value
    out["ICC_CTLR_EL1"] = gic.sysreg_read("ICC_CTLR_EL1")
    wr(gic, GICR_BASE, GICR_WAKER, 0)
    out["wake"] = rd(gic, GICR_BASE, GICR_WAKER)
    wr(gic, SGI, GICR_IGROUPR0, 1 << 3)
    wr(gic, SGI, GICR_IPRIORITYR0 + 3, 0x80, size=1)
    wr(gic, SGI, GICR_IPRIORITYR0 + 5, 0x20, size=1)
    wr(gic, SGI, GICR_IPRIORITYR0 + 6, 0x20, size=1)
    wr(gic, SGI, GICR_ISENABLER0, (1 << 3) | (1 << 5) | (1 << 6))
    wr(gic, GICD_BASE, GICD_CTLR, 3)
    for name, value in (("ICC_SRE_EL1", 1), ("ICC_PMR_EL1", 0xFF), ("ICC_IGRPEN1_EL1", 1),
                        ("ICC_IGRPEN0_EL1", 1)):
        gic.sysreg_write(name, value)
    gic.sysreg_write("ICC_SGI1R_EL1", sgir(3))
    out["SGI1R->ISPENDR0"] = rd(gic, SGI, GICR_ISPENDR0)
    out["HPPIR1"] = gic.sysreg_read("ICC_HPPIR1_EL1")
    out["IAR1"] = gic.sysreg_read("ICC_IAR1_EL1")
    out["ISACTIVER0"] = rd(gic, SGI, GICR_ISACTIVER0)
    out["RPR"] = gic.sysreg_read("ICC_RPR_EL1")
    gic.sysreg_write("ICC_EOIR1_EL1", 3)
    out["EOIR1->ISACTIVER0"] = rd(gic, SGI, GICR_ISACTIVER0)
    gic.sysreg_write("ICC_SGI0R_EL1", sgir(5))
    out["SGI0R->ISPENDR0"] = rd(gic, SGI, GICR_ISPENDR0)
    out["HPPIR0"] = gic.sysreg_read("ICC_HPPIR0_EL1")
    out["IAR0"] = gic.sysreg_read("ICC_IAR0_EL1")
    gic.sysreg_write("ICC_EOIR0_EL1", 5)
    out["EOIR0->ISACTIVER0"] = rd(gic, SGI, GICR_ISACTIVER0)
    gic.sysreg_write("ICC_SGI1R_EL1", sgir(6))
    out["SGI1R(G0)->ISPENDR0"] = rd(gic, SGI, GICR_ISPENDR0)
    return out


QEMU_DIFFERS = {
    # label: (QEMU 7.2's value, the model's value, why)
    "GICD_TYPER": (0x037A_0007, 0x0278_0008,
                   "QEMU: A3V = 1 and LPIS = 1 (it has an ITS); ITLinesNumber = 7 = SPIs/32 - 1, "
                   "where IHI 0069 makes the largest SPI INTID 32(N+1) - 1 = 287, N = 8"),
    "GICR_TYPER": (0x0100_0011, 0x10, "QEMU: PLPIS = 1 and CommonLPIAff = 1 (LPIs)"),
    "GICR_CTLR": (0b10, 0, "QEMU: CES = 1, about clearing EnableLPIs (LPIs)"),
    "ICC_CTLR_EL1": (0x8C00, 0x400, "QEMU: A3V = 1, IDbits = 1 (24-bit INTIDs for LPIs)"),
    "SGI1R(G0)->ISPENDR0": (0, 1 << 6,
                            "ICC_SGI1R_EL1 aimed at a Group 0 SGI: QEMU does not forward it; "
                            "IHI 0069's DS == 1 forwarding table (and KVM) does"),
}


@needs_qemu
def test_identification_and_sgis_match_qemu(tmp_path):
    labels, steps = _qemu_probe_steps()
    qemu = dict(zip(labels, run_on_qemu(steps, tmp_path)))
    model = _model_probe(GicV3(num_spis=QEMU_SPIS, redistributor_awake_at_reset=False))
    assert list(model) == labels
    for label in labels:
        if label in QEMU_DIFFERS:
            q, m, why = QEMU_DIFFERS[label]
            assert (qemu[label], model[label]) == (q, m), (label, why)
        else:
            assert model[label] == qemu[label], label
    assert qemu["GICR_WAKER"] == 0b110               # QEMU: asleep at reset
    assert qemu["IAR1"] == 3 and qemu["IAR0"] == 5


# ---- on the machine: an SGI self-IPI taken as an IRQ -----------------------------------------

SELF_IPI = """
    adr x0, vectors
    msr vbar_el1, x0
    movz x1, #0x0800, lsl #16          // GICD_CTLR = ARE_NS | EnableGrp1NS
    mov w0, #0x12
    str w0, [x1]
    movz x1, #0x080B, lsl #16          // SGI_base: SGI 3 in Group 1, enabled, priority 0x80
    mov w0, #0x8
    str w0, [x1, #0x80]
    str w0, [x1, #0x100]
    mov w0, #0x80
    strb w0, [x1, #0x403]
    mov x0, #1
    msr icc_sre_el1, x0
    msr icc_igrpen1_el1, x0
    mov x0, #0xff
    msr icc_pmr_el1, x0
    msr daifclr, #2
    adr x19, after
    movz x0, #0x0300, lsl #16          // INTID 3, TargetList 0b1: this PE
    orr x0, x0, #1
    msr icc_sgi1r_el1, x0
after:
    nop
""" + irq_vectors("""
    mrs x22, icc_rpr_el1
    msr icc_eoir1_el1, x21
    mrs x23, icc_rpr_el1
""")


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_sgi1r_self_ipi_is_taken_on_the_machine(tmp_path, mode):
    m = run_asm(SELF_IPI, tmp_path, mode=mode)
    assert m.result.exit_status == 0
    elr, intid, rpr_active, rpr_after = xregs(m, 20, 21, 22, 23)
    assert elr == xregs(m, 19)[0]                    # taken right after the MSR
    assert (intid, rpr_active, rpr_after) == (3, 0x80, 0xFF)
    assert m.irqs_taken == 1
