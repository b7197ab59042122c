"""The device base and the device registry.

A device is one module that registers itself (``class Pl011(Device, kind="pl011")``): the
board description names devices by ``kind`` and the board builds them from
:data:`DEVICE_TYPES` without any edit to the machine or the run loop. A device owns its
register map (:class:`~spe_emu.platform.mmio.RegisterMap`), its interrupt outputs
(:class:`~spe_emu.platform.irq.IrqLine`) and its events on the virtual clock; it resets
explicitly and logs guest mistakes instead of raising them (QEMU's qdev, Renode's peripherals).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar

from ..errors import DeviceError
from .irq import IrqLine
from .mmio import MmioRegister, RegisterMap

if TYPE_CHECKING:
    from .board import DeviceSpec, Platform

DEVICE_TYPES: dict[str, type["Device"]] = {}
"""Registered device classes by kind."""


class Device:
    """A memory-mapped device on the bus.

    Subclasses set ``REGISTERS`` (a :class:`RegisterMap`) and ``IRQ_OUTPUTS`` (output names,
    wired to interrupt IDs by the board description), implement the hooks their registers
    name, and call :meth:`guest_error` for guest mistakes.

    Args:
        spec: the board description's entry (name, base, size, interrupts, properties).
        platform: what devices may use: the virtual clock, the console, the output
            directory, the guest-error log (:class:`~spe_emu.platform.board.Platform`).
    """

    REGISTERS: ClassVar[RegisterMap | None] = None
    SYSREGS: ClassVar[Any] = None
    """A device that owns system registers (a :class:`~spe_emu.sysreg.RegisterTable`) is a
    :class:`~spe_emu.platform.sysregs.SysregOwner`; the machine registers it."""
    IRQ_OUTPUTS: ClassVar[tuple[str, ...]] = ()
    kind: ClassVar[str] = ""
    PER_PE: ClassVar[bool] = False
    """The device is private to a PE (the generic timer: its registers are the PE's system
    registers, its outputs the PE's PPIs): a board builds one instance per PE."""

    def __init_subclass__(cls, kind: str = "", **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if kind:
            if kind in DEVICE_TYPES:
                raise DeviceError(f"device kind {kind!r} registered twice")
            cls.kind = kind
            DEVICE_TYPES[kind] = cls

    def __init__(self, spec: "DeviceSpec", platform: "Platform"):
        self.spec = spec
        self.name = spec.name
        self.base = spec.base
        self.size = spec.size
        self.platform = platform
        self.irqs = {out: IrqLine(f"{spec.name}.{out}") for out in self.IRQ_OUTPUTS}
        self.regs: dict[str, list[int]] = {}
        self.on_change: Callable[[], None] | None = None
        """Called after an access changed state the run loop must see (an interrupt level,
        an event): set by the machine."""
        self.reset()

    # -- life cycle -------------------------------------------------------------------------
    def reset(self) -> None:
        """Reset state: every register to its reset value (subclasses extend)."""
        if self.REGISTERS is not None:
            self.regs = self.REGISTERS.reset_values()

    def close(self) -> None:
        """End of the run: flush and close whatever the device opened (output files).
        Default: nothing to do. Idempotent."""

    def flush(self) -> None:
        """Hand over output a native path holds back (a console's characters): the machine
        calls it at its stops and before anything else writes to the console. Default:
        nothing held."""

    def guest_error(self, message: str) -> None:
        """Log a guest mistake (an access to no register, a bad size, a write to a read-only
        register); the access is RAZ/WI."""
        self.platform.guest_error(f"{self.name}: {message}")

    # -- MMIO -------------------------------------------------------------------------------
    def native_mmio(self, uc: Any) -> tuple[int, int, Any, Callable[[int, int], None]] | None:
        """A device whose common accesses have a C path returns its ``uc_mmio_map`` read and
        write callbacks (addresses), their user data (a ctypes pointer) and a function the bus
        calls with the addresses of the Python fallbacks (MMIO callbacks of the binding's
        kind, calling :meth:`read` and :meth:`write`); the callbacks leave every access they
        do not handle to those. Default None: every access goes to :meth:`read` and
        :meth:`write`."""
        return None

    def read(self, offset: int, size: int) -> int:
        """A guest read of ``size`` bytes at ``offset`` in the device's region (bytes)."""
        found = self.REGISTERS.decode(offset, size) if self.REGISTERS else None
        if found is None:
            self.guest_error(f"read of {size} bytes at offset {offset:#x}: no register")
            return 0
        r, index, byte = found
        if r.on_read is not None:
            value = getattr(self, r.on_read)(r, index)
        else:
            value = r.read(self._storage(r), index)
        return (value >> (8 * byte)) & ((1 << (8 * size)) - 1)

    def write(self, offset: int, size: int, value: int) -> None:
        """A guest write of ``size`` bytes at ``offset`` (bytes)."""
        found = self.REGISTERS.decode(offset, size) if self.REGISTERS else None
        if found is None:
            self.guest_error(f"write of {size} bytes at offset {offset:#x}: no register")
            return
        r, index, byte = found
        old, written = r.write(self._storage(r), index, value, byte, size)
        if r.on_write is not None:
            getattr(self, r.on_write)(r, index, old, written)

    def _storage(self, r: MmioRegister) -> Any:
        """Register ``r``'s element values, or the items its
        :class:`~spe_emu.platform.mmio.PerItem` binding names."""
        return self.regs[r.name] if r.per_item is None else getattr(self, r.per_item.items)

    def reg(self, name: str, index: int = 0) -> int:
        """The stored value of register ``name`` (element ``index``)."""
        return self.regs[name][index]

    def field(self, name: str, field_name: str, index: int = 0) -> int:
        """A field of a stored register value."""
        return self.REGISTERS[name].get(self.regs[name][index], field_name)

    def set_field(self, name: str, field_name: str, value: int, index: int = 0) -> None:
        r = self.REGISTERS[name]
        self.regs[name][index] = r.set(self.regs[name][index], field_name, value)

    def changed(self) -> None:
        """Tell the machine that state the run loop acts on may have changed."""
        if self.on_change is not None:
            self.on_change()
