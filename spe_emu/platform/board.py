"""The board, described once: memory map, interrupt assignments, devices and their properties.

Everything else that needs the board's layout is generated from :data:`VIRT` (or another
:class:`BoardSpec`): the machine's bus (:mod:`spe_emu.platform.bus`), the device tree blob
(:mod:`spe_emu.platform.dtb`), the firmware's C constants (``firmware/board.h``) and the
memory-map table in docs/design.md (:mod:`spe_emu.tools.generate`; a test fails when a
generated file is stale).

The ``virt`` board follows QEMU's ``hw/arm/virt.c`` memory map and interrupt assignment, so
software built for ``qemu-system-aarch64 -M virt`` finds its devices where it expects them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError
from .clock import VirtualClock

GIC_SPI_BASE = 32
"""INTID of SPI 0."""
GIC_PPI_BASE = 16
"""INTID of PPI 0."""


MAX_PES = 8
"""The most PEs a board has (``--smp``; QEMU's virt with GICv3 has up to 512, grouped by 8)."""

GICR_FRAME_BYTES = 0x1_0000
"""Bytes of one GICv3 redistributor frame: a PE's redistributor is its RD_base frame followed
by its SGI_base frame (GICv3 §12.10), so PE n's RD_base is at ``2 * n`` frames."""


def spi(n: int) -> int:
    """INTID of SPI ``n`` (device-tree cell 0 = SPI)."""
    return GIC_SPI_BASE + n


def ppi(n: int) -> int:
    """INTID of PPI ``n`` (device-tree cell 1 = PPI)."""
    return GIC_PPI_BASE + n


@dataclass(frozen=True)
class DeviceSpec:
    """One device of a board.

    Attributes:
        kind: the registered device class (:data:`spe_emu.platform.device.DEVICE_TYPES`).
        name: instance name, also the device-tree node name's stem.
        base, size: the device's first register region (bytes).
        regions: every (base, size) region, when there are several (GICD and GICR).
        irqs: (output name, INTID) pairs: how the device's interrupt outputs are wired.
        props: (name, value) pairs of device-specific settings (clock rate, ...).
    """

    kind: str
    name: str
    base: int
    size: int
    regions: tuple[tuple[int, int], ...] = ()
    irqs: tuple[tuple[str, int], ...] = ()
    props: tuple[tuple[str, Any], ...] = ()

    @property
    def all_regions(self) -> tuple[tuple[int, int], ...]:
        return self.regions or ((self.base, self.size),)

    def prop(self, name: str, default: Any = None) -> Any:
        return dict(self.props).get(name, default)

    def irq(self, output: str) -> int:
        return dict(self.irqs)[output]


@dataclass(frozen=True)
class BoardSpec:
    """A board: RAM, devices, and the PE's private interrupt assignments.

    Attributes:
        name: e.g. ``"virt"``.
        ram_base: physical address of RAM (bytes).
        ram_size: default RAM size (bytes; ``-m``).
        ram_max: the largest RAM the board's memory map holds from ``ram_base`` (bytes; a
            larger ``-m`` is refused).
        devices: the memory-mapped devices.
        ppis: the PE's private interrupts by name (INTIDs): the generic timers, PMBIRQ, the
            PMU overflow interrupt.
        kernel_offset: where a raw binary, or an arm64 Image whose header has no image_size
            (kernels before v3.17), is loaded, from ``ram_base`` (bytes; QEMU's
            KERNEL64_LOAD_ADDR; see :mod:`spe_emu.platform.boot`).
        console: the device that takes console input (and ``/chosen/stdout-path`` names).
        counter_hz: the system counter's frequency (Hz), which ``CNTFRQ_EL0`` reads; with
            one counter tick per instruction it also sets how fast the PE is against
            virtual time (IMPLEMENTATION DEFINED before Armv8.6, 1 GHz from it, Arm ARM
            D12.1.2 "The system counter").
    """

    name: str
    ram_base: int
    ram_size: int
    ram_max: int
    devices: tuple[DeviceSpec, ...]
    ppis: tuple[tuple[str, int], ...]
    kernel_offset: int = 0x8_0000
    console: str = "pl011"
    counter_hz: int = 1_000_000_000

    def device(self, name: str) -> DeviceSpec:
        for d in self.devices:
            if d.name == name:
                return d
        raise ConfigError(f"board {self.name} has no device {name!r}")

    def ppi(self, name: str) -> int:
        return dict(self.ppis)[name]

    def with_pes(self, n: int) -> "BoardSpec":
        """The board with ``n`` PEs (1..MAX_PES): its GICv3's redistributor region holds one
        RD_base + SGI_base pair (2 frames) per PE, and the GIC's ``pes`` property says how
        many (QEMU's virt sizes the region for its maximum; the DTB gives this region).

        Raises:
            ConfigError: ``n`` out of range."""
        if not 1 <= n <= MAX_PES:
            raise ConfigError(f"{n} PEs: the {self.name} board has 1..{MAX_PES}")
        devices = []
        for d in self.devices:
            if d.kind == "gicv3":
                gicd, (gicr, _) = d.regions[0], d.regions[1]
                props = tuple(p for p in d.props if p[0] != "pes") + (("pes", n),)
                d = replace(d, regions=(gicd, (gicr, n * 2 * GICR_FRAME_BYTES)), props=props)
            devices.append(d)
        return replace(self, devices=tuple(devices))



VIRT = BoardSpec(
    name="virt",
    ram_base=0x4000_0000,
    ram_size=256 << 20,
    ram_max=255 << 30,
    devices=(
        DeviceSpec("gicv3", "intc", 0x0800_0000, 0x1_0000,
                   regions=((0x0800_0000, 0x1_0000), (0x080A_0000, 0x2_0000)),
                   props=(("spis", 64),)),
        DeviceSpec("pl011", "pl011", 0x0900_0000, 0x1000, irqs=(("intr", spi(1)),),
                   props=(("clock-hz", 24_000_000),)),
        DeviceSpec("generic_timer", "timer", 0, 0,
                   irqs=(("cntp", ppi(14)), ("cntv", ppi(11)), ("cnthp", ppi(10)),
                         ("cnthv", ppi(12)))),
        DeviceSpec("pmuv3", "pmu", 0, 0, irqs=(("pmuirq", ppi(7)),),
                   props=(("counters", 6),)),
    ),
    ppis=(("cntps", ppi(13)), ("cntp", ppi(14)), ("cntv", ppi(11)), ("cnthp", ppi(10)),
          ("cnthv", ppi(12)), ("pmbirq", ppi(5)), ("pmu", ppi(7))),
)
"""QEMU's ``virt`` board (``hw/arm/virt.c`` base_memmap and a15irqmap): GICv3 distributor at
0x0800_0000 and redistributor at 0x080A_0000, PL011 at 0x0900_0000 on SPI 1, RAM at
0x4000_0000; generic timer PPIs 13/14/11/10 and 12 (INTIDs 29/30/27/26, 28), SPE's PMBIRQ
on PPI 5 (INTID 21) and the PMU (PMUv3, 6 event counters: ``devices/pmu.py``) on PPI 7
(INTID 23). RAM is at most 255 GiB, up to 256 GiB
(QEMU's LEGACY_RAMLIMIT_GB: its legacy memory map; QEMU goes beyond it by moving its high IO
regions above RAM, which this board does not have)."""


@dataclass
class Platform:
    """What devices may use of the machine: the clock, the output directory, the console and
    the guest-error log.

    Attributes:
        clock: the board's virtual clock.
        outdir: the run's output directory (device output files land there).
        guest_error: logs a guest mistake (one line).
        console: receives bytes written to the console (None: discarded).
    """

    clock: VirtualClock
    outdir: Path
    guest_error: Callable[[str], None]
    console: Callable[[bytes], None] | None = None
