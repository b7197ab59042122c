"""Differential fuzzing: ``spe-emu decode`` against ``perf report -D`` on the same bytes.

Thousands of inputs (every header byte, every Operation Type subclass and Events bit,
seeded random bytes, and random mutations of a real trace of guests/sort.elf: byte and bit
flips, insertions, deletions, cuts, splices) are wrapped into one perf.data (one AUXTRACE
record each, by :mod:`spe_emu.tools.perfdata`) and dumped by one run of Debian's perf. Every
dump line must equal spe-emu's, except where the two differ on purpose:

``DIFFERENCES`` (perf 6.1's behaviour -> spe-emu's, and why):

* UNKNOWN: a header that is well formed by the D18.1.1 size rule but that no packet type
  allocates (e.g. 0x02-0x1F, 0x44, 0xB8, or an extended header 0x24-0x3F): perf prints
  ``Bad packet!`` and resumes one byte later; spe-emu skips the packet by the size its header
  encodes and prints ``UNKNOWN ...``, as D18.1.3 requires ("Software must ignore unknown
  packets, using the size field encoded in the header"). The comparison resumes where perf
  does.
* SIGNED: perf prints TS and DATA-SOURCE payloads with ``%lld`` (negative from bit 63 up);
  the architecture defines them as unsigned (the timestamp is a 64-bit count).
* LAT-INDEX: a Counter packet with an index other than 0-2: perf prints ``LAT n `` (index
  lost, trailing space); spe-emu prints ``LAT n (index)``.
* CONTEXT-INDEX: Context indexes 2 and 3 are reserved; perf prints them as ``el3``/``el4``,
  spe-emu prints the raw form ``CONTEXT 0x.. (index)``.
* ALIGNMENT: perf measures an Alignment command's fill from the host address at which it
  holds the bytes (and needs a whole alignment of bytes left), spe-emu from the offset in
  the Profiling Buffer (§5.3.2: the next protocol byte lands on the boundary). The
  comparison of an input stops at an Alignment command.

The native bulk decoder (spe_emu/native/decode.c) is held to the same lines: its dump of
every input equals the Python reference's.

Every other line, including ``Bad packet!`` resynchronisation on malformed and cut-off
packets and the newer fields (SVE operation types, ALIGNMENT and SVE predicate events,
unspecified-register and NV2 system-register loads/stores), must match byte for byte.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from spe_emu.tools.bulkdecode import dump_chunks
from spe_emu.tools.decode import decode_lines, dump_lines, format_line
from spe_emu.tools.perfdata import perf_data_bytes

from spe_fuzz import fuzz_inputs, sort_trace

ROOT = Path(__file__).resolve().parent.parent
PERF = shutil.which("perf")
pytestmark = pytest.mark.skipif(PERF is None, reason="perf (Debian linux-perf) not installed")

HEX_COLUMN = 62          # where the description starts in a dump line


def _perf_dumps(path: Path, cases: list[bytes]) -> list[list[str]]:
    path.write_bytes(perf_data_bytes(cases, []))
    out = subprocess.run([PERF, "report", "-D", "-i", str(path)], capture_output=True,
                         text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C"})
    assert out.returncode == 0, out.stderr
    blocks: list[list[str]] = []
    current = None
    for line in out.stdout.splitlines():
        if line.startswith(". ... ARM SPE data"):
            current = [line]
            blocks.append(current)
        elif current is not None and line.startswith(".  "):
            current.append(line)
        else:
            current = None
    return blocks


def _signed(text: str, name: str) -> str:
    value = int(text.split()[1])
    return f"{name} {value - (1 << 64) if value >> 63 else value}"


def _allowed_text_difference(ours: str, perf: str) -> str | None:
    """Which intentional difference explains ``ours`` != ``perf`` for the same bytes."""
    o, p = ours[HEX_COLUMN:], perf[HEX_COLUMN:]
    for name in ("TS", "DATA-SOURCE"):
        if o.startswith(name + " ") and _signed(o, name) == p:
            return "SIGNED"
    if o.startswith("LAT ") and o.endswith(")") and p == o[:o.rindex("(")]:
        return "LAT-INDEX"
    words = o.split()
    if words[:1] == ["OTHER"] and {"ASE", "FP"} & set(words):
        # FEAT_SPE_FPF flags (Operation Type, class Other, bits 2:1), which perf versions older
        # than its decoder support do not print
        if " ".join(w for w in words if w not in ("ASE", "FP")) == p:
            return "FPF-FLAGS"
    cr = {"CALL", "RET", "NOT-CALL-RET"} & set(words)
    if words[:1] == ["B"] and cr:
        # FEAT_SPE_CRR's CR field (class Branch, bits 4:3): older perf versions neither
        # print it nor see IND when it is nonzero
        if " ".join(w for w in words if w not in cr | {"IND"}) == p:
            return "CRR-FIELD"
    if o.startswith("CONTEXT ") and o.endswith(("(2)", "(3)")):
        idx = int(o[-2])
        if p == f"{o[:o.rindex(' (')]} el{idx + 1}":
            return "CONTEXT-INDEX"
    return None


def compare(data: bytes, perf_lines: list[str], seen: dict) -> None:
    """Walk spe-emu's and perf's dump of ``data`` together (see the module docstring)."""
    assert perf_lines[0] == f". ... ARM SPE data: size {len(data):#x} bytes"
    perf_iter = iter(perf_lines[1:])
    start = 0
    while True:
        restart = None
        for line in decode_lines(data[start:]):
            line = type(line)(line.offset + start, line.raw, line.text)
            ours = format_line(line)
            theirs = next(perf_iter, None)
            if line.raw[:1] and line.raw[0] & 0xE0 == 0x20 and line.raw[1:2] == b"\0":
                seen["ALIGNMENT"] = seen.get("ALIGNMENT", 0) + 1
                return
            if ours == theirs:
                continue
            assert theirs is not None, f"perf ended before {ours!r}"
            if line.text.startswith("UNKNOWN") and theirs.endswith(" Bad packet!") \
                    and theirs.startswith(f".  {line.offset:08x}:  {line.raw[0]:02x} "):
                seen["UNKNOWN"] = seen.get("UNKNOWN", 0) + 1
                restart = line.offset + 1
                break
            why = _allowed_text_difference(ours, theirs)
            assert why, f"input {data.hex()}:\n ours: {ours}\n perf: {theirs}"
            seen[why] = seen.get(why, 0) + 1
        if restart is None:
            assert next(perf_iter, None) is None
            return
        start = restart


def test_decode_agrees_with_perf_report_dump(tmp_path_factory, tmp_path):
    trace = sort_trace(tmp_path_factory)
    cases = [c + bytes(-len(c) % 8) for c in fuzz_inputs(trace)]   # perf.data pads to 8 bytes
    cases.append(trace + bytes(-len(trace) % 8))                 # and the whole real trace
    dumps = _perf_dumps(tmp_path / "fuzz.data", cases)
    assert len(dumps) == len(cases) > 5000
    seen: dict[str, int] = {}
    for data, lines in zip(cases, dumps):
        compare(data, lines, seen)
        # the native bulk decoder prints exactly the reference decoder's lines
        assert "".join(dump_chunks(data)).splitlines() == list(dump_lines(data))[1:]
    # every listed difference was met, and the inputs did exercise the shared rules
    base = {"UNKNOWN", "SIGNED", "LAT-INDEX", "CONTEXT-INDEX", "ALIGNMENT"}
    assert base <= set(seen) <= base | {"FPF-FLAGS", "CRR-FIELD"}, seen
    text = "\n".join(l for d in dumps for l in d)
    for word in ("Bad packet!", "SVE-OTHER EVLEN 2048 FP PRED", "ST EVLEN 128 PRED SG",
                 "EV ALIGNMENT", "SVE-PARTIAL-PRED", "SVE-EMPTY-PRED", "LD UNSPEC-REG",
                 "ST NV-SYSREG", "LD AT EXCL AR", "B COND IND", "PA 0x", "TGT 0x"):
        assert word in text, word
