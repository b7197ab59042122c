"""The memory bus: RAM and devices mapped by (base, size) into the PEs' physical address
space. A device is added by mapping it; neither the machine nor the run loop names it
(QEMU's MemoryRegion tree, Renode's SystemBus).

RAM is host memory the bus owns (an anonymous mapping, zero until written), mapped into every
Unicorn engine attached to the bus (``uc_mem_map_ptr``): the PEs of a several-PE machine,
each its own engine, share it byte for byte. Devices are mapped into each engine with the
same callbacks, so a device sees one guest whichever PE accesses it."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Callable

import ctypes
import mmap

from unicorn import UC_PROT_ALL, Uc, UcError
from unicorn.unicorn_py3.unicorn import MMIO_READ_CFUNC, MMIO_WRITE_CFUNC, uccallback, uclib

from ..errors import ConfigError
from .device import Device


@dataclass(frozen=True)
class Mapping:
    """One range of the physical address space (bytes)."""

    name: str
    base: int
    size: int
    device: Device | None  # None: RAM

    @property
    def end(self) -> int:
        return self.base + self.size


class Bus:
    """The physical address map of one board.

    Args:
        uc: the first engine whose address space this is (more: :meth:`attach`).
    """

    def __init__(self, uc: Uc):
        self.uc = uc
        self.engines: list[Uc] = [uc]
        self._maps: list[Mapping] = []
        self._bases: list[int] = []
        self._ram: dict[int, mmap.mmap] = {}   # base -> the host memory behind it

    def attach(self, uc: Uc) -> None:
        """Map everything on the bus into another engine ``uc`` as well (another PE of the
        board): the same RAM (shared host memory) and the same devices."""
        self.engines.append(uc)
        for m in self._maps:
            if m.device is None:
                self._map_ram_into(uc, m.base, m.size)
            else:
                self._map_device_into(uc, m.device, m.base, m.size)

    def _add(self, m: Mapping) -> None:
        if m.size <= 0 or m.base % 0x1000 or m.size % 0x1000:
            raise ConfigError(f"{m.name}: base {m.base:#x} and size {m.size:#x} must be "
                              f"positive multiples of 4 KiB")
        i = bisect.bisect(self._bases, m.base)
        for other in self._maps[max(0, i - 1):i + 1]:
            if m.base < other.end and other.base < m.end:
                raise ConfigError(f"{m.name} {m.base:#x}-{m.end:#x} overlaps {other.name} "
                                  f"{other.base:#x}-{other.end:#x}")
        self._maps.insert(i, m)
        self._bases.insert(i, m.base)

    def map_ram(self, name: str, base: int, size: int) -> None:
        """Map ``size`` bytes of RAM at ``base`` (bytes; multiples of 4 KiB)."""
        self._add(Mapping(name, base, size, None))
        # (MAP_NORESERVE: untouched pages cost nothing, as Unicorn's own RAM)
        self._ram[base] = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
                                    | getattr(mmap, "MAP_NORESERVE", 0))
        for uc in self.engines:
            self._map_ram_into(uc, base, size)

    def _map_ram_into(self, uc: Uc, base: int, size: int) -> None:
        host = ctypes.addressof(ctypes.c_char.from_buffer(self._ram[base]))
        uc.mem_map_ptr(base, size, UC_PROT_ALL, host)

    def map_device(self, device: Device, regions: tuple[tuple[int, int], ...] | None = None
                   ) -> None:
        """Map ``device`` at each (base, size) of ``regions`` (default: its own base and
        size); the device sees offsets from its own base."""
        for base, size in regions or ((device.base, device.size),):
            self._add(Mapping(device.name, base, size, device))
            for uc in self.engines:
                self._map_device_into(uc, device, base, size)

    def _map_device_into(self, uc: Uc, device: Device, base: int, size: int) -> None:
        delta = base - device.base
        native = device.native_mmio(uc) if delta == 0 else None
        if native is None:
            uc.mmio_map(base, size, self._reader(device, delta), None,
                        self._writer(device, delta), None)
            return
        # The device's own C callbacks, which call these (the binding's callbacks for the
        # Python accessors: a Python exception stops the run and is raised by emu_start)
        # for what they leave to Python. (A device has one native state for every engine:
        # the fallbacks given first, the first engine's, stay.)
        read_cb, write_cb, user_data, set_fallbacks = native
        read_py = uccallback(uc, MMIO_READ_CFUNC)(self._reader(device, 0))
        write_py = uccallback(uc, MMIO_WRITE_CFUNC)(self._writer(device, 0))
        if uc is self.uc:
            set_fallbacks(ctypes.cast(read_py, ctypes.c_void_p).value,
                          ctypes.cast(write_py, ctypes.c_void_p).value)
        status = uclib.uc_mmio_map(uc._uch, base, size, ctypes.c_void_p(read_cb),
                                   user_data, ctypes.c_void_p(write_cb), user_data)
        if status:
            raise UcError(status)
        uc._mmio_callbacks[(base, base + size)] = (read_py, write_py)

    @staticmethod
    def _reader(device: Device, delta: int) -> Callable:
        def read(_uc: Uc, offset: int, size: int, _data) -> int:
            return device.read(delta + offset, size)
        return read

    @staticmethod
    def _writer(device: Device, delta: int) -> Callable:
        def write(_uc: Uc, offset: int, size: int, value: int, _data) -> None:
            device.write(delta + offset, size, value)
        return write

    def find(self, pa: int) -> Mapping | None:
        """The mapping holding physical address ``pa``, or None (no RAM or device there)."""
        i = bisect.bisect(self._bases, pa) - 1
        if i >= 0 and pa < self._maps[i].end:
            return self._maps[i]
        return None

