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

Every other line, including ``Bad packet!`` resynchronisation on malformed and cut-off
packets and the newer fields (SVE operation types, ALIGNMENT and SVE predicate events,
unspecified-register and NV2 system-register loads/stores), must match byte for byte.
"""

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from spe_emu.session import RunOptions, run_image
from spe_emu.spe.packets import iter_records
from spe_emu.tools.decode import dump_lines, format_line, decode_lines
from spe_emu.tools.perfdata import perf_data_bytes

ROOT = Path(__file__).resolve().parent.parent
PERF = shutil.which("perf")
pytestmark = pytest.mark.skipif(PERF is None, reason="perf (Debian linux-perf) not installed")

SEED = 17
N_RANDOM = 1000
N_MUTATED = 3000
HEX_COLUMN = 62          # where the description starts in a dump line


def _sort_trace(tmp_path_factory) -> bytes:
    out = tmp_path_factory.mktemp("sorttrace")
    run_image(ROOT / "guests" / "sort.elf", RunOptions(outdir=out, interval=1024))
    return (out / "spe.trace").read_bytes()


def _inputs(trace: bytes) -> list[bytes]:
    rng = random.Random(SEED)
    tail = bytes(range(1, 17))
    cases = [bytes([h]) + tail for h in range(256)]
    cases += [bytes([0x20 | lo, b1]) + tail for lo in range(32) for b1 in (0x01, 0x55, 0xB0,
                                                                           0xB7, 0x98, 0x9F)]
    cases += [bytes([cls, sub]) for cls in (0x48, 0x49, 0x4A, 0x4B) for sub in range(256)]
    cases += [bytes([0x72]) + (1 << b).to_bytes(8, "little") for b in range(64)]
    cases += [bytes([0x71, 0x73][i]) + bytes([0xFF] * 8) for i in range(2)]
    cases += [bytes([0x64 | i]) + bytes(range(4)) for i in range(4)]
    cases += [bytes([h]) + bytes([0xF0, 0xFF]) for h in range(0x98, 0xA0)]
    cases += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 120)))
              for _ in range(N_RANDOM)]
    recs = [trace[r.offset:r.offset + r.length] for r in iter_records(trace)]
    for _ in range(N_MUTATED):
        i = rng.randrange(len(recs) - 4)
        case = bytearray(b"".join(recs[i:i + rng.randrange(1, 5)]))
        for _ in range(rng.randrange(1, 4)):
            op = rng.randrange(6)
            at = rng.randrange(len(case) + 1)
            if op == 0 and case:                       # byte replaced
                case[min(at, len(case) - 1)] = rng.randrange(256)
            elif op == 1 and case:                     # bit flipped
                case[min(at, len(case) - 1)] ^= 1 << rng.randrange(8)
            elif op == 2:                              # random bytes inserted
                case[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4)))
            elif op == 3:                              # bytes deleted
                del case[at:at + rng.randrange(1, 4)]
            elif op == 4:                              # cut off
                del case[at:]
            else:                                      # spliced with another record
                case[at:at] = recs[rng.randrange(len(recs))]
        if case:
            cases.append(bytes(case))
    return cases


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
    trace = _sort_trace(tmp_path_factory)
    cases = [c + bytes(-len(c) % 8) for c in _inputs(trace)]   # perf.data pads to 8 bytes
    cases.append(trace + bytes(-len(trace) % 8))                 # and the whole real trace
    dumps = _perf_dumps(tmp_path / "fuzz.data", cases)
    assert len(dumps) == len(cases) > 5000
    seen: dict[str, int] = {}
    for data, lines in zip(cases, dumps):
        compare(data, lines, seen)
    # every listed difference was met, and the inputs did exercise the shared rules
    assert set(seen) == {"UNKNOWN", "SIGNED", "LAT-INDEX", "CONTEXT-INDEX", "ALIGNMENT"}, seen
    text = "\n".join(l for d in dumps for l in d)
    for word in ("Bad packet!", "SVE-OTHER EVLEN 2048 FP PRED", "ST EVLEN 128 PRED SG",
                 "EV ALIGNMENT", "SVE-PARTIAL-PRED", "SVE-EMPTY-PRED", "LD UNSPEC-REG",
                 "ST NV-SYSREG", "LD AT EXCL AR", "B COND IND", "PA 0x", "TGT 0x"):
        assert word in text, word
