"""A GDB remote stub for a machine's run (``spe-emu run --gdb PORT``).

The GDB Remote Serial Protocol (GDB manual, appendix E "GDB Remote Serial Protocol") over one
TCP connection on the loopback interface only. The machine waits for GDB before its first
instruction. Supported: ``qSupported`` (``PacketSize``, ``qXfer:features:read+``,
``swbreak+``, ``hwbreak+``, ``vContSupported+``, ``QStartNoAckMode+``), ``qXfer:features:read``
of :data:`TARGET_XML` (features ``org.gnu.gdb.aarch64.core``, ``org.gnu.gdb.aarch64.fpu``,
``org.gnu.gdb.aarch64.tls`` as GDB's aarch64 target describes them, and two of spe_emu's own:
``org.spe-emu.sysregs`` with the EL1/EL2 exception and translation registers and
``org.spe-emu.spe`` with the SPE registers, so that ``p $PMBSR_EL1`` works), ``?``, ``g``/``G``,
``p``/``P``, ``m``/``M`` (guest virtual addresses through the current translation regime; RAM
only, so that a debugger read never reaches a device register; a fault is the error reply
``E14``), ``Z0``/``z0`` and ``Z1``/``z1`` breakpoints, ``Z2``/``Z3``/``Z4`` watchpoints (write,
read, access), ``s``, ``c``, ``vCont`` (``c``, ``C``, ``s``, ``S``; the signal is ignored),
Ctrl-C, ``D`` (detach: the run goes on alone) and ``k``/``vKill`` (the run ends with
:class:`~spe_emu.errors.DebuggerKill`), and ``qRcmd`` monitor commands (``monitor help``).

How the run stops (no Python per instruction while GDB only continues):

* continue with no breakpoint or watchpoint: the fast (or raw) loop runs as without GDB; a
  Ctrl-C makes its native block hook stop at the next block boundary.
* breakpoints (software and hardware alike; guest memory is never written): a Unicorn code
  hook at each address, called only there; it stops the run before the instruction
  (:meth:`Machine.debug_break_before`).
* watchpoints: the machine's watchpoint hooks (:mod:`spe_emu.cpu.watchpoints`) over the
  watched bytes; the accessing instruction is undone and the run stops before it, as on
  hardware (GDB steps over it itself).
* single step: the loop's exact stop at an instruction count (the count + 1).
* ``--gdb-stop-on-exception`` / ``monitor stop-on-exception on``: every exception the PE takes
  (synchronous ones are then all taken in Python) stops the run at its vector, reported as
  SIGSEGV (Data and Instruction Aborts), SIGILL (EC 0x00, Unknown reason), SIGTRAP (the rest
  and interrupts).

Deterministic: every stop is at an instruction count, and the guest's counters
(CNTVCT_EL0 ...) are derived from that count, so the guest sees the same values debugged or
not. The fast loop's sample capture drops a sample planned after a breakpoint and plans it
again (it is taken when the instruction runs), as after an exception.
"""

from __future__ import annotations

import queue
import socket
import sys
import threading
from dataclasses import dataclass

from unicorn import UC_HOOK_CODE, UcError
from unicorn import arm64_const as A

from ..arch.faults import ExternalAbort, TranslationFault, page_chunks
from ..cpu.exceptions import EC, ESR, PSTATE, VectorKind
from ..cpu.machine import NEVER, Machine
from ..cpu.sync_checks import ABORT_ECS
from ..errors import ConfigError, DebuggerKill
from ..spe.registers import ALIASES

PACKET_SIZE = 0x4000
"""Largest packet the stub accepts and sends (bytes of payload)."""

SIGINT, SIGILL, SIGTRAP, SIGABRT, SIGSEGV = 2, 4, 5, 6, 11
"""GDB's signal numbers (gdb/signals.def) used in stop replies."""


@dataclass(frozen=True)
class GdbReg:
    """One register of :data:`TARGET_XML`: its GDB name, width (bits), feature, and how it is
    read: ``uc`` (a Unicorn register id), ``enc`` (a system register encoding op0, op1, CRn,
    CRm, op2 read through QEMU's table), or ``spe`` (a register of the SPE model's table)."""

    name: str
    bits: int
    feature: str
    uc: int | None = None
    enc: tuple[int, int, int, int, int] | None = None
    spe: str | None = None
    type: str = "uint64"


CORE, FPU, TLS = "org.gnu.gdb.aarch64.core", "org.gnu.gdb.aarch64.fpu", "org.gnu.gdb.aarch64.tls"
SYSREGS, SPE = "org.spe-emu.sysregs", "org.spe-emu.spe"

SYSTEM_REGISTERS = (
    # (name as the Arm ARM spells it, encoding op0, op1, CRn, CRm, op2; Arm ARM D19.2)
    ("SCTLR_EL1", (3, 0, 1, 0, 0)), ("CPACR_EL1", (3, 0, 1, 0, 2)),
    ("TTBR0_EL1", (3, 0, 2, 0, 0)), ("TTBR1_EL1", (3, 0, 2, 0, 1)),
    ("TCR_EL1", (3, 0, 2, 0, 2)), ("SPSR_EL1", (3, 0, 4, 0, 0)),
    ("ELR_EL1", (3, 0, 4, 0, 1)), ("ESR_EL1", (3, 0, 5, 2, 0)), ("FAR_EL1", (3, 0, 6, 0, 0)),
    ("PAR_EL1", (3, 0, 7, 4, 0)), ("MAIR_EL1", (3, 0, 10, 2, 0)),
    ("VBAR_EL1", (3, 0, 12, 0, 0)), ("CONTEXTIDR_EL1", (3, 0, 13, 0, 1)),
    ("TPIDR_EL1", (3, 0, 13, 0, 4)), ("MDSCR_EL1", (2, 0, 0, 2, 2)),
    ("HCR_EL2", (3, 4, 1, 1, 0)), ("SPSR_EL2", (3, 4, 4, 0, 0)), ("ELR_EL2", (3, 4, 4, 0, 1)),
    ("ESR_EL2", (3, 4, 5, 2, 0)), ("FAR_EL2", (3, 4, 6, 0, 0)), ("VBAR_EL2", (3, 4, 12, 0, 0)),
    ("SCR_EL3", (3, 6, 1, 1, 0)),
)


def gdb_registers(spe_names: list[str]) -> list[GdbReg]:
    """The register list in GDB's numbering (the order of :data:`TARGET_XML`): x0-x30, sp,
    pc, cpsr (core); v0-v31, fpsr, fpcr (fpu); tpidr (tls); :data:`SYSTEM_REGISTERS`
    (plus SP_EL0, SP_EL1); then ``spe_names``."""
    regs = [GdbReg(f"x{i}", 64, CORE, uc=getattr(A, f"UC_ARM64_REG_X{i}")) for i in range(31)]
    regs += [GdbReg("sp", 64, CORE, uc=A.UC_ARM64_REG_SP, type="data_ptr"),
             GdbReg("pc", 64, CORE, uc=A.UC_ARM64_REG_PC, type="code_ptr"),
             GdbReg("cpsr", 32, CORE, uc=A.UC_ARM64_REG_PSTATE, type="uint32")]
    regs += [GdbReg(f"v{i}", 128, FPU, uc=getattr(A, f"UC_ARM64_REG_Q{i}"), type="aarch64v")
             for i in range(32)]
    regs += [GdbReg("fpsr", 32, FPU, uc=A.UC_ARM64_REG_FPSR, type="uint32"),
             GdbReg("fpcr", 32, FPU, uc=A.UC_ARM64_REG_FPCR, type="uint32"),
             GdbReg("tpidr", 64, TLS, uc=A.UC_ARM64_REG_TPIDR_EL0, type="data_ptr")]
    regs += [GdbReg("SP_EL0", 64, SYSREGS, uc=A.UC_ARM64_REG_SP_EL0),
             GdbReg("SP_EL1", 64, SYSREGS, uc=A.UC_ARM64_REG_SP_EL1)]
    regs += [GdbReg(name, 64, SYSREGS, enc=enc) for name, enc in SYSTEM_REGISTERS]
    regs += [GdbReg(name, 64, SPE, spe=name) for name in spe_names]
    return regs


_FPU_TYPES = """
  <vector id="v2d" type="ieee_double" count="2"/><vector id="v2u" type="uint64" count="2"/>
  <vector id="v4f" type="ieee_single" count="4"/><vector id="v4u" type="uint32" count="4"/>
  <vector id="v8u" type="uint16" count="8"/><vector id="v16u" type="uint8" count="16"/>
  <vector id="v1u" type="uint128" count="1"/>
  <union id="aarch64v"><field name="d" type="v2d"/><field name="ud" type="v2u"/>
    <field name="s" type="v4f"/><field name="us" type="v4u"/><field name="h" type="v8u"/>
    <field name="b" type="v16u"/><field name="q" type="v1u"/></union>"""


def target_xml(regs: list[GdbReg]) -> str:
    """The target description (GDB manual, "Target Descriptions") of ``regs``."""
    out = ['<?xml version="1.0"?>\n<!DOCTYPE target SYSTEM "gdb-target.dtd">\n<target>',
           "<architecture>aarch64</architecture>"]
    feature = None
    for num, r in enumerate(regs):
        if r.feature != feature:
            if feature is not None:
                out.append("</feature>")
            feature = r.feature
            out.append(f'<feature name="{feature}">')
            if feature == FPU:
                out.append(_FPU_TYPES)
        group = ' group="system"' if r.feature in (SYSREGS, SPE) else ""
        out.append(f'<reg name="{r.name}" bitsize="{r.bits}" type="{r.type}" '
                   f'regnum="{num}"{group}/>')
    out.append("</feature></target>")
    return "\n".join(out)


def _checksum(payload: bytes) -> bytes:
    return b"%02x" % (sum(payload) & 0xFF)


def _escape(data: bytes) -> bytes:
    """Binary data escaped for a reply (``}`` then the byte XOR 0x20 for ``#$}*``)."""
    out = bytearray()
    for b in data:
        if b in b"#$}*":
            out += bytes((0x7D, b ^ 0x20))
        else:
            out.append(b)
    return bytes(out)


def _unescape(data: bytes) -> bytes:
    out, it = bytearray(), iter(data)
    for b in it:
        out.append(next(it, 0) ^ 0x20 if b == 0x7D else b)
    return bytes(out)


INTERRUPT = object()   # a Ctrl-C from GDB, in the packet queue
CLOSED = object()      # GDB closed the connection


class GdbStub:
    """One GDB connection serving one machine's run.

    Usage: ``stub = GdbStub(port)``; ``RunOptions.attach = stub.attach`` (called with the
    machine before its first instruction: listens on 127.0.0.1:``port``, 0 = any free port,
    prints ``spe-emu: waiting for GDB on 127.0.0.1:PORT`` on stderr and waits for GDB); after
    the run, :meth:`finish` tells GDB how it ended.

    Raises (from the run): ConfigError: ``--mode reference`` or ``--ground-truth`` (the stub
    uses the native counter's stops; ground truth counts whole blocks); OSError: the port
    cannot be bound; DebuggerKill: GDB killed the run.
    """

    def __init__(self, port: int, stop_on_exception: bool = False, announce=None):
        self.port = port
        self.stop_on_exception = stop_on_exception
        self._announce = announce or (lambda text: print(text, file=sys.stderr, flush=True))
        self.m: Machine | None = None
        self._conn: socket.socket | None = None
        self._packets: queue.Queue = queue.Queue()
        self._send_lock = threading.Lock()
        self._ack = True
        self._running = threading.Event()
        self._stopped_ack = threading.Event()
        self._breakpoints: dict[int, tuple[int, str]] = {}   # VA -> (hook handle, "sw"/"hw")
        self._resume: tuple[int, int] | None = None   # (PC, count) the run resumed from
        self._stop_reply = b"S05"
        self._reason: bytes | None = None   # why the run stopped (a stop reply), when known
        self._last_exception: str = "none"
        self._detached = False

    # -- setting up --------------------------------------------------------------------------
    def attach(self, machine: Machine) -> None:
        """Install the stub on ``machine`` and wait for GDB to connect (see the class)."""
        if machine.cfg.mode == "reference":
            raise ConfigError("--gdb stops the run with the native counter: use --mode fast "
                              "or raw")
        if machine.counter.gt_table:
            raise ConfigError("--gdb and --ground-truth cannot be combined (breakpoints end "
                              "the counted blocks early)")
        self.m = machine
        self.regs = gdb_registers([spec.name for spec in machine.spu.table])
        self.xml = target_xml(self.regs).encode()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as srv:
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind(("127.0.0.1", self.port))
            srv.listen(1)
            self._announce(f"spe-emu: waiting for GDB on 127.0.0.1:{srv.getsockname()[1]}")
            self._conn, _ = srv.accept()
        self._conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=self._reader, daemon=True, name="gdb-reader").start()
        machine.debug_hook = self._stopped
        machine.debug_stop_at = 0
        machine.watchpoints.on_host_hit = self._watch_hit
        machine.exception_observer = self._exception
        self._set_exception_stops(self.stop_on_exception)

    def finish(self) -> None:
        """Tell GDB the run ended (``W`` with the guest's exit status, or ``X06`` when the
        run stopped on an error) and close the connection; idempotent."""
        self._running.clear()
        if self._conn is None:
            return
        m = self.m
        try:
            if not self._detached:
                if m.exit is not None:
                    self._send(b"W%02x" % (m.exit.status & 0xFF))
                else:
                    self._send(b"X%02x" % SIGABRT)
        except OSError:
            pass
        self._close()

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    # -- the connection ----------------------------------------------------------------------
    def _reader(self) -> None:
        """Reads packets into the queue (acknowledging them); a Ctrl-C while the guest runs
        stops it at the next block boundary."""
        buf = b""
        conn = self._conn
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                buf += data
                while buf:
                    if buf[0] == 0x03:
                        buf = buf[1:]
                        self._packets.put(INTERRUPT)
                        self._interrupt()
                        continue
                    start = buf.find(b"$")
                    if start < 0:
                        buf = b""
                        break
                    end = buf.find(b"#", start)
                    if end < 0 or len(buf) < end + 3:
                        buf = buf[start:]
                        break
                    payload, cs = buf[start + 1:end], buf[end + 1:end + 3]
                    # (acks: "+" and "-" before "$" are skipped with the rest of the prefix)
                    buf = buf[end + 3:]
                    if self._ack:
                        ok = _checksum(payload) == cs.lower()
                        with self._send_lock:
                            conn.sendall(b"+" if ok else b"-")
                        if not ok:
                            continue
                    self._packets.put(_unescape(payload))
        except OSError:
            pass
        self._packets.put(CLOSED)
        self._interrupt()

    def _interrupt(self) -> None:
        """Stop the running guest at the next block boundary (from the reader thread): the
        loop's stop point becomes the current count; poked again until the loop stops, since
        the loop may be setting its own stop point at the same moment."""
        m = self.m
        if not self._running.is_set():
            return
        self._stopped_ack.clear()
        self._reason = self._reason or b"T%02x" % SIGINT
        while self._running.is_set() and self._conn is not None:
            m.debug_stop_at = 0
            m.counter.stop_at = 0
            if self._stopped_ack.wait(0.05):
                break

    def _send(self, payload: bytes) -> None:
        conn = self._conn
        if conn is None:
            return
        with self._send_lock:
            conn.sendall(b"$" + payload + b"#" + _checksum(payload))

    def _next_packet(self):
        return self._packets.get()

    # -- stops -------------------------------------------------------------------------------
    def _stopped(self) -> None:
        """The run loop's debug stop: report why, then serve GDB until it resumes the run."""
        m = self.m
        self._running.clear()
        self._stopped_ack.set()
        m.debug_stop_at = NEVER
        reply = self._reason or b"T%02x" % SIGTRAP
        self._reason = None
        if self._resume is not None:   # (not the first stop: GDB waits for this reply)
            self._stop_reply = reply
            self._send(reply)
        self._resume = None
        while True:
            packet = self._next_packet()
            if packet is CLOSED:
                self._detach()
                return
            if packet is INTERRUPT:
                continue
            try:
                action = self._handle(packet)
            except DebuggerKill:
                self._close()
                raise
            if action is None:
                continue
            if action == "detach":
                self._detach()
                return
            self._resume_run(step=action == "step")
            return

    def _resume_run(self, step: bool) -> None:
        m = self.m
        n = m.insns()
        self._resume = (m.pc, n)
        m.watchpoints.host_skip = self._resume
        if m.watchpoints.host:   # (hooked where the watched bytes map to now)
            m.watchpoints.dirty = True
        m.debug_stop_at = n + 1 if step else NEVER
        self._running.set()
        if not self._packets.empty():   # (a Ctrl-C that came with the resume)
            threading.Thread(target=self._interrupt, daemon=True).start()

    def _detach(self) -> None:
        m = self.m
        for addr in list(self._breakpoints):
            self._remove_breakpoint(addr)
        m.watchpoints.host.clear()
        m.watchpoints.dirty = True
        self._set_exception_stops(False)
        m.debug_stop_at = NEVER
        m.debug_hook = None
        m.exception_observer = None
        self._detached = True
        self._close()

    def _on_breakpoint(self, _uc, address: int, _size: int, _data) -> None:
        m = self.m
        if self._resume == (address, m._insn_index(address)):
            return   # (the instruction GDB resumed from)
        kind = self._breakpoints.get(address, (0, "sw"))[1]
        self._reason = b"T%02x%sbreak:;" % (SIGTRAP, kind.encode())
        m.debug_break_before(address)

    def _watch_hit(self, pc: int, address: int, write: bool) -> None:
        kind = next((k for lo, n, k in self.m.watchpoints.host if lo <= address < lo + n),
                    "w" if write else "r")
        name = {"w": b"watch", "r": b"rwatch", "a": b"awatch"}[kind]
        self._reason = b"T%02x%s:%x;" % (SIGTRAP, name, address)
        self.m.debug_break_before(pc)

    def _exception(self, kind: VectorKind, target: int, syndrome: int | None) -> None:
        m = self.m
        if kind is VectorKind.SYNC:
            ec = ESR.get(syndrome, "EC")
            self._last_exception = (f"synchronous exception to EL{target}: ESR_EL{target} "
                                    f"{syndrome:#x} (EC {ec:#04x})")
            sig = (SIGSEGV if ec in ABORT_ECS
                   else SIGILL if ec == EC.UNKNOWN else SIGTRAP)
        else:
            self._last_exception = f"{kind.name} to EL{target}"
            sig = SIGTRAP
        if self.stop_on_exception:
            self._reason = b"T%02x" % sig
            m.debug_stop_at = min(m.debug_stop_at, m.insns())

    def _set_exception_stops(self, on: bool) -> None:
        """Stop at every exception: the native INTR hook hands every synchronous exception to
        Python (same outcome) while this is on."""
        self.stop_on_exception = on
        if self.m.cfg.mode == "fast":
            self.m.intr.native = int(not on)

    # -- packets -----------------------------------------------------------------------------
    def _handle(self, packet: bytes) -> str | None:
        """Answer one packet; returns "continue", "step" or "detach" to leave the stop."""
        m = self.m
        cmd, body = packet[:1], packet[1:]
        reply = b""
        if packet.startswith(b"qSupported"):
            reply = (b"PacketSize=%x;qXfer:features:read+;swbreak+;hwbreak+;vContSupported+;"
                     b"QStartNoAckMode+" % PACKET_SIZE)
        elif packet == b"QStartNoAckMode":
            self._send(b"OK")
            self._ack = False
            return None
        elif packet.startswith(b"qXfer:features:read:target.xml:"):
            off, length = (int(x, 16) for x in packet.split(b":")[-1].split(b","))
            chunk = self.xml[off:off + length]
            reply = (b"l" if off + length >= len(self.xml) else b"m") + _escape(chunk)
        elif packet.startswith(b"qXfer:"):
            reply = b"E00"
        elif packet == b"?":
            reply = self._stop_reply
        elif packet in (b"qC",):
            reply = b"QC1"
        elif packet == b"qAttached":
            reply = b"1"
        elif packet == b"qfThreadInfo":
            reply = b"m1"
        elif packet == b"qsThreadInfo":
            reply = b"l"
        elif cmd == b"H" or packet.startswith(b"T"):
            reply = b"OK"
        elif packet.startswith(b"qRcmd,"):
            return self._monitor(bytes.fromhex(packet[6:].decode()).decode(errors="replace"))
        elif cmd == b"g":
            reply = b"".join(self._reg_hex(r) for r in self.regs if r.feature in (CORE, FPU))
        elif cmd == b"G":
            reply = self._write_all(body)
        elif cmd == b"p":
            n = int(body, 16)
            reply = self._reg_hex(self.regs[n]) if n < len(self.regs) else b"E00"
        elif cmd == b"P":
            num, _, value = body.partition(b"=")
            n = int(num, 16)
            reply = self._write_reg(self.regs[n], value) if n < len(self.regs) else b"E00"
        elif cmd == b"m":
            addr, length = (int(x, 16) for x in body.split(b","))
            data = self._read_memory(addr, min(length, PACKET_SIZE // 2))
            reply = b"E14" if data is None else data.hex().encode()
        elif cmd == b"M":
            where, _, data = body.partition(b":")
            addr, length = (int(x, 16) for x in where.split(b","))
            reply = self._write_memory(addr, bytes.fromhex(data[:2 * length].decode()))
        elif cmd == b"X":
            where, _, data = body.partition(b":")
            addr, length = (int(x, 16) for x in where.split(b","))
            reply = self._write_memory(addr, _unescape(data)[:length])
        elif cmd in (b"Z", b"z"):
            reply = self._point(cmd == b"Z", body)
        elif cmd in (b"c", b"C"):
            return "continue"
        elif cmd in (b"s", b"S"):
            return "step"
        elif packet == b"vCont?":
            reply = b"vCont;c;C;s;S"
        elif packet.startswith(b"vCont;"):
            action = packet[6:7]
            if action in (b"c", b"C"):
                return "continue"
            if action in (b"s", b"S"):
                return "step"
            reply = b"E00"
        elif packet == b"D" or packet.startswith(b"D;"):
            self._send(b"OK")
            return "detach"
        elif packet == b"k" or packet.startswith(b"vKill"):
            if packet.startswith(b"vKill"):
                self._send(b"OK")
            raise DebuggerKill(f"GDB killed the run at PC {m.pc:#x} after {m.insns()} "
                               f"instructions")
        self._send(reply)
        return None

    def _monitor(self, text: str) -> None:
        """``monitor`` commands: help, insns, exception, stop-on-exception [on|off]."""
        words = text.split()
        m = self.m
        if words[:1] == ["insns"]:
            out = f"instructions retired: {m.insns()}\n"
        elif words[:1] == ["exception"]:
            out = f"last exception: {self._last_exception}\n"
        elif words[:1] == ["stop-on-exception"] and words[1:] in ([], ["on"], ["off"]):
            if words[1:]:
                self._set_exception_stops(words[1] == "on")
            out = f"stop-on-exception: {'on' if self.stop_on_exception else 'off'}\n"
        elif words[:1] in ([], ["help"]):
            out = ("monitor commands:\n  insns  instructions retired so far\n"
                   "  exception  the last exception the PE took\n"
                   "  stop-on-exception [on|off]  stop at every exception the PE takes\n")
        else:
            self._send(b"E01")
            return None
        self._send(b"O" + out.encode().hex().encode())
        self._send(b"OK")
        return None

    # -- registers ---------------------------------------------------------------------------
    def _reg_value(self, r: GdbReg) -> int:
        m = self.m
        if r.uc is not None:
            return m.uc.reg_read(r.uc)
        if r.enc is not None:
            return m.fast.cpr(r.enc)
        name = ALIASES.get(r.spe, r.spe)   # (PMSCR_EL12 is PMSCR_EL1, §4.3.6)
        spec = m.spu.table[name]
        if spec.on_read:   # (PMSICR_EL1, PMBIDR_EL1: no side effect)
            return getattr(m.spu, spec.on_read)(name, m.context())
        return m.spu.regs[name]

    def _reg_hex(self, r: GdbReg) -> bytes:
        return (self._reg_value(r) & ((1 << r.bits) - 1)).to_bytes(r.bits // 8,
                                                                    "little").hex().encode()

    def _write_reg(self, r: GdbReg, value_hex: bytes) -> bytes:
        m = self.m
        try:
            value = int.from_bytes(bytes.fromhex(value_hex.decode()), "little")
        except ValueError:
            return b"E00"
        if r.uc is not None:
            m.uc.reg_write(r.uc, value)
        elif r.enc is not None:
            m.fast.set_cpr(r.enc, value)
            m._flush_translations()
        else:
            m.spu.write(r.spe, value, m.context())
            m._device_changed()
        m.pe.forget_context()
        m.replan = True
        return b"OK"

    def _write_all(self, body: bytes) -> bytes:
        pos = 0
        for r in self.regs:
            width = r.bits // 4
            if r.feature not in (CORE, FPU) or pos + width > len(body):
                break
            self._write_reg(r, body[pos:pos + width])
            pos += width
        return b"OK"

    # -- memory ------------------------------------------------------------------------------
    def _pa(self, va: int, n: int) -> int | None:
        """The physical address of ``n`` bytes at ``va`` (within one page) in the current
        translation regime, when they are RAM; else None."""
        m = self.m
        el = PSTATE.get(m.fast.reg(A.UC_ARM64_REG_PSTATE), "EL")
        try:
            pa = m._translate(va, m._regime_el(el))
        except (TranslationFault, ExternalAbort):
            return None
        return pa if m._in_ram(pa, n) else None

    def _read_memory(self, va: int, n: int) -> bytes | None:
        out = bytearray()
        for page_va, start, end in page_chunks(va, n):
            pa = self._pa(page_va, end - start)
            if pa is None:
                return bytes(out) if out else None
            try:
                out += self.m.fast.read(pa, end - start)
            except UcError:
                return bytes(out) if out else None
        return bytes(out)

    def _write_memory(self, va: int, data: bytes) -> bytes:
        m = self.m
        chunks = []
        for page_va, start, end in page_chunks(va, len(data)):
            pa = self._pa(page_va, end - start)
            if pa is None:
                return b"E14"
            chunks.append((pa, data[start:end]))
        for pa, chunk in chunks:
            m.fast.write(pa, chunk)
        if data:
            m.uc.ctl_flush_tb()   # (the bytes may be code)
            m._forget_code()
        return b"OK"

    # -- breakpoints and watchpoints ---------------------------------------------------------
    def _point(self, insert: bool, body: bytes) -> bytes:
        try:
            kind, addr, length = body.split(b";")[0].split(b",")
            kind, addr, length = int(kind), int(addr, 16), int(length, 16)
        except ValueError:
            return b"E00"
        m = self.m
        if kind in (0, 1):
            if insert and addr not in self._breakpoints:
                handle = m.uc.hook_add(UC_HOOK_CODE, self._on_breakpoint, None, addr, addr + 3)
                self._breakpoints[addr] = (handle, "sw" if kind == 0 else "hw")
                m.uc.ctl_flush_tb()
            elif not insert and addr in self._breakpoints:
                self._remove_breakpoint(addr)
            return b"OK"
        if kind in (2, 3, 4):
            entry = (addr, max(length, 1), {2: "w", 3: "r", 4: "a"}[kind])
            host = m.watchpoints.host
            if insert and entry not in host:
                host.append(entry)
            elif not insert and entry in host:
                host.remove(entry)
            m.watchpoints.dirty = True
            return b"OK"
        return b""

    def _remove_breakpoint(self, addr: int) -> None:
        handle, _kind = self._breakpoints.pop(addr)
        self.m.uc.hook_del(handle)
        self.m.uc.ctl_flush_tb()
