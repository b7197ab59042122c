"""The GICv3 of several PEs (spe_emu/devices/gicv3.py, IHI 0069): a redistributor and CPU
interface per PE (GICR_TYPER Processor_Number, Affinity_Value and Last per frame; PE n's
frames at GICR_BASE + n * 128 KiB), PPIs per PE, SGIs between PEs (ICC_SGI1R_EL1 target lists
and IRM), SPI routing by GICD_IROUTER<n> (the SPI's state moves with it), and the native
SGI-to-self value of each PE."""

from __future__ import annotations

import pytest

from spe_emu import native
from spe_emu.devices.gicv3 import (GICD_BASE, GICR_BASE, GICR_SIZE, INTID_SPURIOUS, GicCpu,
                                   GicDevice, GicV3)
from spe_emu.errors import ConfigError, DeviceError
from spe_emu.platform.board import VIRT

GICD_CTLR, GICD_ISENABLER1, GICD_ISPENDR1, GICD_ISACTIVER1 = 0x0, 0x104, 0x204, 0x304
GICD_IGROUPR1, GICD_IPRIORITYR, GICD_IROUTER = 0x84, 0x400, 0x6000
GICR_TYPER, GICR_WAKER = 0x8, 0x14
GICR_IGROUPR0, GICR_ISENABLER0, GICR_ISPENDR0, GICR_ICFGR1 = 0x80, 0x100, 0x200, 0xC04
GICR_IPRIORITYR0 = 0x400
PES = 4


def rd_base(pe: int) -> int:
    return GICR_BASE + pe * GICR_SIZE


def sgi_base(pe: int) -> int:
    return rd_base(pe) + 0x1_0000


@pytest.fixture
def log():
    lines: list[str] = []
    return lines


@pytest.fixture
def gic(log) -> GicV3:
    g = GicV3(log.append, num_pes=PES)
    g.mmio_write(GICD_BASE + GICD_CTLR, 4, 1 << 4 | 1 << 1)   # ARE_NS, EnableGrp1NS
    for pe in range(PES):
        cpu = g.cpus[pe]
        cpu.sysreg_write("ICC_PMR_EL1", 0xFF)
        cpu.sysreg_write("ICC_IGRPEN1_EL1", 1)
        g.mmio_write(sgi_base(pe) + GICR_IGROUPR0, 4, 0xFFFF_FFFF)
        g.mmio_write(sgi_base(pe) + GICR_ISENABLER0, 4, 0xFFFF_FFFF)
    return g


def sgir(intid: int, targets: int = 0, *, aff1: int = 0, irm: int = 0) -> int:
    return irm << 40 | intid << 24 | aff1 << 16 | targets


def test_each_redistributor_frame_names_its_pe(gic):
    """GICR_TYPER (IHI 0069 §12.11.37): Processor_Number [23:8] = n, Affinity_Value [63:32]
    = Aff3.Aff2.Aff1.Aff0 of PE n (0.0.0.n on virt), Last [4] only in the last PE's frame."""
    for pe in range(PES):
        typer = gic.mmio_read(rd_base(pe) + GICR_TYPER, 8)
        assert (typer >> 8 & 0xFFFF, typer >> 32, typer >> 4 & 1) == (pe, pe, int(pe == PES - 1))
    with pytest.raises(DeviceError, match="outside the GIC frames"):
        gic.mmio_read(rd_base(PES) + GICR_TYPER, 4)


def test_redistributors_wake_and_sleep_on_their_own(log):
    g = GicV3(log.append, num_pes=2, redistributor_awake_at_reset=False)
    assert [g.mmio_read(rd_base(pe) + GICR_WAKER, 4) for pe in range(2)] == [0b110, 0b110]
    g.mmio_write(rd_base(1) + GICR_WAKER, 4, 0)
    assert [g.mmio_read(rd_base(pe) + GICR_WAKER, 4) for pe in range(2)] == [0b110, 0]
    assert [c.state.awake for c in g.cpus] == [0, 1]


def test_a_ppi_is_its_pes_own(gic):
    """PPI 23 of PE 1 pends on PE 1 only (its own SGI_base ISPENDR0), and only PE 1's CPU
    interface signals it and acknowledges it."""
    gic.set_level(23, True, pe=1)
    assert [c.irq_line() for c in gic.cpus] == [False, True, False, False]
    assert [gic.mmio_read(sgi_base(pe) + GICR_ISPENDR0, 4) >> 23 & 1 for pe in range(PES)] \
        == [0, 1, 0, 0]
    assert gic.cpus[0].sysreg_read("ICC_IAR1_EL1") == INTID_SPURIOUS
    assert gic.cpus[1].sysreg_read("ICC_IAR1_EL1") == 23


def test_sgi_with_a_target_list_reaches_those_pes(gic, log):
    """ICC_SGI1R_EL1 from PE 0 with TargetList 0b1010: SGI 5 pends on PEs 1 and 3 only; each
    acknowledges it; PE 2 reads 1023. A target with no PE (Aff0 = 9) is logged."""
    gic.cpus[0].sysreg_write("ICC_SGI1R_EL1", sgir(5, 0b10_0000_1010))
    assert [c.irq_line() for c in gic.cpus] == [False, True, False, True]
    assert gic.cpus[2].sysreg_read("ICC_IAR1_EL1") == INTID_SPURIOUS
    assert gic.cpus[1].sysreg_read("ICC_IAR1_EL1") == 5
    assert gic.cpus[3].sysreg_read("ICC_IAR1_EL1") == 5
    assert log == [f"gic: ignored: ICC_SGI1R_EL1 write {sgir(5, 0b10_0000_1010):#x}: SGI 5 to "
                   f"PE 0.0.0.9: no such PE"]


def test_sgi_with_irm_reaches_every_other_pe(gic):
    gic.cpus[2].sysreg_write("ICC_SGI1R_EL1", sgir(1, irm=1))
    assert [c.irq_line() for c in gic.cpus] == [True, True, False, True]
    gic.cpus[2].sysreg_write("ICC_SGI1R_EL1", sgir(1, 1 << 2))   # to itself
    assert gic.cpus[2].sysreg_read("ICC_IAR1_EL1") == 1


def spi_setup(gic: GicV3, intid: int, aff0: int, irm: int = 0) -> None:
    n = intid - 32
    gic.mmio_write(GICD_BASE + GICD_IGROUPR1, 4, 0xFFFF_FFFF)
    gic.mmio_write(GICD_BASE + GICD_IPRIORITYR + intid, 1, 0x80)
    gic.mmio_write(GICD_BASE + GICD_IROUTER + 8 * intid, 8, irm << 31 | aff0)
    gic.mmio_write(GICD_BASE + GICD_ISENABLER1, 4, 1 << n)


def test_spi_goes_to_the_pe_its_irouter_names_and_moves_with_it(gic):
    """GICD_IROUTER<n> (IHI 0069 §12.9.22): Aff0 = 2 routes SPI 40 to PE 2 alone; routed to
    PE 1 while pending, it is signalled there (the pending state moves with it); the
    distributor's ISPENDR and ISACTIVER read the SPI's state wherever it is; IRM = 1 routes
    it to PE 0 (this board's choice for 1-of-N)."""
    spi_setup(gic, 40, aff0=2)
    gic.set_level(40, True)
    assert [c.irq_line() for c in gic.cpus] == [False, False, True, False]
    assert gic.mmio_read(GICD_BASE + GICD_ISPENDR1, 4) >> 8 & 1 == 1
    gic.mmio_write(GICD_BASE + GICD_IROUTER + 8 * 40, 8, 1)
    assert [c.irq_line() for c in gic.cpus] == [False, True, False, False]
    assert gic.cpus[1].sysreg_read("ICC_IAR1_EL1") == 40
    assert gic.mmio_read(GICD_BASE + GICD_ISACTIVER1, 4) >> 8 & 1 == 1
    gic.cpus[1].sysreg_write("ICC_EOIR1_EL1", 40)
    assert gic.mmio_read(GICD_BASE + GICD_ISACTIVER1, 4) >> 8 & 1 == 0
    gic.mmio_write(GICD_BASE + GICD_IROUTER + 8 * 40, 8, 1 << 31)   # IRM = 1
    assert [c.irq_line() for c in gic.cpus] == [True, False, False, False]
    gic.mmio_write(GICD_BASE + GICD_IROUTER + 8 * 40, 8, 9)   # no PE 0.0.0.9
    assert not any(c.irq_line() for c in gic.cpus)
    assert gic.mmio_read(GICD_BASE + GICD_ISPENDR1, 4) >> 8 & 1 == 1   # still pending


def test_native_sgi_to_self_names_each_pe():
    """The native path takes an ICC_SGI1R_EL1 write natively only when it names the PE alone:
    PE 3's value has TargetList bit 3 (Aff0 = 3); any other target falls back to Python."""
    g = GicV3(num_pes=PES)
    intr = native.SpeIntr()
    g.cpus[3].fill_native_path(intr)
    assert intr.sgi_self_value == sgir(0, 1 << 3)
    assert intr.sgi_self_value & intr.sgi_self_mask == intr.sgi_self_value
    assert sgir(7, 1 << 3) & intr.sgi_self_mask == intr.sgi_self_value
    assert sgir(7, 1 << 2) & intr.sgi_self_mask != intr.sgi_self_value


def test_pes_and_regions_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="must be 1..8"):
        GicV3(num_pes=9)
    board = VIRT.with_pes(3)
    spec = board.device("intc")
    assert spec.regions[1] == (GICR_BASE, 3 * GICR_SIZE) and spec.prop("pes") == 3
    from spe_emu.platform.board import Platform
    from spe_emu.platform.clock import VirtualClock
    dev = GicDevice(spec, Platform(VirtualClock(lambda: 0), tmp_path, lambda m: None))
    assert isinstance(dev.cpu_interface(2), GicCpu)
    with pytest.raises(DeviceError, match="no PE 3"):
        dev.input(23, pe=3)


def test_eoi_of_an_spi_routed_elsewhere_while_active_deactivates_it(gic, log):
    """An SPI's active state is the distributor's, one for every PE (IHI 0069 §4.1): SPI 40,
    acknowledged on PE 1 and then routed to PE 2 (GICD_IROUTER<n> written while it is
    active), is deactivated by PE 1's ICC_EOIR1_EL1 (EOImode 0), and, pending again, is
    signalled on PE 2."""
    spi_setup(gic, 40, aff0=1)
    gic.mmio_write(GICD_BASE + GICD_ISPENDR1, 4, 1 << 8)
    assert gic.cpus[1].sysreg_read("ICC_IAR1_EL1") == 40
    gic.mmio_write(GICD_BASE + GICD_IROUTER + 8 * 40, 8, 2)
    assert gic.mmio_read(GICD_BASE + GICD_ISACTIVER1, 4) >> 8 & 1 == 1
    gic.cpus[1].sysreg_write("ICC_EOIR1_EL1", 40)
    assert gic.mmio_read(GICD_BASE + GICD_ISACTIVER1, 4) >> 8 & 1 == 0
    assert gic.cpus[1].sysreg_read("ICC_RPR_EL1") == 0xFF            # PE 1's priority dropped
    assert log == []
    gic.mmio_write(GICD_BASE + GICD_ISPENDR1, 4, 1 << 8)
    assert [c.irq_line() for c in gic.cpus] == [False, False, True, False]
    assert gic.cpus[2].sysreg_read("ICC_IAR1_EL1") == 40


def test_dir_from_another_pe_deactivates_an_spi(gic, log):
    """ICC_DIR_EL1 (EOImode 1) deactivates the INTID it names, wherever the SPI is routed:
    PE 3 deactivates SPI 40 that PE 2 acknowledged."""
    spi_setup(gic, 40, aff0=2)
    gic.cpus[3].sysreg_write("ICC_CTLR_EL1", 0b10)                   # EOImode
    gic.mmio_write(GICD_BASE + GICD_ISPENDR1, 4, 1 << 8)
    assert gic.cpus[2].sysreg_read("ICC_IAR1_EL1") == 40
    gic.cpus[3].sysreg_write("ICC_DIR_EL1", 40)
    assert gic.mmio_read(GICD_BASE + GICD_ISACTIVER1, 4) >> 8 & 1 == 0
    assert log == []


def dirty(gic: GicV3) -> list[int]:
    """Each PE's native ``dirty`` flag, then cleared (as the PE's machine does when it reads
    its lines again)."""
    flags = [c.state.dirty for c in gic.cpus]
    for c in gic.cpus:
        c.state.dirty = 0
    return flags


def test_a_change_marks_the_native_state_of_the_pes_it_affects_dirty(gic):
    """A PE's machine reads its lines again when its native state is ``dirty``: an SGI from
    PE 0 to PE 2 marks PE 2's state (and the writer's, whose CPU interface was written); a
    PPI of PE 1 marks PE 1's; an SPI's input marks its target's; a redistributor write marks
    its PE's; a distributor write (any PE's lines) marks every PE's."""
    spi_setup(gic, 40, aff0=3)
    dirty(gic)
    gic.cpus[0].sysreg_write("ICC_SGI1R_EL1", sgir(2, 1 << 2))
    assert dirty(gic) == [1, 0, 1, 0]
    gic.set_level(23, True, pe=1)
    assert dirty(gic) == [0, 1, 0, 0]
    gic.set_level(40, True)
    assert dirty(gic) == [0, 0, 0, 1]
    gic.mmio_write(sgi_base(2) + GICR_ISPENDR0, 4, 1 << 4)
    assert dirty(gic) == [0, 0, 1, 0]
    gic.mmio_write(GICD_BASE + GICD_CTLR, 4, 1 << 4)
    assert dirty(gic) == [1, 1, 1, 1]


def test_the_device_serves_each_pe(tmp_path):
    """GicDevice with ``pes`` = 4 (VIRT.with_pes(4)): cpu_interface(p) is PE p's
    SysregOwner of the ICC_* registers; input(intid, pe) drives PE pe's PPI; the one-PE
    names (irq_line, sysreg_read, fill_native_path) are PE 0's; on_change follows a change
    on any PE."""
    from spe_emu.devices.gicv3 import ICC_REGISTERS
    from spe_emu.platform.board import Platform
    from spe_emu.platform.clock import VirtualClock
    from spe_emu.platform.sysregs import SysregRegistry
    dev = GicDevice(VIRT.with_pes(PES).device("intc"),
                    Platform(VirtualClock(lambda: 0), tmp_path, lambda m: None))
    changes = []
    dev.on_change = lambda: changes.append([dev.cpu_interface(p).irq_line()
                                            for p in range(PES)])
    cpus = [dev.cpu_interface(p) for p in range(PES)]
    assert [c.pe for c in cpus] == [0, 1, 2, 3] and cpus[2] is dev.gic.cpus[2]
    for cpu in cpus:
        assert cpu.table is ICC_REGISTERS and cpu.via_undef is True and cpu.present()
        assert cpu.context("ctx") == "ctx"
        registry = SysregRegistry()
        registry.register(cpu, ICC_REGISTERS)
        assert registry.lookup(ICC_REGISTERS["ICC_PMR_EL1"].encoding.tuple).owner is cpu
    dev.write(GICD_CTLR, 4, 1 << 4 | 1 << 1)
    for p, cpu in enumerate(cpus):
        cpu.sysreg_write("ICC_PMR_EL1", 0xF0, None)
        cpu.sysreg_write("ICC_IGRPEN1_EL1", 1, None)
        dev.write(0xA_0000 + p * GICR_SIZE + 0x1_0000 + GICR_IGROUPR0, 4, 1 << 23)
        dev.write(0xA_0000 + p * GICR_SIZE + 0x1_0000 + GICR_ISENABLER0, 4, 1 << 23)
    cpus[3].sysreg_write("ICC_PMR_EL1", 0x80, None)
    assert [c.sysreg_read("ICC_PMR_EL1", None) for c in cpus] == [0xF0, 0xF0, 0xF0, 0x80]
    assert dev.sysreg_read("ICC_PMR_EL1") == 0xF0
    changes.clear()
    dev.input(23, pe=2)(True)
    assert changes == [[False, False, True, False]]
    assert dev.irq_line() is False                                  # PE 0's
    dev.input(23)(True)
    assert dev.irq_line() is True and changes[-1] == [True, False, True, False]
    assert cpus[2].sysreg_read("ICC_IAR1_EL1", None) == 23
    a, b = native.SpeIntr(), native.SpeIntr()
    dev.fill_native_path(a)
    cpus[0].fill_native_path(b)
    assert (a.gic, a.sgi_self_value) == (b.gic, b.sgi_self_value)
    cpus[1].fill_native_path(b)
    assert b.gic != a.gic and b.sgi_self_value == sgir(0, 1 << 1)
