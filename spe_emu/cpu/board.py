"""The board every PE of a machine shares, built from its
:class:`~spe_emu.platform.board.BoardSpec`: RAM and the devices mapped on the bus, the
interrupt controller the other devices' outputs are wired into (the GICv3: its distributor
and each PE's redistributor and CPU interface), the devices private to each PE (the generic
timers: :attr:`Device.PER_PE`), the virtual clock, and the host's console input offered to
the board's console device.

The PE side (:class:`spe_emu.cpu.machine.Machine`) gives the board what it needs of the
first PE when building it: the instruction count the clock converts to time, the
system-register registry devices with registers (the generic timer, the GIC's CPU interface)
are entered in, and what a device calls when its state changes; every further PE is
attached (:meth:`Board.attach_pe`) with its own engine and registry."""

from __future__ import annotations

from pathlib import Path
from dataclasses import replace
from typing import Any, Callable

from unicorn import Uc

from ..errors import ConfigError
from ..platform.board import Platform
from ..platform.bus import Bus
from ..platform.clock import VirtualClock
from ..platform.console import ConsoleInput, poll_ticks, usable_input
from ..platform.device import DEVICE_TYPES, Device
from ..platform.loader import Image
from ..platform.sysregs import SysregRegistry
from ..sysreg import Replan
from .config import MachineConfig

INTERRUPT_CONTROLLER = "gicv3"  # the device kind the PE's IRQ/FIQ inputs come from


class Board:
    """RAM, bus, devices, GIC and virtual clock of one machine (see the module's docstring).

    Args:
        config: the machine's configuration (``board``, ``ram_base``, ``ram_size``,
            ``outdir``, ``console``, ``stdin``).
        uc: the Unicorn instance RAM and the devices' MMIO are mapped in.
        retired: instructions retired so far (the clock's time base).
        sysregs: where devices with system registers register them (re-planned as
            :attr:`Replan.IRQ`).
        guest_error: reports a guest error (a device's).
        on_change: called when a device changed state the run loop acts on.
        waiting: whether the PE waits in WFI (a console poll then gives a terminal a moment).

    Raises:
        ConfigError: the board has no interrupt controller, or names a device model that is
            not registered.
    """

    def __init__(self, config: MachineConfig, uc: Uc, retired: Callable[[], int],
                 sysregs: SysregRegistry, guest_error: Callable[[str], None],
                 on_change: Callable[[], None], waiting: Callable[[], bool],
                 pe_clock: Callable[[VirtualClock], Any] | None = None):
        self.cfg = config
        self.sysregs = sysregs
        self._uc = uc
        self.on_change = on_change
        """Called when a device changed state the run loops act on (a several-PE machine
        sets it to tell every PE)."""
        self._waiting = waiting
        self.clock = VirtualClock(retired, config.board.counter_hz)
        self.bus = Bus(uc)
        self.bus.map_ram("ram", config.ram_base, config.ram_size)
        self.platform = Platform(clock=self.clock, outdir=Path(config.outdir),
                                 guest_error=guest_error, console=config.console)
        # Each PE's clock (its time; its private devices' events): the board's with one PE,
        # a PeClock each with several (pe_clock makes PE 0's; attach_pe gets the others')
        self.pe_clocks: list[Any] = [self.clock if pe_clock is None else pe_clock(self.clock)]
        self.devices: dict[str, Device] = {}
        # PE n's private devices by name (PE 0's are in ``devices`` too)
        self.pe_devices: list[dict[str, Device]] = [{}]
        self._holding: list[Device] = []   # devices whose flush() does something
        # The interrupt controller first: the other devices' outputs are wired into it.
        specs = sorted(config.board.devices, key=lambda d: d.kind != INTERRUPT_CONTROLLER)
        if not specs or specs[0].kind != INTERRUPT_CONTROLLER:
            raise ConfigError(f"board {config.board.name}: no {INTERRUPT_CONTROLLER} device")
        self.gic = self._add_device(specs[0])
        # (the input of PE 0's PMBIRQ output: :meth:`ppi_input` for the others)
        self.pmbirq_input = self.gic.input(config.board.ppi("pmbirq"))
        self._specs = specs
        for spec in specs[1:]:
            self._add_device(spec)

    def _changed(self) -> None:
        self.on_change()

    def _add_device(self, spec, pe: int = 0, sysregs: SysregRegistry | None = None) -> Device:
        """Build the registered device ``spec.kind``, map it on the bus (a shared device) and
        wire its interrupt outputs into the GIC (a PE's private device: into PE ``pe``'s
        PPIs, its registers into ``sysregs``, that PE's registry).

        Raises:
            ConfigError: no device of that kind is registered.
        """
        cls = DEVICE_TYPES.get(spec.kind)
        if cls is None:
            raise ConfigError(f"board {self.cfg.board.name}: no device model {spec.kind!r} "
                              f"(known: {', '.join(sorted(DEVICE_TYPES))})")
        platform = self.platform
        if cls.PER_PE and self.pe_clocks[pe] is not self.clock:
            platform = replace(platform, clock=self.pe_clocks[pe])
        dev = cls(spec, platform)
        dev.on_change = self._changed
        if spec.size:
            self.bus.map_device(dev, spec.all_regions)
        if dev.SYSREGS is not None:
            (sysregs or self.sysregs).register(dev, dev.SYSREGS, Replan.IRQ)
        for output, intid in spec.irqs:
            dev.irqs[output].connect(self.ppi_input(intid, pe) if cls.PER_PE
                                     else self.gic.input(intid))
        if pe == 0:
            self.devices[spec.name] = dev
        if cls.PER_PE:
            self.pe_devices[pe][spec.name] = dev
        if type(dev).flush is not Device.flush:
            self._holding.append(dev)
        return dev

    def ppi_input(self, intid: int, pe: int) -> Callable[[bool], None]:
        """The GIC input of PPI ``intid`` (16..31; or an SPI's) of PE ``pe``."""
        return self.gic.input(intid, pe)

    def cpu_interface(self, pe: int):
        """PE ``pe``'s GIC CPU interface: the owner of its ICC_* registers, with its
        ``irq_line``, ``fiq_line``, native ``state`` and ``fill_native_path``."""
        return self.gic.cpu_interface(pe)

    def attach_pe(self, pe: int, uc: Uc, sysregs: SysregRegistry, clock: Any) -> None:
        """Attach PE number ``pe`` (1, 2, ...; PE 0 built the board): map RAM and the
        devices into its engine ``uc``, build its private devices (their registers in
        ``sysregs``, their outputs on its PPIs, their time ``clock``, its PeClock) and
        register its GIC CPU interface."""
        if pe != len(self.pe_devices):
            raise ConfigError(f"PE {pe} attached out of order ({len(self.pe_devices)} PEs)")
        self.bus.attach(uc)
        self.pe_devices.append({})
        self.pe_clocks.append(clock)
        sysregs.register(self.cpu_interface(pe), self.gic.SYSREGS, Replan.IRQ)
        for spec in self._specs[1:]:
            if DEVICE_TYPES[spec.kind].PER_PE:
                self._add_device(spec, pe, sysregs)

    def flush(self) -> None:
        """Have the devices hand over the output their native paths hold
        (:meth:`Device.flush`): at the machine's stops and before another writer's console
        output (:meth:`console`)."""
        for dev in self._holding:
            dev.flush()

    def console(self, data: bytes) -> None:
        """The machine's console for writers other than the devices (semihosting): what the
        devices hold goes first, so the console keeps the guest's order."""
        self.flush()
        if self.cfg.console is not None:
            self.cfg.console(data)

    def load(self, image: Image) -> None:
        """Copy an ELF image's PT_LOAD segments into RAM (by physical address).

        Raises:
            ConfigError: a segment is outside RAM."""
        cfg = self.cfg
        for seg in image.segments:
            lo, hi = seg.paddr, seg.paddr + seg.memsz
            if lo < cfg.ram_base or hi > cfg.ram_base + cfg.ram_size:
                raise ConfigError(f"{image.path}: segment {lo:#x}-{hi:#x} is outside RAM "
                                  f"{cfg.ram_base:#x}-"
                                  f"{cfg.ram_base + cfg.ram_size:#x}")
            self._uc.mem_write(seg.paddr, bytes(seg.data))
            if seg.memsz > len(seg.data):
                self._uc.mem_write(seg.paddr + len(seg.data),
                                      bytes(seg.memsz - len(seg.data)))

    def start_console_input(self) -> None:
        """Offer host input (``cfg.stdin``) to the board's console device every
        :func:`~spe_emu.platform.console.poll_ticks` of virtual time
        (:mod:`spe_emu.platform.console`)."""
        stream = usable_input(self.cfg.stdin)
        device = self.devices.get(self.cfg.board.console)
        if stream is None or device is None or not hasattr(device, "feed"):
            return
        self._console_in = (ConsoleInput(stream), device)
        self.clock.schedule(self.clock.ticks() + poll_ticks(self.clock.hz), "console-input",
                            self._poll_console)

    def _poll_console(self, now: int) -> None:
        source, device = self._console_in
        # (while the PE waits in WFI, a terminal is given a moment, so an idle shell does not
        # spin the host; virtual time moves by the poll period either way)
        data = source.read(device.rx_space(), patience=0.02 if self._waiting() else 0.0)
        if data:
            device.feed(data)
        if not source.eof:
            self.clock.schedule(now + poll_ticks(self.clock.hz), "console-input",
                                self._poll_console)

    def close(self) -> None:
        """Close the devices' host files (such as console.log); idempotent."""
        for dev in self.devices.values():
            dev.close()
        for private in self.pe_devices[1:]:
            for dev in private.values():
                dev.close()
