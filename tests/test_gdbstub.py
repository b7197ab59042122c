"""``spe-emu run --gdb PORT`` (tools/gdbstub.py) against Debian's gdb-multiarch in batch mode
(skipped without it), and the GDB Remote Serial Protocol spoken directly (Ctrl-C, errors,
kill, the target description), on the bundled sort guest under the firmware."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import child
import pytest
from elftools.elf.elffile import ELFFile

from spe_emu.spe.config import SpeConfig
from spe_emu.spe.registers import BSC_FILLED, EC_OTHER, spe_registers

ROOT = Path(__file__).resolve().parent.parent
SORT = ROOT / "guests" / "sort.elf"
FIRMWARE = ROOT / "spe_emu" / "images" / "spe_fw.elf"
GDB = shutil.which("gdb-multiarch")
needs_gdb = pytest.mark.skipif(GDB is None, reason="gdb-multiarch is not installed")
IRQ_OPTS = ["--buffer-size", "4096", "--interval", "256"]   # buffer-full interrupts


def symbol(elf: Path, name: str) -> int:
    with open(elf, "rb") as f:
        return ELFFile(f).get_section_by_name(".symtab").get_symbol_by_name(name)[0]["st_value"]


class Run:
    """``spe-emu run --gdb 0 ARGS`` in a subprocess, waiting for GDB on the port it prints."""

    def __init__(self, args: list[str], outdir: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from spe_emu.tools.cli import main; "
             "sys.argv[0] = 'spe-emu'; main()", "run", "--gdb", "0", "-o", str(outdir), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child.env())
        line = self.proc.stderr.readline().decode()
        m = re.search(r"waiting for GDB on 127\.0\.0\.1:(\d+)", line)
        assert m, line
        self.port = int(m.group(1))

    def wait(self) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, out.decode(), err.decode()


def gdb_batch(run: Run, commands: list[str]) -> str:
    """gdb-multiarch -batch connected to ``run``; its output (stdout and stderr)."""
    args = [GDB, "-nx", "-batch", "-ex", "set architecture aarch64", "-ex",
            f"target remote 127.0.0.1:{run.port}"]
    for c in commands:
        args += ["-ex", c]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def values(output: str, name: str) -> list[int]:
    """The values GDB printed as ``name = 0x...`` lines (p/x with a label: see ``show``)."""
    return [int(v, 16) for v in re.findall(rf"^{name} = (0x[0-9a-f]+)$", output, re.M)]


def show(label: str, expr: str) -> str:
    return f'printf "{label} = 0x%lx\\n", {expr}'


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory) -> Path:
    """The same run without GDB (its output directory)."""
    out = tmp_path_factory.mktemp("plain")
    subprocess.run([sys.executable, "-c", "import sys; from spe_emu.tools.cli import main; "
                    "sys.argv[0] = 'spe-emu'; main()", "run", str(SORT), *IRQ_OPTS, "-o",
                    str(out)], check=True, capture_output=True, env=child.env())
    return out


def same_results(debugged: Path, plain: Path) -> None:
    """Being debugged changed nothing the guest saw: the same trace bytes and counts."""
    assert (debugged / "spe.trace").read_bytes() == (plain / "spe.trace").read_bytes()
    assert (debugged / "summary.json").read_text() == (plain / "summary.json").read_text()


@needs_gdb
def test_break_step_registers_memory_and_pmbsr_after_buffer_full(tmp_path, plain_run):
    handler = symbol(FIRMWARE, "spe_handle_pmbirq")
    run = Run([str(SORT), *IRQ_OPTS], tmp_path)
    out = gdb_batch(run, [
        f"file {FIRMWARE}", show("start", "$pc"),
        "break spe_handle_pmbirq", "continue",
        show("pc", "$pc"), show("pmbsr", "$PMBSR_EL1"), show("word", "*(unsigned int *)$pc"),
        "stepi", show("pc", "$pc"), "stepi", show("pc", "$pc"),
        "monitor insns", "continue", show("pmbsr", "$PMBSR_EL1"),
        "delete", "continue"])
    status, _, err = run.wait()
    assert status == 0, err + out
    assert values(out, "start") == [symbol(FIRMWARE, "_start")]
    assert values(out, "pc") == [handler, handler + 4, handler + 8], out
    # Buffer-full interrupt (Arm SPE §4.3.4 PMBSR_EL1): S (bit 17) = 1, EC = 0b000000 (other
    # buffer management event), MSS.BSC = 0b000001 (buffer filled); DL, EA, COLL = 0.
    expected = spe_registers(SpeConfig())["PMBSR_EL1"].make(S=1, EC=EC_OTHER, MSS=BSC_FILLED)
    assert expected == 0x20001
    assert values(out, "pmbsr") == [expected, expected], out
    with open(FIRMWARE, "rb") as f:
        elf = ELFFile(f)
        text = elf.get_section_by_name(".text")
        off = handler - text["sh_addr"]
        assert values(out, "word") == [int.from_bytes(text.data()[off:off + 4], "little")]
    assert re.search(r"instructions retired: \d+", out)
    same_results(tmp_path, plain_run)


@needs_gdb
def test_system_registers_print_the_spe_aliases(tmp_path):
    # issue 29: "info registers system" (or p $PMSCR_EL12) read PMSCR_EL12, which has no
    # storage of its own (it is PMSCR_EL1, §4.3.6), and ended the run with a KeyError
    run = Run([str(SORT)], tmp_path)
    out = gdb_batch(run, ["info registers system", show("el12", "$PMSCR_EL12"),
                          show("el1", "$PMSCR_EL1"), "continue"])
    status, _, err = run.wait()
    assert status == 0, err + out
    assert "PMSCR_EL12" in out and values(out, "el12") == values(out, "el1"), out


@needs_gdb
def test_watchpoints_stop_after_the_access_and_change_nothing(tmp_path, plain_run):
    run = Run([str(SORT), *IRQ_OPTS], tmp_path)
    out = gdb_batch(run, [
        f"file {SORT}", "break main", "continue",
        "watch *((long *)&values + 3)", "continue", show("value", "*((long *)&values + 3)"),
        "x/i $pc - 4", "delete",
        "rwatch *((long *)&values + 7)", "continue", "delete", "continue"])
    status, _, err = run.wait()
    assert status == 0, err + out
    state, first = 0x5350455F534F5254, []   # sort.c: values[i] = lcg_next(&state)
    for _ in range(8):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        first.append(state)
    assert "Old value = 0\n" in out, out
    assert values(out, "value") == [first[3]], out
    assert re.search(r"0x[0-9a-f]+ <main\+\d+>:\s+str\s", out), out  # (the store, stepped)
    assert "Hardware read watchpoint 3" in out and f"Value = {first[7]}" in out, out
    same_results(tmp_path, plain_run)


@needs_gdb
def test_stop_on_exception_reports_the_svc_at_its_vector(tmp_path):
    run = Run([str(SORT)], tmp_path)
    out = gdb_batch(run, [
        f"file {FIRMWARE}", "monitor stop-on-exception on", "continue",
        show("esr", "$ESR_EL1"), show("pc", "$pc"), show("vbar", "$VBAR_EL1"),
        "monitor stop-on-exception off", "continue"])
    status, _, err = run.wait()
    assert status == 0, err + out
    assert "SIGTRAP" in out
    # The guest's first exception: SVC #0 from EL0 (ESR_ELx.EC 0x15, IL 1, imm16 0), taken to
    # the "lower EL, AArch64, synchronous" vector (Arm ARM D1.10.2: VBAR_EL1 + 0x400).
    assert values(out, "esr") == [0x56000000], out
    assert values(out, "pc") == [values(out, "vbar")[0] + 0x400], out


# -------------------------------------------------------------- the protocol, directly ----

class Client:
    """A minimal GDB remote protocol client (acknowledged mode)."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.buf = b""

    def _read_packet(self) -> bytes:
        while True:
            m = re.search(rb"\$([^#]*)#([0-9a-f]{2})", self.buf)
            if m:
                self.buf = self.buf[m.end():]
                assert sum(m.group(1)) & 0xFF == int(m.group(2), 16)
                self.sock.sendall(b"+")
                return m.group(1)
            data = self.sock.recv(65536)
            if not data:
                raise EOFError
            self.buf += data

    def ask(self, payload: bytes) -> bytes:
        self.sock.sendall(b"$%s#%02x" % (payload, sum(payload) & 0xFF))
        return self._read_packet()

    def send(self, payload: bytes) -> None:
        self.sock.sendall(b"$%s#%02x" % (payload, sum(payload) & 0xFF))


def test_protocol_target_xml_registers_memory_errors_ctrl_c_and_kill(tmp_path):
    run = Run([str(SORT)], tmp_path)
    c = Client(run.port)
    assert b"qXfer:features:read+" in c.ask(b"qSupported:swbreak+")
    xml = b""
    while True:
        part = c.ask(b"qXfer:features:read:target.xml:%x,200" % len(xml))
        xml += part[1:]
        if part[:1] == b"l":
            break
    root = ET.fromstring(xml)
    names = [r.get("name") for r in root.iter("reg")]
    assert names[:34] == [f"x{i}" for i in range(31)] + ["sp", "pc", "cpsr"]
    assert names[34:68] == [f"v{i}" for i in range(32)] + ["fpsr", "fpcr"]
    assert {"tpidr", "ESR_EL1", "VBAR_EL1", "PMBSR_EL1", "PMBPTR_EL1",
            "PMBLIMITR_EL1", "PMSICR_EL1"} <= set(names)
    assert [int(r.get("regnum")) for r in root.iter("reg")] == list(range(len(names)))
    assert c.ask(b"?") == b"S05"
    g = c.ask(b"g")
    assert len(g) == 2 * (33 * 8 + 4 + 32 * 16 + 4 + 4)
    pc_hex = g[2 * 8 * 32:2 * 8 * 33]                                 # register 32: pc
    pc = int.from_bytes(bytes.fromhex(pc_hex.decode()), "little")
    assert pc == symbol(FIRMWARE, "_start")
    assert c.ask(b"p20") == pc_hex
    with open(FIRMWARE, "rb") as f:   # (the firmware's first instruction, MMU off)
        first = next(ELFFile(f).iter_segments("PT_LOAD")).data()[:4]
    assert c.ask(b"m%x,4" % pc) == first.hex().encode()
    assert c.ask(b"m0,8") == b"E14"              # no RAM there: an error, the run goes on
    assert c.ask(b"m%x,4" % (1 << 63)) == b"E14"
    assert c.ask(b"vCont?") == b"vCont;c;C;s;S"
    assert c.ask(b"vCont;s").startswith(b"T05")
    assert c.ask(b"p20") == (pc + 4).to_bytes(8, "little").hex().encode()
    c.send(b"c")
    c.sock.sendall(b"\x03")                      # Ctrl-C: stops at a block boundary
    assert c._read_packet() == b"T02"            # (SIGINT)
    c.send(b"k")
    status, _, err = run.wait()
    assert status == 125 and "GDB killed the run" in err, err


@pytest.mark.parametrize("args", [["--mode", "reference"], ["--ground-truth"]])
def test_gdb_refuses_what_it_cannot_stop(tmp_path, args):
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from spe_emu.tools.cli import main; "
         "sys.argv[0] = 'spe-emu'; main()", "run", str(SORT), "--gdb", "0", *args, "-o",
         str(tmp_path)], capture_output=True, text=True, env=child.env(), timeout=60)
    assert done.returncode == 125
    assert done.stderr.startswith("spe-emu: error: --gdb") and done.stderr.count("\n") == 1


LINUX_SRC = r"""
#include <stdio.h>
volatile long counter;
__attribute__((noinline)) long work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++) {
		s += i;
		counter++;
	}
	return s;
}
int main(int argc, char **argv)
{
	printf("%ld\n", work(argc * 10));
	return 7;
}
"""


@needs_gdb
def test_linux_program_break_watch_and_exit_status(tmp_path):
    from linux_progs import build_static
    prog = build_static(LINUX_SRC, tmp_path / "work", "-g", "-O0")
    if prog is None:
        pytest.skip("no aarch64-linux-gnu-gcc with a static C library")
    run = Run([str(prog), "--", "a", "b"], tmp_path / "out")
    out = gdb_batch(run, [
        f"file {prog}", "break work", "continue", show("n", "n"),
        "watch counter", "continue", "continue", show("counter", "counter"),
        "delete", "continue"])
    status, stdout, err = run.wait()
    assert status == 7 and stdout == "435\n", err + out   # (0 + 1 + ... + 29)
    assert values(out, "n") == [30], out            # argc 3
    assert "Old value = 0\nNew value = 1\n" in out and "Old value = 1\nNew value = 2\n" in out
    assert values(out, "counter") == [2], out
    assert "exited with code 07" in out, out
