"""The PL011 UART model against the PrimeCell UART (PL011) TRM r1p5 (Arm DDI 0183).

Register reset values (§3.3), the flag register, the interrupt registers' RW / RO / W1C
behaviour and the UARTINTR level (§3.3.10-§3.3.13, §3.4), the receive FIFO with FEN=0 and
FEN=1 at every trigger level, overrun, loopback, the enable options, access sizes and guest
errors, and the device-tree node. One end-to-end check runs a bare-metal program on
``qemu-system-aarch64 -M virt`` and compares its console output with the model's for the same
accesses (skipped without QEMU or the aarch64 cross binutils).
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from spe_emu.devices.pl011 import FIFO_DEPTH, Pl011
from spe_emu.platform.board import VIRT, Platform
from spe_emu.platform.clock import VirtualClock
from spe_emu.platform.device import DEVICE_TYPES

# Offsets (§3.2 Table 3-1)
DR, RSR, FR, ILPR, IBRD, FBRD, LCR_H, CR, IFLS, IMSC, RIS, MIS, ICR, DMACR = (
    0x000, 0x004, 0x018, 0x020, 0x024, 0x028, 0x02C, 0x030, 0x034, 0x038, 0x03C, 0x040,
    0x044, 0x048)

# Bit values from the TRM's register descriptions, written out here so that the test does not
# reuse the model's tables.
FR_CTS, FR_DSR, FR_DCD, FR_BUSY, FR_RXFE, FR_TXFF, FR_RXFF, FR_TXFE, FR_RI = (
    1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8)
CR_UARTEN, CR_LBE, CR_TXE, CR_RXE, CR_DTR, CR_RTS, CR_OUT1, CR_OUT2 = (
    1 << 0, 1 << 7, 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12, 1 << 13)
LCRH_BRK, LCRH_FEN, LCRH_WLEN8 = 1 << 0, 1 << 4, 0b11 << 5
INT_RI, INT_CTS, INT_DCD, INT_DSR, INT_RX, INT_TX, INT_RT, INT_FE, INT_PE, INT_BE, INT_OE = (
    1 << n for n in range(11))
DR_FE, DR_PE, DR_BE, DR_OE = 1 << 8, 1 << 9, 1 << 10, 1 << 11
RSR_OE, RSR_BE = 1 << 3, 1 << 2

RESET = {
    DR: 0x000, RSR: 0x0, FR: 0x90, ILPR: 0x00, IBRD: 0x0000, FBRD: 0x00, LCR_H: 0x00,
    CR: 0x0300, IFLS: 0x12, IMSC: 0x000, RIS: 0x000, MIS: 0x000, DMACR: 0x0,
    # §3.3.15/§3.3.16: part number 0x011, designer 0x41 (Arm), revision 0x3 (r1p5),
    # configuration 0; PrimeCell ID 0xB105F00D.
    0xFE0: 0x11, 0xFE4: 0x10, 0xFE8: 0x34, 0xFEC: 0x00,
    0xFF0: 0x0D, 0xFF4: 0xF0, 0xFF8: 0x05, 0xFFC: 0xB1,
}


class Rig:
    """A PL011 on a fake platform: console bytes, guest errors and UARTINTR changes
    collected in lists."""

    def __init__(self, outdir: Path, **props):
        self.console: list[bytes] = []
        self.errors: list[str] = []
        self.changes = 0
        spec = VIRT.device("pl011")
        spec = dataclasses.replace(spec, props=spec.props + tuple(props.items()))
        self.platform = Platform(clock=VirtualClock(lambda: 0), outdir=outdir,
                                 guest_error=self.errors.append, console=self.console.append)
        self.dev = Pl011(spec, self.platform)
        self.levels: list[bool] = []
        self.dev.irqs["intr"].connect(self.levels.append)
        self.dev.on_change = self._changed

    def _changed(self) -> None:
        self.changes += 1

    def r(self, offset: int, size: int = 4) -> int:
        return self.dev.read(offset, size)

    def w(self, offset: int, value: int, size: int = 4) -> None:
        self.dev.write(offset, size, value)

    @property
    def irq(self) -> bool:
        return self.dev.irqs["intr"].level

    def out(self) -> bytes:
        return b"".join(self.console)


@pytest.fixture
def make(tmp_path):
    """Rig factory (board properties as keyword arguments); closes every device after."""
    made: list[Rig] = []

    def factory(outdir: Path | None = None, **props) -> Rig:
        made.append(Rig(outdir or tmp_path, **props))
        return made[-1]

    yield factory
    for r in made:
        r.dev.close()


@pytest.fixture
def rig(make):
    return make()


def test_registered_kind():
    assert DEVICE_TYPES["pl011"] is Pl011


def test_reset_values(rig):
    for offset, value in RESET.items():
        assert rig.r(offset) == value, hex(offset)
    assert rig.errors == []
    assert not rig.irq


def test_reset_restores_every_register(rig):
    rig.w(LCR_H, LCRH_FEN | LCRH_WLEN8)
    rig.w(CR, CR_UARTEN | CR_TXE | CR_RXE | CR_RTS)
    rig.w(IFLS, 0x24)
    rig.w(IMSC, 0x7FF)
    rig.w(IBRD, 13)
    rig.w(FBRD, 1)
    rig.w(ILPR, 7)
    rig.w(DMACR, 0x7)
    rig.w(DR, ord("a"))
    rig.dev.feed(b"xyz")
    assert rig.irq
    rig.dev.reset()
    for offset, value in RESET.items():
        assert rig.r(offset) == value, hex(offset)
    assert not rig.irq
    assert rig.dev.rx_space() == 1  # FEN=0 again: the holding register is empty


def test_transmit_to_console_and_log(rig, tmp_path):
    rig.w(DR, ord("h"), size=1)       # kvm-unit-tests' writeb
    rig.w(DR, 0x100 | ord("i"))       # bits 11:8 are read-only status: only DATA is sent
    rig.w(DR, ord("\n"), size=2)
    assert rig.console == [b"h", b"i", b"\n"]
    # infinitely fast transmitter: empty, not busy, never full
    assert rig.r(FR) == FR_TXFE | FR_RXFE
    assert rig.r(RIS) == INT_TX
    assert rig.errors == []
    rig.dev.close()
    assert (tmp_path / "console.log").read_bytes() == b"hi\n"
    rig.w(DR, ord("!"))               # after close the log reopens and appends
    rig.dev.close()
    rig.dev.close()
    assert (tmp_path / "console.log").read_bytes() == b"hi\n!"


def test_console_log_truncated_by_a_new_device(make, tmp_path):
    (tmp_path / "console.log").write_bytes(b"old run\n")
    rig = make()
    rig.w(DR, ord("n"))
    rig.dev.close()
    assert (tmp_path / "console.log").read_bytes() == b"n"


def test_tx_interrupt_and_irq_line(rig):
    assert rig.r(RIS) == 0          # not set at reset: only after data has left the FIFO
    rig.w(IMSC, INT_TX)
    assert not rig.irq and rig.changes == 0
    rig.w(DR, ord("a"))
    assert rig.r(RIS) == INT_TX and rig.r(MIS) == INT_TX
    assert rig.irq and rig.changes == 1 and rig.levels == [False, True]
    rig.w(DR, ord("b"))             # level unchanged: no new notification
    assert rig.changes == 1
    rig.w(IMSC, 0)                  # masking lowers the line, the raw status stays
    assert not rig.irq and rig.r(RIS) == INT_TX and rig.r(MIS) == 0
    rig.w(IMSC, INT_TX)
    assert rig.irq
    rig.w(ICR, INT_TX)
    assert not rig.irq and rig.r(RIS) == 0 and rig.r(MIS) == 0
    assert rig.levels == [False, True, False, True, False] and rig.changes == 4


def test_icr_clears_only_the_written_bits(rig):
    rig.w(DR, ord("a"))             # TXRIS
    rig.dev.feed(b"b")              # RXRIS (FEN=0: the holding register filled) and RTRIS
    assert rig.r(RIS) == INT_TX | INT_RX | INT_RT
    rig.w(ICR, 0)
    assert rig.r(RIS) == INT_TX | INT_RX | INT_RT
    rig.w(ICR, INT_TX)
    assert rig.r(RIS) == INT_RX | INT_RT
    rig.w(ICR, INT_RT | INT_OE | INT_RI)   # clearing bits that are clear is harmless
    assert rig.r(RIS) == INT_RX
    rig.w(ICR, 0xFFFF_FFFF)
    assert rig.r(RIS) == 0
    assert rig.r(ICR) == 0 and any("write-only register UARTICR" in e for e in rig.errors)


def test_imsc_is_read_write_and_mis_is_ris_and_imsc(rig):
    rig.w(IMSC, 0xFFFF_FFFF)
    assert rig.r(IMSC) == 0x7FF     # bits 31:11 reserved
    rig.w(DR, 0x41)
    rig.dev.feed(b"z")
    assert rig.r(MIS) == INT_TX | INT_RX | INT_RT
    rig.w(IMSC, INT_RX)
    assert rig.r(MIS) == INT_RX and rig.irq


@pytest.mark.parametrize("offset", [FR, RIS, MIS, 0xFE0, 0xFE8, 0xFFC])
def test_read_only_registers_ignore_writes(rig, offset):
    before = rig.r(offset)
    rig.w(offset, 0xFFFF_FFFF)
    assert rig.r(offset) == before
    assert len(rig.errors) == 1 and "read-only" in rig.errors[0]


def test_rx_holding_register_fen0(rig):
    assert rig.dev.wants_input() and rig.dev.rx_space() == 1
    rig.dev.feed(b"a")
    assert rig.r(FR) == FR_TXFE | FR_RXFF       # one entry: full, not empty
    assert rig.r(RIS) == INT_RX | INT_RT
    assert not rig.dev.wants_input() and rig.dev.rx_space() == 0
    rig.dev.feed(b"b")                          # overrun: b is lost
    assert rig.r(RSR) == RSR_OE and rig.r(RIS) == INT_RX | INT_RT | INT_OE
    assert rig.r(DR) == DR_OE | ord("a")        # the data before the loss carries OE
    assert rig.r(FR) == FR_TXFE | FR_RXFE
    assert rig.r(RIS) == INT_OE                 # RX below trigger, RT empty: both cleared
    assert rig.r(RSR) == RSR_OE
    rig.w(RSR, 0)                               # UARTECR
    assert rig.r(RSR) == 0
    assert rig.r(DR) == 0                       # empty FIFO reads zero
    assert rig.errors == []


@pytest.mark.parametrize("rxiflsel,trigger", [(0, 4), (1, 8), (2, 16), (3, 24), (4, 28)])
def test_rx_fifo_trigger_levels(rig, rxiflsel, trigger):
    rig.w(LCR_H, LCRH_FEN | LCRH_WLEN8)
    rig.w(IFLS, rxiflsel << 3)
    rig.w(IMSC, INT_RX)
    data = bytes(range(0x40, 0x40 + trigger))
    rig.dev.feed(data[:-1])
    assert rig.r(RIS) == INT_RT and not rig.irq    # below the trigger: timeout only
    rig.dev.feed(data[-1:])
    assert rig.r(RIS) == INT_RX | INT_RT and rig.irq
    assert rig.dev.rx_space() == FIFO_DEPTH - trigger
    assert rig.r(DR) == data[0]                    # one read takes it below the trigger
    assert rig.r(RIS) == INT_RT and not rig.irq
    got = bytes(rig.r(DR) for _ in range(trigger - 1))
    assert got == data[1:]
    assert rig.r(RIS) == 0 and rig.r(FR) == FR_TXFE | FR_RXFE


def test_rx_interrupt_follows_reaching_the_trigger(rig):
    rig.w(LCR_H, LCRH_FEN)                          # reset RXIFLSEL b010: 16 entries
    rig.dev.feed(bytes(16))
    rig.w(ICR, INT_RX | INT_RT)
    rig.dev.feed(bytes(1))                          # already above: RX stays clear
    assert rig.r(RIS) == INT_RT
    for _ in range(2):
        rig.r(DR)                                   # 15 left: below the trigger
    rig.dev.feed(bytes(1))                          # back to 16: reached again
    assert rig.r(RIS) == INT_RX | INT_RT


def test_rx_fifo_full_and_overrun(rig):
    rig.w(LCR_H, LCRH_FEN)
    assert rig.dev.rx_space() == FIFO_DEPTH == 32
    data = bytes(range(0x20, 0x20 + 32))
    rig.dev.feed(data + b"XY")                     # two characters too many
    assert rig.r(FR) == FR_TXFE | FR_RXFF
    assert not rig.dev.wants_input()
    assert rig.r(RIS) == INT_RX | INT_RT | INT_OE and rig.r(RSR) == RSR_OE
    got = [rig.r(DR) for _ in range(32)]
    assert bytes(v & 0xFF for v in got) == data
    assert [v & DR_OE for v in got] == [0] * 31 + [DR_OE]
    assert rig.r(FR) == FR_TXFE | FR_RXFE and rig.dev.wants_input()


def test_rt_fires_at_or_above_trigger_and_icr_clears_it(rig):
    rig.w(LCR_H, LCRH_FEN)
    rig.w(IMSC, INT_RT)
    rig.dev.feed(b"q")
    assert rig.irq
    rig.w(ICR, INT_RT)
    assert not rig.irq and rig.r(FR) & FR_RXFE == 0
    rig.dev.feed(bytes(20))                         # past the 1/2 trigger: RT again
    assert rig.r(RIS) == INT_RX | INT_RT


def test_fen_change_empties_fifos(rig):
    rig.w(LCR_H, LCRH_FEN)
    rig.dev.feed(b"abc")
    rig.w(LCR_H, 0)
    assert rig.r(FR) == FR_TXFE | FR_RXFE and rig.r(RIS) == 0
    rig.w(LCR_H, LCRH_WLEN8)                        # FEN unchanged: nothing flushed
    rig.dev.feed(b"d")
    rig.w(LCR_H, LCRH_WLEN8 | 0b10)
    assert rig.r(DR) == ord("d")


def test_loopback(rig):
    rig.w(CR, CR_UARTEN | CR_TXE | CR_RXE | CR_LBE)
    rig.w(LCR_H, LCRH_FEN | LCRH_WLEN8)
    assert not rig.dev.wants_input()
    rig.dev.feed(b"ignored")                        # the receiver listens to TX only
    assert rig.r(FR) & FR_RXFE
    rig.w(DR, ord("L"))
    assert rig.console == [b"L"]
    assert rig.r(FR) == FR_TXFE                     # received: not empty
    assert rig.r(RIS) == INT_TX | INT_RT
    assert rig.r(DR) == ord("L")
    rig.w(LCR_H, LCRH_FEN | LCRH_WLEN8 | LCRH_BRK)   # break, looped back
    assert rig.r(RIS) & INT_BE
    assert rig.r(DR) == DR_BE and rig.r(RSR) == RSR_BE
    rig.w(LCR_H, LCRH_FEN | LCRH_WLEN8 | LCRH_BRK)   # still in break: no second one
    assert rig.r(FR) & FR_RXFE


def test_loopback_modem_lines(rig):
    rig.w(CR, CR_UARTEN | CR_TXE | CR_RXE | CR_RTS | CR_DTR)   # not in loopback: no effect
    assert rig.r(FR) == FR_TXFE | FR_RXFE and rig.r(RIS) == 0
    rig.w(IMSC, INT_CTS)
    rig.w(CR, CR_UARTEN | CR_TXE | CR_RXE | CR_LBE | CR_RTS | CR_OUT2)
    assert rig.r(FR) == FR_TXFE | FR_RXFE | FR_CTS | FR_RI
    assert rig.r(RIS) == INT_CTS | INT_RI and rig.irq
    rig.w(ICR, INT_CTS | INT_RI)
    assert not rig.irq
    rig.w(CR, CR_UARTEN | CR_TXE | CR_RXE | CR_LBE | CR_DTR | CR_OUT1 | CR_OUT2)
    assert rig.r(FR) == FR_TXFE | FR_RXFE | FR_DSR | FR_DCD | FR_RI
    assert rig.r(RIS) == INT_CTS | INT_DSR | INT_DCD     # each change, either way
    assert rig.irq


def test_tx_held_while_disabled(make):
    rig = make(**{"tx-when-disabled": False})
    rig.w(DR, ord("a"))                             # UARTEN=0 at reset
    assert rig.console == []
    assert rig.r(FR) == FR_RXFE | FR_BUSY | FR_TXFF  # FEN=0: the holding register is full
    assert rig.r(RIS) == 0
    rig.w(DR, ord("b"))
    assert len(rig.errors) == 1 and "transmit FIFO full" in rig.errors[0]
    rig.w(CR, CR_UARTEN | CR_TXE)
    assert rig.console == [b"a"] and rig.r(FR) == FR_TXFE | FR_RXFE
    assert rig.r(RIS) == INT_TX
    rig.w(CR, CR_TXE)
    rig.w(LCR_H, LCRH_FEN)
    for c in b"0123":
        rig.w(DR, c)
    assert rig.r(FR) == FR_RXFE | FR_BUSY
    rig.w(CR, CR_UARTEN | CR_TXE)
    assert rig.out() == b"a0123"


def test_tx_interrupt_cleared_by_filling_above_trigger(make):
    rig = make(**{"tx-when-disabled": False})
    rig.w(LCR_H, LCRH_FEN)
    rig.w(IFLS, 0b000)                              # TX trigger 1/8: 4 entries
    rig.w(CR, CR_UARTEN | CR_TXE)
    rig.w(DR, ord("x"))
    assert rig.r(RIS) == INT_TX
    rig.w(CR, CR_TXE)
    for c in b"1234":
        rig.w(DR, c)
    assert rig.r(RIS) == INT_TX                     # 4 entries: not above the trigger
    rig.w(DR, ord("5"))
    assert rig.r(RIS) == 0                          # 5 entries: above it
    rig.w(CR, CR_UARTEN | CR_TXE)
    assert rig.out() == b"x12345" and rig.r(RIS) == INT_TX


def test_rx_refused_while_disabled(make):
    rig = make(**{"rx-when-disabled": False})
    assert not rig.dev.wants_input() and rig.dev.rx_space() == 0
    rig.dev.feed(b"a")
    assert rig.r(FR) & FR_RXFE
    rig.w(CR, CR_UARTEN | CR_RXE)
    assert rig.dev.wants_input()
    rig.dev.feed(b"a")
    assert rig.r(DR) == ord("a")


def test_enables_ignored_by_default(rig):
    rig.w(CR, 0)                                    # everything off
    rig.w(DR, ord("k"))
    rig.dev.feed(b"m")
    assert rig.console == [b"k"] and rig.r(DR) == ord("m")


def test_access_sizes(rig):
    assert rig.r(CR, 2) == 0x300
    assert rig.r(CR + 1, 1) == 0x03 and rig.r(CR, 1) == 0x00
    rig.w(CR + 1, CR_RTS >> 8, size=1)              # a byte write keeps the other byte
    rig.w(CR, CR_UARTEN, size=1)
    assert rig.r(CR) == CR_RTS | CR_UARTEN
    assert rig.r(0xFE8, 1) == 0x34 and rig.r(0xFE9, 1) == 0
    rig.dev.feed(b"e")
    assert rig.r(DR + 1, 1) == 0 and rig.r(FR) & FR_RXFE  # any read of UARTDR pops
    assert rig.errors == []


@pytest.mark.parametrize("offset,size", [
    (0x04C, 4), (0x080, 4), (0xFDC, 4), (0x008, 4),   # reserved / test registers
    (DR, 8), (FR, 3), (FR + 1, 2), (CR + 2, 4),       # bad size or alignment
])
def test_bad_accesses_are_guest_errors(rig, offset, size):
    assert rig.r(offset, size) == 0
    rig.w(offset, 0xFF, size)
    assert len(rig.errors) == 2
    assert rig.console == []
    for reg, value in RESET.items():
        assert rig.r(reg) == value


def test_reserved_ifls_encoding(rig):
    rig.w(LCR_H, LCRH_FEN)
    rig.w(IFLS, 0b111 << 3)
    assert len(rig.errors) == 1 and "RXIFLSEL" in rig.errors[0]
    rig.dev.feed(bytes(15))                         # acts as 1/2: 16 entries
    assert rig.r(RIS) == INT_RT
    rig.dev.feed(bytes(1))
    assert rig.r(RIS) == INT_RX | INT_RT


# -- against QEMU ---------------------------------------------------------------------------

QEMU = "qemu-system-aarch64"
AS, LD = "aarch64-linux-gnu-as", "aarch64-linux-gnu-ld"
UART = 0x0900_0000
# Registers whose values the program prints (QEMU and the model agree on these; QEMU's
# UARTPeriphID2 says r1p1, 0x14, where the model is r1p5, 0x34).
PRINTED = (FR, RIS, MIS, CR, IFLS, LCR_H, IMSC, RSR, DMACR, IBRD, FBRD, ILPR,
           0xFE0, 0xFE4, 0xFEC, 0xFF0, 0xFF4, 0xFF8, 0xFFC)

PROGRAM = """
    .text
    .global _start
_start:
    ldr     x19, =0x09000000
    mov     w1, #'h'
    strb    w1, [x19]               // 8-bit, as kvm-unit-tests
    mov     w1, #'i'
    strb    w1, [x19]
    mov     w1, #'\\n'
    str     w1, [x19]               // 32-bit, as Linux
    adr     x20, offsets
    mov     x21, #NOFF
1:  ldrh    w2, [x20], #2           // each register: 8 hex digits and a newline
    ldr     w3, [x19, x2]
    mov     x4, #28
2:  lsr     w5, w3, w4
    and     w5, w5, #0xf
    cmp     w5, #10
    add     w6, w5, #'0'
    add     w7, w5, #('a' - 10)
    csel    w6, w6, w7, lo
    str     w6, [x19]
    subs    x4, x4, #4
    b.ge    2b
    mov     w6, #'\\n'
    str     w6, [x19]
    subs    x21, x21, #1
    b.ne    1b
    mov     w0, #0x18               // semihosting SYS_EXIT
    adr     x1, exit_block
    hlt     #0xf000
3:  b       3b
    .balign 8
exit_block:
    .quad   0x20026, 0              // ADP_Stopped_ApplicationExit
offsets:
    .hword  {offsets}
    .equ    NOFF, (. - offsets) / 2
"""


def _model_run(rig: Rig) -> bytes:
    """The program's accesses, replayed on the model."""
    rig.w(DR, ord("h"), size=1)
    rig.w(DR, ord("i"), size=1)
    rig.w(DR, ord("\n"))
    for offset in PRINTED:
        value = rig.r(offset)
        for c in f"{value:08x}\n".encode():
            rig.w(DR, c)
    return rig.out()


@pytest.mark.skipif(any(shutil.which(t) is None for t in (QEMU, AS, LD)),
                    reason=f"needs {QEMU}, {AS} and {LD}")
def test_same_output_as_qemu_virt(make, tmp_path):
    src = tmp_path / "prog.S"
    src.write_text(PROGRAM.replace("{offsets}", ", ".join(hex(o) for o in PRINTED)))
    subprocess.run([AS, "-o", str(tmp_path / "prog.o"), str(src)], check=True)
    elf = tmp_path / "prog.elf"
    subprocess.run([LD, "-Ttext=0x40080000", "-o", str(elf), str(tmp_path / "prog.o")],
                   check=True)
    proc = subprocess.run([QEMU, "-M", "virt", "-cpu", "max", "-nographic", "-semihosting",
                           "-kernel", str(elf)], capture_output=True, timeout=10,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    model = _model_run(make(tmp_path / "model"))
    assert model.startswith(b"hi\n00000090\n00000020\n")
    assert proc.stdout == model


# ------------------------------------------------------------- the native transmit path -----
NATIVE_PROGRAM = """
    movz x1, #0x0900, lsl #16
    mov w2, #0x41
    strb w2, [x1]
    mov w2, #0x42
    str w2, [x1]
    ldr w3, [x1, #0x18]
    mov w2, #0x0a
    strb w2, [x1]
    mov w2, #0x43
    strh w2, [x1]
    mov w4, #0x381
    str w4, [x1, #0x30]
    mov w2, #0x44
    strb w2, [x1]
    ldr w5, [x1, #0x18]
    ldr w6, [x1]
    mov w4, #0x301
    str w4, [x1, #0x30]
    mov w2, #0x45
    strb w2, [x1]
    ldr w7, [x1, #0x18]
    mov w4, #0x20
    str w4, [x1, #0x44]
    mov w2, #0x46
    strb w2, [x1]
    mov w2, #0x47
    strb w2, [x1]
    mov w2, #0x48
    strb w2, [x1, #1]
    ldrb w8, [x1, #0x18]
    ldr w9, [x1, #0x3c]
"""


def _run_on_unicorn(rig: Rig, native: bool) -> tuple[list[int], list[int]]:
    """NATIVE_PROGRAM on a Unicorn engine with ``rig``'s PL011 mapped by the bus (uart.c's
    callbacks when ``native``); the registers it read (x3, x5-x9) and every register's value
    after it (read through the model, UARTDR aside: a read would pop the receive FIFO)."""
    import spe_emu  # noqa: F401  (the patched library)
    from unicorn import UC_ARCH_ARM64, UC_MODE_ARM, Uc
    from unicorn import arm64_const as A

    from spe_emu.asm import assemble
    from spe_emu.platform.bus import Bus

    if not native:
        rig.dev.native_mmio = lambda uc: None
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    bus = Bus(uc)
    bus.map_ram("ram", 0x4000_0000, 0x1000)
    bus.map_device(rig.dev)
    code = assemble(NATIVE_PROGRAM, 0x4000_0000)
    uc.mem_write(0x4000_0000, code)
    uc.emu_start(0x4000_0000, 0x4000_0000 + len(code))
    rig.dev.close()
    regs = [uc.reg_read(getattr(A, f"UC_ARM64_REG_X{n}")) for n in (3, 5, 6, 7, 8, 9)]
    return regs, [rig.r(offset) for offset in sorted(RESET) if offset != DR]


def test_native_path_acts_as_the_model(make, tmp_path):
    """uart.c sends UARTDR writes and answers UARTFR reads while the model says they change
    nothing else; the console, console.log, the values read, every register and the UARTINTR
    history come out as with every access in Python, across loopback (received characters),
    a cleared TXRIS and a write to UARTDR's second byte (all Python's)."""
    fast, slow = make(tmp_path / "fast"), make(tmp_path / "slow")
    fast_out = _run_on_unicorn(fast, native=True)
    assert fast.dev._native is not None and fast.dev._native.sent >= 5   # (B, \n, C, E, G)
    assert fast_out == _run_on_unicorn(slow, native=False)
    assert fast.out() == slow.out() == b"AB\nCDEFG\x00"
    assert (tmp_path / "fast" / "console.log").read_bytes() == b"AB\nCDEFG\x00"
    assert fast.levels == slow.levels
    fr_after_b, fr_in_loopback, dr_in_loopback = fast_out[0][:3]
    assert fr_after_b & FR_TXFE and fr_after_b & FR_RXFE            # (B sent, RX empty)
    assert not fr_in_loopback & FR_RXFE and dr_in_loopback & 0xFF == 0x44   # (D looped back)


ORDER_PROGRAM = """
    movz x9, #0x4100, lsl #16
    mov sp, x9
    movz x1, #0x0900, lsl #16
    mov w2, #0x41
    strb w2, [x1]
    mov w2, #0x42
    strb w2, [x1]
    mov w2, #0x43
    strb w2, [x1]
    adr x1, msg
    mov x0, #4
    hlt #0xf000
    mov x0, #0
"""


@pytest.mark.parametrize("native", [True, False])
def test_console_order_with_semihosting(tmp_path, native, monkeypatch):
    """The PL011's characters and a semihosting SYS_WRITE0 share the machine's console: they
    reach it in the order the guest wrote them, also when the native path holds the UART's
    characters back (no newline yet): the board hands them over first."""
    from asmrun import EXIT

    from spe_emu.asm import assemble
    from spe_emu.cpu.machine import Machine, MachineConfig
    from spe_emu.platform.loader import Image, Segment
    from spe_emu.spe.config import SpeConfig

    if not native:
        monkeypatch.setattr(Pl011, "native_mmio", lambda self, uc: None)
    code = assemble(ORDER_PROGRAM + EXIT + '\nmsg: .ascii "DE\\n\\0"\n', 0x4000_0000)
    out: list[bytes] = []
    m = Machine(MachineConfig(boot_el=1, spe=SpeConfig(), outdir=tmp_path, console=out.append))
    m.load(Image(path=Path("<asm>"), entry=0x4000_0000,
                 segments=[Segment(0x4000_0000, 0x4000_0000, code, len(code), 0b111)]))
    m.reset(0x4000_0000)
    assert m.run().exit_status == 0
    assert b"".join(out) == b"ABCDE\n"
    assert (tmp_path / "console.log").read_bytes() == b"ABC"
    uart = next(d for d in m.devices.values() if isinstance(d, Pl011))
    assert (uart._native is not None and uart._native.sent >= 2) == native
