"""Interrupt lines: a device drives a level into a sink (the GIC's input for one INTID, or a
PE's IRQ/FIQ input). Level-sensitive, as every interrupt of the ``virt`` board is."""

from __future__ import annotations

from typing import Callable


class IrqLine:
    """One wire. ``set(level)`` calls the sink only when the level changes.

    Args:
        name: for logs, e.g. ``"pl011.intr -> SPI 1"``.
        sink: ``sink(level)`` receives every change.
    """

    __slots__ = ("name", "level", "_sink")

    def __init__(self, name: str, sink: Callable[[bool], None] | None = None):
        self.name = name
        self.level = False
        self._sink = sink

    def connect(self, sink: Callable[[bool], None]) -> None:
        """Attach the receiving end (and drive it with the present level)."""
        self._sink = sink
        sink(self.level)

    def set(self, level: bool) -> None:
        level = bool(level)
        if level != self.level:
            self.level = level
            if self._sink is not None:
                self._sink(level)
