"""Arm PrimeCell UART (PL011) r1p5: the ``virt`` board's console.

Implements the programmers' model of the *PrimeCell UART (PL011) Technical Reference
Manual*, revision r1p5 (Arm DDI 0183): the registers of §3.2/§3.3 and the interrupts of §3.4,
with the combined interrupt ``UARTINTR`` as the device's one interrupt output (``"intr"``).

The model is a UART whose line runs infinitely fast, seen only at deterministic points:

* **Transmit.** A write to UARTDR sends the character at once (to ``platform.console`` and to
  ``<outdir>/console.log``), so the transmit FIFO is always empty: UARTFR reads TXFE=1,
  TXFF=0, BUSY=0. The only exception is a transmitter held disabled (below).
* **Receive.** Input reaches the receive FIFO only through :meth:`Pl011.feed`, which the
  machine calls at its stops; the device never reads host input itself, so no host timing
  reaches the guest. :meth:`Pl011.wants_input` / :meth:`Pl011.rx_space` say whether input
  can be taken now.
* **Time.** Nothing depends on the baud rate: UARTIBRD, UARTFBRD, UARTILPR and the framing
  fields of UARTLCR_H (WLEN, PEN, EPS, STP2, SPS) are stored and read back but do not change
  what is sent (the console receives bits 7:0 of each write, whatever WLEN says: a guest that
  never programs UARTLCR_H, whose reset WLEN is 5 bits, still prints, as on QEMU).

Choices where the TRM leaves room or where the model departs from it (each also where it is
implemented):

* **Enables.** The TRM transmits only with UARTEN and TXE set, and receives only with UARTEN
  and RXE set (§3.3.8). Bare-metal software written for QEMU (kvm-unit-tests, many boot
  loaders) writes UARTDR without ever programming UARTCR, and QEMU's PL011 ignores the enable
  bits. Board options ``tx-when-disabled`` and ``rx-when-disabled`` (default True) do the
  same; with an option False, characters written while the transmitter is disabled wait in
  the transmit FIFO (TXFE=0, BUSY=1, TXFF when full) and go out when it is enabled, and input
  is refused while the receiver is disabled.
* **FIFO depth.** r1p5 has 32-entry FIFOs (its UARTPeriphID2 Revision field is 0x3, the value
  Linux's ``amba-pl011`` and FreeBSD's ``uart_dev_pl011`` take to mean 32 entries; QEMU
  reports revision 0x1 and 16 entries). With FEN=0 each FIFO is a 1-entry holding register.
  Changing FEN empties both FIFOs (the TRM does not say what happens to their contents).
* **Transmit interrupt (§3.4, UARTTXINTR).** TXRIS is set when the transmit FIFO drains to
  (or below) the TXIFLSEL trigger level after holding data -- with an infinitely fast line,
  once after every character sent -- and is cleared by UARTICR.TXIC or by filling the FIFO
  above the trigger level. It is not set by reset or by enabling the UART before anything was
  written (the TRM's note: the interrupt follows the level passing through the trigger, not
  the level).
* **Receive interrupt.** RXRIS is set when a character brings the FIFO up to the RXIFLSEL
  trigger level (FEN=0: when the holding register fills), and cleared by reads that take it
  below the trigger level, or by UARTICR.RXIC. Reserved RXIFLSEL/TXIFLSEL encodings are a
  guest error and act as b010 (1/2).
* **Receive timeout.** The TRM sets RTRIS when the FIFO is not empty and no character arrives
  for 32 bit periods. Input comes in batches (one :meth:`Pl011.feed`, or one looped-back
  character), and the line is idle after each, so RTRIS is set at the end of every batch that
  leaves the FIFO non-empty; it is cleared when reads empty the FIFO or by UARTICR.RTIC.
* **Errors.** Host input has no framing or parity errors, so FE/PE (and FERIS/PERIS) are never
  set. A break received in loopback (UARTLCR_H.BRK rising with LBE set) puts one 0 character
  with BE=1 in the FIFO and sets BERIS. On overrun the character is lost, UARTRSR.OE and OERIS
  are set at once, and the newest character in the FIFO carries OE=1 in UARTDR (the lost data
  came after it). UARTRSR's FE/PE/BE bits collect the status of the characters read from
  UARTDR until a write to UARTECR clears them.
* **Modem lines.** The modem status inputs (nUARTCTS, nUARTDSR, nUARTDCD, nUARTRI) are
  deasserted, so UARTFR resets to 0x90 (TXFE and RXFE), as on QEMU. In loopback (LBE=1) the
  modem outputs drive them (CTS <- RTS, DSR <- DTR, DCD <- Out1, RI <- Out2, as QEMU does);
  each change of a modem status bit sets its RIS bit (§3.4, UARTMSINTR). Hardware flow control
  (RTSEn, CTSEn) is not modelled: the console always accepts data.
* **Loopback** (LBE=1): each character sent is also received (it still reaches the console,
  as on QEMU), and :meth:`Pl011.feed` input is refused (the receiver listens to the
  transmitter only).
* **IrDA and DMA.** SIREN/SIRLP and UARTDMACR are stored; the ``virt`` board connects no DMA
  request lines, so DMA requests go nowhere, as on a PL011 with its DMA interface unconnected.
* **Access sizes.** Every register takes 8-, 16- and 32-bit naturally aligned accesses (QEMU
  accepts 1 to 4 bytes; Linux uses 32-bit accesses, kvm-unit-tests 8-bit ones). A narrower
  write keeps the register's other bytes (on UARTDR the unwritten data byte is 0). Other sizes
  and offsets outside the register map are guest errors (read as zero, writes ignored), and
  so are writes to read-only registers and reads of UARTICR.
"""

from __future__ import annotations

import ctypes
from collections import deque
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable

from unicorn.unicorn_py3.unicorn import uccallback

from .. import native
from ..errors import RegisterTableError
from ..platform.device import Device
from ..platform.mmio import MmioRegister, RegisterMap
from ..platform.mmio import mmio as _mmio

if TYPE_CHECKING:
    from ..platform.board import DeviceSpec, Platform

FIFO_DEPTH = 32
"""Entries of each FIFO with FEN=1 (r1p5; a 1-entry holding register with FEN=0)."""
REGION_SIZE = 0x1000
ACCESS_SIZES = frozenset({1, 2, 4})
"""Access sizes (bytes) every register accepts."""
CONSOLE_LOG = "console.log"
"""File in the run's output directory that receives every character sent."""
_FLUSH = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
"""uart.c's flush callback: ``void (*)(uc_engine *)``."""

# The interrupt sources (§3.3.10-§3.3.13): UARTIMSC, UARTRIS, UARTMIS and UARTICR have the
# same layout, one bit per source, with the TRM's names for each register's field.
_INTERRUPTS = (
    # source  bit  UARTIMSC  UARTRIS    UARTMIS    UARTICR
    ("OE",    10,  "OEIM",   "OERIS",   "OEMIS",   "OEIC"),
    ("BE",     9,  "BEIM",   "BERIS",   "BEMIS",   "BEIC"),
    ("PE",     8,  "PEIM",   "PERIS",   "PEMIS",   "PEIC"),
    ("FE",     7,  "FEIM",   "FERIS",   "FEMIS",   "FEIC"),
    ("RT",     6,  "RTIM",   "RTRIS",   "RTMIS",   "RTIC"),
    ("TX",     5,  "TXIM",   "TXRIS",   "TXMIS",   "TXIC"),
    ("RX",     4,  "RXIM",   "RXRIS",   "RXMIS",   "RXIC"),
    ("DSR",    3,  "DSRMIM", "DSRRMIS", "DSRMMIS", "DSRMIC"),
    ("DCD",    2,  "DCDMIM", "DCDRMIS", "DCDMMIS", "DCDMIC"),
    ("CTS",    1,  "CTSMIM", "CTSRMIS", "CTSMMIS", "CTSMIC"),
    ("RI",     0,  "RIMIM",  "RIRMIS",  "RIMMIS",  "RIMIC"),
)
_RIS_FIELD = {row[0]: row[3] for row in _INTERRUPTS}
"""Interrupt source -> its UARTRIS field."""


def _interrupt_fields(column: int, access: str) -> tuple[str, ...]:
    return tuple(f"{row[column]} {row[1]} {access}".strip() for row in _INTERRUPTS)


_RX_ERRORS = ("OE", "BE", "PE", "FE")
"""Receive status bits: fields of UARTDR (bits 11:8) and of UARTRSR (bits 3:0)."""

_MODEM_LOOPBACK = (("CTS", "RTS"), ("DSR", "DTR"), ("DCD", "Out1"), ("RI", "Out2"))
"""In loopback, UARTFR modem status bit <- UARTCR modem output bit."""

_NO_MODEM_LEVELS = (0,) * len(_MODEM_LOOPBACK)
"""The modem status levels out of loopback (no modem lines are modelled)."""

_TRIGGER_EIGHTHS = {0b000: 1, 0b001: 2, 0b010: 4, 0b011: 6, 0b100: 7}
"""RXIFLSEL/TXIFLSEL encoding -> trigger level in eighths of the FIFO (§3.3.9)."""
_TRIGGER_RESERVED_AS = 0b010


def _registers() -> RegisterMap:
    def mmio(*args: Any, **kw: Any) -> MmioRegister:
        return _mmio(*args, sizes=ACCESS_SIZES, **kw)

    ro = "_write_ro"
    regs = [
        mmio("UARTDR", 0x000, "OE 11 RO", "BE 10 RO", "PE 9 RO", "FE 8 RO", "DATA 7:0 WO",
             on_read="_read_dr", on_write="_write_dr", doc="§3.3.1 Data Register"),
        mmio("UARTRSR", 0x004, "OE 3 RO", "BE 2 RO", "PE 1 RO", "FE 0 RO",
             on_write="_write_ecr",
             doc="§3.3.2 Receive Status Register / Error Clear Register (UARTRSR/UARTECR)"),
        mmio("UARTFR", 0x018, "RI 8 RO", "TXFE 7 RO", "RXFF 6 RO", "TXFF 5 RO", "RXFE 4 RO",
             "BUSY 3 RO", "DCD 2 RO", "DSR 1 RO", "CTS 0 RO", reset=0x90, on_write=ro,
             doc="§3.3.3 Flag Register"),
        mmio("UARTILPR", 0x020, "ILPDVSR 7:0", doc="§3.3.4 IrDA Low-Power Counter Register"),
        mmio("UARTIBRD", 0x024, "BAUD_DIVINT 15:0", doc="§3.3.5 Integer Baud Rate Register"),
        mmio("UARTFBRD", 0x028, "BAUD_DIVFRAC 5:0",
             doc="§3.3.6 Fractional Baud Rate Register"),
        mmio("UARTLCR_H", 0x02C, "SPS 7", "WLEN 6:5", "FEN 4", "STP2 3", "EPS 2", "PEN 1",
             "BRK 0", on_write="_write_lcr_h", doc="§3.3.7 Line Control Register"),
        mmio("UARTCR", 0x030, "CTSEn 15", "RTSEn 14", "Out2 13", "Out1 12", "RTS 11",
             "DTR 10", "RXE 9", "TXE 8", "LBE 7", "SIRLP 2", "SIREN 1", "UARTEN 0",
             reset=0x300, on_write="_write_cr", doc="§3.3.8 Control Register"),
        mmio("UARTIFLS", 0x034, "RXIFLSEL 5:3", "TXIFLSEL 2:0", reset=0x12,
             on_write="_write_ifls", doc="§3.3.9 Interrupt FIFO Level Select Register"),
        mmio("UARTIMSC", 0x038, *_interrupt_fields(2, ""), on_write="_write_imsc",
             doc="§3.3.10 Interrupt Mask Set/Clear Register"),
        mmio("UARTRIS", 0x03C, *_interrupt_fields(3, "RO"), on_write=ro,
             doc="§3.3.11 Raw Interrupt Status Register"),
        mmio("UARTMIS", 0x040, *_interrupt_fields(4, "RO"), on_write=ro,
             doc="§3.3.12 Masked Interrupt Status Register"),
        mmio("UARTICR", 0x044, *_interrupt_fields(5, "WO"), on_read="_read_wo",
             on_write="_write_icr", doc="§3.3.13 Interrupt Clear Register"),
        mmio("UARTDMACR", 0x048, "DMAONERR 2", "TXDMAE 1", "RXDMAE 0",
             doc="§3.3.14 DMA Control Register"),
        mmio("UARTPeriphID0", 0xFE0, "PartNumber0 7:0 RO", reset=0x11, on_write=ro,
             doc="§3.3.15 Peripheral Identification Registers"),
        mmio("UARTPeriphID1", 0xFE4, "Designer0 7:4 RO", "PartNumber1 3:0 RO", reset=0x10,
             on_write=ro, doc="§3.3.15"),
        mmio("UARTPeriphID2", 0xFE8, "Revision 7:4 RO", "Designer1 3:0 RO", reset=0x34,
             on_write=ro, doc="§3.3.15 (Revision 0x3: r1p5)"),
        mmio("UARTPeriphID3", 0xFEC, "Configuration 7:0 RO", reset=0x00, on_write=ro,
             doc="§3.3.15"),
        mmio("UARTPCellID0", 0xFF0, "UARTPCellID0 7:0 RO", reset=0x0D, on_write=ro,
             doc="§3.3.16 PrimeCell Identification Registers"),
        mmio("UARTPCellID1", 0xFF4, "UARTPCellID1 7:0 RO", reset=0xF0, on_write=ro,
             doc="§3.3.16"),
        mmio("UARTPCellID2", 0xFF8, "UARTPCellID2 7:0 RO", reset=0x05, on_write=ro,
             doc="§3.3.16"),
        mmio("UARTPCellID3", 0xFFC, "UARTPCellID3 7:0 RO", reset=0xB1, on_write=ro,
             doc="§3.3.16"),
    ]
    out = RegisterMap(regs, REGION_SIZE)
    # One layout for the four interrupt registers: MIS = RIS & IMSC and the ICR write act
    # on whole register values.
    masks = {out[n].field_mask for n in ("UARTIMSC", "UARTRIS", "UARTMIS", "UARTICR")}
    if len(masks) != 1:
        raise RegisterTableError("PL011 interrupt registers differ in layout")
    return out


class Pl011(Device, kind="pl011"):
    """The PL011 UART (see the module docstring for the model and its choices).

    Board properties (:class:`~spe_emu.platform.board.DeviceSpec` ``props``):
        clock-hz: UARTCLK and PCLK frequency (Hz): the device tree's fixed clock (dtb.py)
            (default 24 MHz, QEMU's ``clk24mhz``).
        tx-when-disabled: send characters written while UARTEN or TXE is clear, as QEMU
            does (default True).
        rx-when-disabled: accept input while UARTEN or RXE is clear, as QEMU does
            (default True).

    Interrupt output ``"intr"``: UARTINTR, high while UARTMIS is non-zero.
    """

    REGISTERS = _registers()
    IRQ_OUTPUTS = ("intr",)

    def __init__(self, spec: "DeviceSpec", platform: "Platform"):
        self.tx_when_disabled = bool(spec.prop("tx-when-disabled", True))
        self.rx_when_disabled = bool(spec.prop("rx-when-disabled", True))
        self._rx: deque[int] = deque()
        self._tx: deque[int] = deque()
        self._log: IO[bytes] | None = None
        self._log_started = False
        self._fr_values: dict[tuple, int] = {}   # UARTFR per (FIFO state, modem levels)
        self._native: native.SpeUart | None = None
        super().__init__(spec, platform)

    # -- life cycle -----------------------------------------------------------------------
    def reset(self) -> None:
        """Registers to their TRM reset values, both FIFOs empty, UARTINTR low."""
        self.flush()
        super().reset()
        self._rx.clear()
        self._tx.clear()
        self._update()
        self._sync_native()

    def close(self) -> None:
        """Send what the native path holds; flush and close ``console.log`` (also when the
        console refuses the last characters: they are in the log)."""
        try:
            self.flush()
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None

    # -- host side: input -----------------------------------------------------------------
    def rx_space(self) -> int:
        """Characters :meth:`feed` can take now without overrunning the receive FIFO (0 when
        the receiver is disabled or in loopback). (The machine asks before it offers input:
        a prompt the native path holds is sent first.)"""
        self.flush()
        if not self._receiving_external():
            return 0
        return self._depth() - len(self._rx)

    def wants_input(self) -> bool:
        """Whether the machine should offer host input now (:meth:`rx_space` > 0)."""
        return self.rx_space() > 0

    def feed(self, data: bytes) -> None:
        """Receive ``data`` (one batch: the line is idle after its last character). Bytes
        beyond :meth:`rx_space` overrun the FIFO (lost; UARTRSR.OE and OERIS set); nothing
        is received while the receiver is disabled or in loopback."""
        if not data or not self._receiving_external():
            return
        for byte in data:
            self._receive(self.REGISTERS["UARTDR"].make(DATA=byte))
        self._line_idle()
        self._update()
        self._sync_native()

    # -- the native path (spe_emu/native/uart.c) --------------------------------------------
    def native_mmio(self, uc: Any) -> tuple[int, int, Any, Callable[[int, int], None]]:
        """uart.c's callbacks: while :meth:`_sync_native` finds the transmit path steady, a
        UARTDR write sends its character and a UARTFR read answers the flags without a
        Python call (what the Python path would do: the character out, the state unchanged);
        every other access is :meth:`read`/:meth:`write`. One native state serves every
        engine the device is mapped into (the PEs of a board)."""
        if self._native is not None:
            read_cb, write_cb = native.uart_callbacks()
            return read_cb, write_cb, ctypes.byref(self._native), lambda read, write: None
        u = self._native = native.SpeUart()
        u.dr_offset = self.REGISTERS["UARTDR"].offset
        u.fr_offset = self.REGISTERS["UARTFR"].offset
        self._flush_callback = uccallback(uc, _FLUSH)(lambda _uc: self.flush())
        u.flush = ctypes.cast(self._flush_callback, ctypes.c_void_p).value

        def set_fallbacks(read: int, write: int) -> None:
            u.read_fallback, u.write_fallback = read, write
        self._sync_native()
        read_cb, write_cb = native.uart_callbacks()
        return read_cb, write_cb, ctypes.byref(u), set_fallbacks

    def _sync_native(self) -> None:
        """Tell the native path whether a UARTDR write would only send its character: the
        transmitter runs, no loopback, the transmit FIFO empty and TXRIS already set (the
        write clears it or not, its drain sets it again: _write_dr); and UARTFR's value."""
        u = self._native
        if u is None:
            return
        u.steady = int(self._transmitting() and not self._loopback() and not self._tx
                       and bool(self.field("UARTRIS", "TXRIS")))
        u.fr = self.regs["UARTFR"][0]

    def flush(self) -> None:
        """Send the characters the native path collected, and store its last UARTDR write
        (:meth:`Device.flush`)."""
        u = self._native
        if u is None or not u.len:
            return
        data = bytes(u.buf[:u.len])
        u.len = 0
        dr = self.REGISTERS["UARTDR"]
        dr.write(self._storage(dr), 0, u.last_value, 0, u.last_size)
        self._output(data)

    def read(self, offset: int, size: int) -> int:
        value = super().read(offset, size)
        self._sync_native()
        return value

    def write(self, offset: int, size: int, value: int) -> None:
        super().write(offset, size, value)
        self._sync_native()

    # -- state ----------------------------------------------------------------------------
    def _depth(self) -> int:
        return FIFO_DEPTH if self.field("UARTLCR_H", "FEN") else 1

    def _trigger(self, select_field: str) -> int:
        """Trigger level (entries) of RXIFLSEL or TXIFLSEL with FEN=1 (§3.3.9)."""
        select = self.field("UARTIFLS", select_field)
        eighths = _TRIGGER_EIGHTHS.get(select, _TRIGGER_EIGHTHS[_TRIGGER_RESERVED_AS])
        return FIFO_DEPTH * eighths // 8

    def _rx_trigger(self) -> int:
        """RXRIS is set when the receive FIFO fills to this many entries."""
        return self._trigger("RXIFLSEL") if self.field("UARTLCR_H", "FEN") else 1

    def _tx_trigger(self) -> int:
        """TXRIS is set when the transmit FIFO drains to this many entries or fewer."""
        return self._trigger("TXIFLSEL") if self.field("UARTLCR_H", "FEN") else 0

    def _enabled(self, direction: str, when_disabled: bool) -> bool:
        return when_disabled or bool(self.field("UARTCR", "UARTEN")
                                     and self.field("UARTCR", direction))

    def _transmitting(self) -> bool:
        return self._enabled("TXE", self.tx_when_disabled)

    def _receiving(self) -> bool:
        return self._enabled("RXE", self.rx_when_disabled)

    def _loopback(self) -> bool:
        return bool(self.field("UARTCR", "LBE"))

    def _receiving_external(self) -> bool:
        return self._receiving() and not self._loopback()

    def _raise(self, source: str) -> None:
        self.set_field("UARTRIS", _RIS_FIELD[source], 1)

    def _clear(self, source: str) -> None:
        self.set_field("UARTRIS", _RIS_FIELD[source], 0)

    # -- transmit -------------------------------------------------------------------------
    def _drain_tx(self) -> None:
        """Send what the transmit FIFO holds, if the transmitter runs; TXRIS when it has
        drained (§3.4 UARTTXINTR: at or below the trigger level after data left)."""
        if not self._tx or not self._transmitting():
            return
        while self._tx:
            self._send(self._tx.popleft())
        self._raise("TX")  # the FIFO is empty now: at or below every trigger level

    def _send(self, byte: int) -> None:
        self._output(bytes((byte,)))
        if self._loopback() and self._receiving():
            self._receive(self.REGISTERS["UARTDR"].make(DATA=byte))
            self._line_idle()

    def _output(self, out: bytes) -> None:
        """Characters sent: to ``console.log``, then to the console (a console that fails
        does not cost the log its characters)."""
        if self._log is None:
            path = Path(self.platform.outdir) / CONSOLE_LOG
            path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(path, "ab" if self._log_started else "wb")
            self._log_started = True
        self._log.write(out)
        if self.platform.console is not None:
            self.platform.console(out)

    # -- receive --------------------------------------------------------------------------
    def _receive(self, entry: int) -> None:
        """One character (a UARTDR value: data and status bits) arrives at the FIFO."""
        dr = self.REGISTERS["UARTDR"]
        if len(self._rx) >= self._depth():
            self.set_field("UARTRSR", "OE", 1)
            self._raise("OE")
            self._rx[-1] = dr.set(self._rx[-1], "OE", 1)
            return
        self._rx.append(entry)
        if len(self._rx) == self._rx_trigger():
            self._raise("RX")
        if dr.get(entry, "BE"):
            self._raise("BE")

    def _line_idle(self) -> None:
        """The receive line went idle: the receive timeout (§3.4 UARTRTINTR)."""
        if self._rx:
            self._raise("RT")

    # -- derived state ----------------------------------------------------------------------
    def _update(self) -> None:
        """Recompute UARTFR from the FIFOs and modem lines (a modem status change sets its
        RIS bit), then UARTMIS and UARTINTR."""
        depth = self._depth()
        levels = (tuple(self.field("UARTCR", output) for _, output in _MODEM_LOOPBACK)
                  if self._loopback() else _NO_MODEM_LEVELS)
        state = (not self._tx, len(self._tx) >= depth, not self._rx, len(self._rx) >= depth,
                 levels)
        value = self._fr_values.get(state)
        if value is None:   # (a handful of states: made once, not at every character)
            fr = self.REGISTERS["UARTFR"]
            tx_empty, tx_full, rx_empty, rx_full, _ = state
            value = fr.make(TXFE=int(tx_empty), TXFF=int(tx_full), BUSY=int(not tx_empty),
                            RXFE=int(rx_empty), RXFF=int(rx_full),
                            **{status: level for (status, _), level in zip(_MODEM_LOOPBACK,
                                                                           levels)})
            self._fr_values[state] = value
        old = self.regs["UARTFR"][0]
        if value != old:
            fr = self.REGISTERS["UARTFR"]
            for status, _ in _MODEM_LOOPBACK:
                if fr.get(value, status) != fr.get(old, status):
                    self._raise(status)
            self.regs["UARTFR"][0] = value
        self._update_irq()

    def _update_irq(self) -> None:
        """UARTMIS = UARTRIS & UARTIMSC; UARTINTR is high while any UARTMIS bit is set."""
        mis = self.reg("UARTRIS") & self.reg("UARTIMSC")
        self.regs["UARTMIS"][0] = mis
        line = self.irqs["intr"]
        if bool(mis) != line.level:
            line.set(bool(mis))
            self.changed()

    # -- register hooks -------------------------------------------------------------------
    def _read_dr(self, r: MmioRegister, index: int) -> int:
        """Pop the oldest received character (§3.3.1); its status bits also collect in
        UARTRSR. An empty FIFO reads 0."""
        if not self._rx:
            return 0
        entry = self._rx.popleft()
        for bit in _RX_ERRORS:
            if r.get(entry, bit):
                self.set_field("UARTRSR", bit, 1)
        if len(self._rx) < self._rx_trigger():
            self._clear("RX")
        if not self._rx:
            self._clear("RT")
        self._update()
        return entry

    def _write_dr(self, r: MmioRegister, index: int, old: int, written: int) -> None:
        """Queue a character and send it when the transmitter runs (§3.3.1)."""
        if len(self._tx) >= self._depth():
            self.guest_error(f"UARTDR write of {r.get(written, 'DATA'):#04x} with the "
                             f"transmit FIFO full: character lost")
            return
        self._tx.append(r.get(written, "DATA"))
        if len(self._tx) > self._tx_trigger():
            self._clear("TX")
        self._drain_tx()
        self._update()

    def _write_ecr(self, r: MmioRegister, index: int, old: int, written: int) -> None:
        """UARTECR: any write clears UARTRSR's error bits (§3.3.2)."""
        self.regs["UARTRSR"][0] = 0

    def _write_lcr_h(self, r: MmioRegister, index: int, old: int, written: int) -> None:
        new = self.reg("UARTLCR_H")
        if r.get(old, "FEN") != r.get(new, "FEN"):
            self._rx.clear()
            self._tx.clear()
            self._clear("RX")
            self._clear("RT")
        if not r.get(old, "BRK") and r.get(new, "BRK") and self._loopback() \
                and self._receiving():
            self._receive(self.REGISTERS["UARTDR"].make(BE=1))
            self._line_idle()
        self._update()

    def _write_cr(self, r: MmioRegister, index: int, old: int, written: int) -> None:
        self._drain_tx()
        self._update()

    def _write_ifls(self, r: MmioRegister, index: int, old: int, written: int) -> None:
        for name in ("RXIFLSEL", "TXIFLSEL"):
            if r.get(written, name) not in _TRIGGER_EIGHTHS:
                self.guest_error(f"UARTIFLS.{name}={r.get(written, name):#05b} is reserved "
                                 f"(acts as {_TRIGGER_RESERVED_AS:#05b})")

    def _write_imsc(self, r: MmioRegister, index: int, old: int, written: int) -> None:
        self._update_irq()

    def _write_icr(self, r: MmioRegister, index: int, old: int, written: int) -> None:
        """Writing 1 clears the RIS bit in the same position (§3.3.13)."""
        self.regs["UARTRIS"][0] &= ~(written & r.field_mask)
        self._update_irq()

    def _write_ro(self, r: MmioRegister, index: int, old: int, written: int) -> None:
        self.guest_error(f"write of {written:#x} to read-only register {r.name} ignored")

    def _read_wo(self, r: MmioRegister, index: int) -> int:
        self.guest_error(f"read of write-only register {r.name}: reads as zero")
        return 0
