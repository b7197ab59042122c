"""The flattened device tree (DTB) a kernel finds in x0, generated from a :class:`BoardSpec`.

The tree has the shape of the one QEMU builds for ``-M virt,gic-version=3`` (``hw/arm/virt.c``
and ``hw/arm/boot.c``), so a kernel sees the same nodes, addresses and interrupt specifiers on
spe_emu as under QEMU, plus the SPE node QEMU does not have:

====================  =====================================================================
node                  from
====================  =====================================================================
``/``                 #address-cells = #size-cells = 2, ``linux,dummy-virt``,
                      interrupt-parent = the interrupt controller's phandle
``memory@<base>``     ``board.ram_base`` and the RAM size
``cpus/cpu@<aff>``    one per MPIDR_EL1 affinity (Aff3..Aff0); #address-cells 2 only when an
                      Aff3 is non-zero (DT binding ``arm/cpus.yaml``)
``psci``              PSCI 1.0 function IDs (Arm DEN0022, SMC Calling Convention DEN0028)
``timer``             the generic timer's secure, non-secure, virtual and hypervisor PPIs
                      (``board.ppis``), level-high
``pmu``, ``spe``      ``arm,armv8-pmuv3`` and ``arm,statistical-profiling-extension-v1`` on
                      their PPIs (``board.ppis``: ``pmu``, ``pmbirq``)
devices               one node per :class:`DeviceSpec`, built by the function registered for
                      its kind in :data:`NODE_BUILDERS` (``intc@8000000``, ``pl011@9000000``)
``apb-pclk``          a ``fixed-clock`` for the devices' ``clock-hz`` property
``chosen``            bootargs, stdout-path, linux,initrd-start/-end
====================  =====================================================================

Nothing is random: there is no ``kaslr-seed`` or ``rng-seed`` (QEMU writes random ones), so
the blob is a pure function of the arguments (a kernel that falls back to RNDR for KASLR gets
the machine's seeded values: docs/model.md).

A device kind's node: the functions in :data:`NODE_BUILDERS` take ``(spec, tree)`` and return
a :class:`DtNode` (the blob is built from the board description alone, before any device
exists); a kind whose node is built elsewhere maps to None.

The blob is serialised with the PyPI package ``fdt`` (pure Python); node and property names,
cell layouts and flags follow the Devicetree Specification v0.4 and the Linux bindings
(``interrupt-controller/arm,gic-v3.yaml``, ``timer/arm,arch_timer.yaml``,
``perf/arm,pmu.yaml``, ``perf/arm,spe-pmu.yaml`` (``spe-pmu.txt``), ``arm/psci.yaml``,
``serial/arm,pl011.yaml``, ``clock/fixed-clock.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union

import fdt

from ..arch.smccc import MPIDR_EL1, OEN_STANDARD_SECURE, function_id, mpidr_affinity
from ..errors import ConfigError
from .board import GIC_PPI_BASE, GIC_SPI_BASE, GICR_FRAME_BYTES, BoardSpec, DeviceSpec

# -- constants of the bindings ---------------------------------------------------------------
GIC_SPI = 0
"""Cell 0 of a GIC interrupt specifier for an SPI (``dt-bindings/interrupt-controller/arm-gic.h``)."""
GIC_PPI = 1
"""Cell 0 of a GIC interrupt specifier for a PPI."""
IRQ_TYPE_LEVEL_HIGH = 4
"""Cell 2 of a GIC interrupt specifier: level-sensitive, active high
(``dt-bindings/interrupt-controller/irq.h``). With GICv3 there are no PPI CPU-mask bits."""
GIC_INTID_LIMIT = 1020
"""First INTID that is not an SPI (1020..1023 are special, GICv3 §2.2)."""

ROOT_ADDRESS_CELLS = 2
ROOT_SIZE_CELLS = 2
ROOT_COMPATIBLE = "linux,dummy-virt"
CPU_COMPATIBLE = "arm,arm-v8"
TIMER_COMPATIBLE = ("arm,armv8-timer", "arm,armv7-timer")
PMU_COMPATIBLE = "arm,armv8-pmuv3"
SPE_COMPATIBLE = "arm,statistical-profiling-extension-v1"
PSCI_COMPATIBLE = ("arm,psci-1.0", "arm,psci-0.2", "arm,psci")
PSCI_METHODS = ("hvc", "smc")

TIMER_PPIS = ("cntps", "cntp", "cntv", "cnthp")
"""``board.ppis`` names of the timer's interrupts in binding order: secure physical,
non-secure physical, virtual, hypervisor physical; ``cnthv`` (hypervisor virtual) may follow."""

GICR_BYTES_PER_PE = 2 * GICR_FRAME_BYTES
"""Bytes of one PE's GICv3 redistributor: the RD_base and SGI_base frames."""

PSCI_LEGACY_FUNCTIONS = (("cpu_suspend", 1, True), ("cpu_off", 2, False), ("cpu_on", 3, True),
                         ("migrate", 5, True))
"""(property, PSCI function number, SMC64 calling convention) of the function IDs the PSCI 0.1
binding lists in the node (PSCI DEN0022 §5.1): kernels that know PSCI 0.2 ignore them, QEMU
writes them anyway, and so do we (AArch64: the SMC64 IDs where there is one). A cpu node's
``reg`` is the PE's affinity (:func:`spe_emu.arch.smccc.mpidr_affinity`)."""


def gic_interrupt(intid: int, flags: int = IRQ_TYPE_LEVEL_HIGH) -> list[int]:
    """The 3-cell GIC interrupt specifier ``<type number flags>`` of an INTID (PPI or SPI).

    Raises:
        ConfigError: an SGI or an INTID beyond the SPI range (no specifier exists).
    """
    if GIC_PPI_BASE <= intid < GIC_SPI_BASE:
        return [GIC_PPI, intid - GIC_PPI_BASE, flags]
    if GIC_SPI_BASE <= intid < GIC_INTID_LIMIT:
        return [GIC_SPI, intid - GIC_SPI_BASE, flags]
    raise ConfigError(f"INTID {intid} is neither a PPI nor an SPI: no device-tree interrupt "
                      f"specifier")


def cells(value: int, n: int) -> list[int]:
    """``value`` as ``n`` big-endian 32-bit cells (most significant first).

    Raises:
        ConfigError: ``value`` is negative or does not fit ``n`` cells.
    """
    if not 0 <= value < 1 << (32 * n):
        raise ConfigError(f"{value:#x} does not fit {n} device-tree cell(s)")
    return [(value >> (32 * (n - 1 - i))) & 0xFFFF_FFFF for i in range(n)]


# -- the tree, before serialisation ----------------------------------------------------------
PropValue = Union[None, str, tuple, list, int, bytes]
"""A property value: None (empty: a boolean property), str or tuple of str (string list),
int or list of int (32-bit cells), bytes (raw)."""


@dataclass
class DtNode:
    """One node: its name (``stem`` or ``stem@unit``), properties in order, children."""

    name: str
    props: list[tuple[str, PropValue]] = field(default_factory=list)
    children: list["DtNode"] = field(default_factory=list)

    def add(self, name: str, value: PropValue = None) -> "DtNode":
        self.props.append((name, value))
        return self

    def to_fdt(self) -> fdt.Node:
        node = fdt.Node(self.name)
        for name, value in self.props:
            node.append(_prop(name, value))
        for child in self.children:
            node.append(child.to_fdt())
        return node


def _prop(name: str, value: PropValue) -> fdt.Property:
    if value is None:
        return fdt.Property(name)
    if isinstance(value, str):
        return fdt.PropStrings(name, value)
    if isinstance(value, tuple):
        return fdt.PropStrings(name, *value)
    if isinstance(value, int):
        return fdt.PropWords(name, value)
    if isinstance(value, list):
        return fdt.PropWords(name, *value)
    if isinstance(value, bytes):
        return fdt.PropBytes(name, data=value)
    raise TypeError(f"property {name}: unsupported value {value!r}")


class DtTree:
    """What node builders share while one blob is built: the board, the root's cell sizes,
    phandles (allocated 1, 2, ... in order of first use, so the blob is deterministic) and
    the fixed clocks the devices asked for."""

    def __init__(self, board: BoardSpec):
        self.board = board
        self.address_cells = ROOT_ADDRESS_CELLS
        self.size_cells = ROOT_SIZE_CELLS
        self._phandles: dict[str, int] = {}
        self.clocks: dict[int, str] = {}
        """Frequency (Hz) -> clock node name."""

    def phandle(self, key: str) -> int:
        """The phandle of ``key`` (a node name), allocated on first use."""
        if key not in self._phandles:
            self._phandles[key] = len(self._phandles) + 1
        return self._phandles[key]

    def reg(self, *regions: tuple[int, int]) -> list[int]:
        """A ``reg`` value of (base, size) regions in the root's cell sizes."""
        out: list[int] = []
        for base, size in regions:
            out += cells(base, self.address_cells) + cells(size, self.size_cells)
        return out

    def clock(self, hz: int) -> int:
        """The phandle of a fixed clock of ``hz`` (the first is ``apb-pclk``, as on QEMU)."""
        if not isinstance(hz, int) or hz <= 0:
            raise ConfigError(f"clock frequency must be a positive number of Hz, not {hz!r}")
        if hz not in self.clocks:
            self.clocks[hz] = "apb-pclk" if not self.clocks else f"apb-pclk-{hz}"
        return self.phandle(self.clocks[hz])


def _unit(stem: str, base: int) -> str:
    return f"{stem}@{base:x}"


# -- device nodes, by kind -------------------------------------------------------------------
def _gicv3_node(spec: DeviceSpec, tree: DtTree) -> DtNode:
    """``arm,gic-v3``: reg = GICD, then the redistributor region(s)."""
    regions = spec.all_regions
    if len(regions) < 2:
        raise ConfigError(f"{spec.name}: a GICv3 needs a distributor and a redistributor region")
    node = DtNode(_unit(spec.name, spec.base))
    node.add("compatible", "arm,gic-v3")
    node.add("#interrupt-cells", 3)
    node.add("interrupt-controller")
    node.add("#address-cells", tree.address_cells)
    node.add("#size-cells", tree.size_cells)
    node.add("ranges")
    node.add("reg", tree.reg(*regions))
    node.add("#redistributor-regions", len(regions) - 1)
    node.add("phandle", tree.phandle(node.name))
    return node


def _pl011_node(spec: DeviceSpec, tree: DtTree) -> DtNode:
    """``arm,pl011``: the clock feeds both UARTCLK and PCLK, as on QEMU."""
    node = DtNode(_unit(spec.name, spec.base))
    node.add("compatible", ("arm,pl011", "arm,primecell"))
    node.add("reg", tree.reg((spec.base, spec.size)))
    node.add("interrupts", gic_interrupt(spec.irq("intr")))
    clk = tree.clock(spec.prop("clock-hz"))
    node.add("clocks", [clk, clk])
    node.add("clock-names", ("uartclk", "apb_pclk"))
    return node


NODE_BUILDERS: dict[str, Callable[[DeviceSpec, DtTree], DtNode] | None] = {
    "gicv3": _gicv3_node,
    "pl011": _pl011_node,
    "generic_timer": None,  # the /timer node is built from board.ppis (_timer_node)
    "pmuv3": None,          # the /pmu node is built from board.ppis["pmu"] (build_dtb's pmu)
}
"""Device kind -> function building its node."""

INTERRUPT_CONTROLLER_KINDS = frozenset({"gicv3"})


def _device_node(spec: DeviceSpec, tree: DtTree) -> DtNode | None:
    try:
        build = NODE_BUILDERS[spec.kind]
    except KeyError:
        raise ConfigError(f"device {spec.name}: no device-tree node for kind {spec.kind!r} "
                          f"(add one to spe_emu.platform.dtb.NODE_BUILDERS)") from None
    return None if build is None else build(spec, tree)


# -- the blob --------------------------------------------------------------------------------
def build_dtb(board: BoardSpec, *, ram_size: int, bootargs: str = "",
              initrd: tuple[int, int] | None = None, psci_method: str | None = "hvc",
              spe: bool = True, pmu: bool | None = None, hyp_virt_timer: bool = False,
              cpu_mpidrs: tuple[int, ...] = (0,), stdout_device: str | None = "pl011") -> bytes:
    """The DTB (format version 17, Devicetree Specification v0.4 §5) describing ``board``.

    Args:
        board: the board description (addresses, INTIDs, devices).
        ram_size: bytes of RAM from ``board.ram_base`` (the memory node).
        bootargs: the kernel command line (``/chosen/bootargs``; omitted when empty).
        initrd: (start, end) physical addresses of the initial RAM disk (end exclusive), or
            None (``/chosen/linux,initrd-start`` / ``-end``, #address-cells cells each).
        psci_method: the PSCI conduit, ``"hvc"`` or ``"smc"``; None: no psci node and no
            cpu ``enable-method``.
        spe: add the SPE node (PMBIRQ from ``board.ppis["pmbirq"]``).
        pmu: add the PMUv3 node (``board.ppis["pmu"]``); None: the same as ``spe``.
        hyp_virt_timer: list the timer's fifth (hypervisor virtual, ``cnthv``) interrupt.
        cpu_mpidrs: MPIDR_EL1 of each PE, the boot PE first (only Aff3..Aff0 are used).
        stdout_device: name of the device ``/chosen/stdout-path`` points at; None: none.

    Returns:
        The blob (big-endian, no memory reservations, boot_cpuid_phys = the boot PE's
        affinity when it fits 32 bits).

    Raises:
        ConfigError: an inconsistent argument (RAM size, initrd outside RAM, duplicate or no
            MPIDR, more PEs than redistributors, unknown PSCI method or stdout device, a device
            kind without a node builder, a missing PPI).
    """
    tree = DtTree(board)
    if ram_size <= 0:
        raise ConfigError(f"ram_size must be positive, not {ram_size}")
    ram_end = board.ram_base + ram_size
    if psci_method is not None and psci_method not in PSCI_METHODS:
        raise ConfigError(f"psci_method must be one of {PSCI_METHODS} or None, "
                          f"not {psci_method!r}")
    if pmu is None:
        pmu = spe

    cpus, boot_aff = _cpus_node(cpu_mpidrs, psci_method is not None)
    intcs = [d for d in board.devices if d.kind in INTERRUPT_CONTROLLER_KINDS]
    if len(intcs) != 1:
        raise ConfigError(f"board {board.name} has {len(intcs)} interrupt controllers; "
                          f"the device tree needs exactly one")
    _check_redistributors(intcs[0], len(cpu_mpidrs))

    root = DtNode("/")
    device_nodes = [n for n in (_device_node(d, tree) for d in board.devices) if n is not None]
    root.add("interrupt-parent", tree.phandle(_unit(intcs[0].name, intcs[0].base)))
    root.add("#address-cells", tree.address_cells)
    root.add("#size-cells", tree.size_cells)
    root.add("compatible", ROOT_COMPATIBLE)
    root.add("model", ROOT_COMPATIBLE)

    root.children.append(_chosen_node(board, tree, bootargs, initrd, stdout_device, ram_end))
    root.children.append(DtNode(_unit("memory", board.ram_base))
                         .add("device_type", "memory")
                         .add("reg", tree.reg((board.ram_base, ram_size))))
    root.children.append(cpus)
    if psci_method is not None:
        root.children.append(_psci_node(psci_method))
    root.children.append(_timer_node(board, hyp_virt_timer))
    if pmu:
        root.children.append(DtNode("pmu").add("compatible", PMU_COMPATIBLE)
                             .add("interrupts", gic_interrupt(_ppi(board, "pmu"))))
    if spe:
        root.children.append(DtNode("spe").add("compatible", SPE_COMPATIBLE)
                             .add("interrupts", gic_interrupt(_ppi(board, "pmbirq"))))
    root.children += device_nodes
    for hz, name in tree.clocks.items():
        root.children.append(_clock_node(name, hz, tree.phandle(name)))

    blob = fdt.FDT(entries=[])
    blob.header.version = 17
    blob.header.last_comp_version = 16
    blob.root = root.to_fdt()
    return blob.to_dtb(boot_cpuid_phys=boot_aff if boot_aff < 1 << 32 else 0)


def _ppi(board: BoardSpec, name: str) -> int:
    try:
        return board.ppi(name)
    except KeyError:
        raise ConfigError(f"board {board.name} has no PPI named {name!r}") from None


def _check_redistributors(gic: DeviceSpec, n_cpus: int) -> None:
    room = sum(size for _, size in gic.all_regions[1:]) // GICR_BYTES_PER_PE
    if n_cpus > room:
        raise ConfigError(f"{n_cpus} PEs but {gic.name}'s redistributor regions hold {room}")


def _cpus_node(mpidrs: tuple[int, ...], psci: bool) -> tuple[DtNode, int]:
    if not mpidrs:
        raise ConfigError("cpu_mpidrs is empty: at least the boot PE is needed")
    affs = [mpidr_affinity(m) for m in mpidrs]
    if len(set(affs)) != len(affs):
        raise ConfigError(f"cpu_mpidrs {[hex(m) for m in mpidrs]} repeat an affinity")
    addr_cells = 2 if any(MPIDR_EL1.get(a, "Aff3") for a in affs) else 1
    node = DtNode("cpus").add("#address-cells", addr_cells).add("#size-cells", 0)
    for aff in affs:
        cpu = DtNode(_unit("cpu", aff)).add("device_type", "cpu").add("compatible",
                                                                      CPU_COMPATIBLE)
        cpu.add("reg", cells(aff, addr_cells))
        if psci:
            cpu.add("enable-method", "psci")
        node.children.append(cpu)
    return node, affs[0]


def _psci_node(method: str) -> DtNode:
    node = DtNode("psci").add("compatible", PSCI_COMPATIBLE).add("method", method)
    for prop, number, smc64 in PSCI_LEGACY_FUNCTIONS:
        node.add(prop, function_id(OEN_STANDARD_SECURE, number, smc64))
    return node


def _timer_node(board: BoardSpec, hyp_virt: bool) -> DtNode:
    names = TIMER_PPIS + (("cnthv",) if hyp_virt else ())
    interrupts: list[int] = []
    for name in names:
        interrupts += gic_interrupt(_ppi(board, name))
    return (DtNode("timer").add("compatible", TIMER_COMPATIBLE)
            .add("interrupts", interrupts).add("always-on"))


def _clock_node(name: str, hz: int, phandle: int) -> DtNode:
    mhz, rest = divmod(hz, 1_000_000)
    return (DtNode(name).add("compatible", "fixed-clock").add("#clock-cells", 0)
            .add("clock-frequency", hz)
            .add("clock-output-names", f"clk{mhz}mhz" if not rest else f"clk{hz}hz")
            .add("phandle", phandle))


def _chosen_node(board: BoardSpec, tree: DtTree, bootargs: str,
                 initrd: tuple[int, int] | None, stdout_device: str | None,
                 ram_end: int) -> DtNode:
    node = DtNode("chosen")
    if bootargs:
        node.add("bootargs", bootargs)
    if stdout_device is not None:
        spec = board.device(stdout_device)
        node.add("stdout-path", "/" + _unit(spec.name, spec.base))
    if initrd is not None:
        start, end = initrd
        if not board.ram_base <= start <= end <= ram_end:
            raise ConfigError(f"initrd [{start:#x}, {end:#x}) is not inside RAM "
                              f"[{board.ram_base:#x}, {ram_end:#x})")
        node.add("linux,initrd-start", cells(start, tree.address_cells))
        node.add("linux,initrd-end", cells(end, tree.address_cells))
    return node
