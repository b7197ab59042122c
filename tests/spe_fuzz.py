"""Inputs for the decoder fuzz tests: every header byte, every Operation Type subclass and
Events bit, seeded random bytes, and seeded random mutations of a real trace of
guests/sort.elf (byte and bit flips, insertions, deletions, cuts, splices)."""

import random
from pathlib import Path

from spe_emu.session import RunOptions, run_image
from spe_emu.spe.packets import Record, iter_records
from spe_emu.tools import bulkdecode as ND

ROOT = Path(__file__).resolve().parent.parent
SEED = 17
N_RANDOM = 1000
N_MUTATED = 3000


def sort_trace(tmp_path_factory) -> bytes:
    out = tmp_path_factory.mktemp("sorttrace")
    run_image(ROOT / "guests" / "sort.elf", RunOptions(outdir=out, interval=1024))
    return (out / "spe.trace").read_bytes()


def fuzz_inputs(trace: bytes) -> list[bytes]:
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


# Record field -> (column of bulkdecode.scan_array's rows, element of an array column or
# None, the HAS_* bit that says the record has the field; 0: always present)
ROW_FIELDS = {
    "offset": ("offset", None, 0), "length": ("length", None, 0),
    "pc": ("pc", None, ND.HAS_PC), "el": ("el", None, ND.HAS_PC), "ns": ("ns", None, ND.HAS_PC),
    "branch_target": ("target", None, ND.HAS_TARGET),
    "target_el": ("target_el", None, ND.HAS_TARGET),
    "target_ns": ("target_ns", None, ND.HAS_TARGET),
    "data_va": ("va", None, ND.HAS_VA), "data_va_tag": ("va_tag", None, ND.HAS_VA),
    "data_pa": ("pa", None, ND.HAS_PA), "pa_ns": ("pa_ns", None, ND.HAS_PA),
    "op_class": ("op_class", None, ND.HAS_OP), "op_subclass": ("op_subclass", None, ND.HAS_OP),
    "events": ("events", None, 0),
    "latency_total": ("latency", 0, ND.HAS_LAT0), "latency_issue": ("latency", 1, ND.HAS_LAT1),
    "latency_xlat": ("latency", 2, ND.HAS_LAT2),
    "timestamp": ("timestamp", None, ND.HAS_TS),
    "context": ("context", 0, ND.HAS_CTX0), "context_el2": ("context", 1, ND.HAS_CTX1),
    "data_source": ("data_source", None, ND.HAS_DS)}


def rows_as_records(rows) -> list[Record]:
    """The Records (``packets`` left empty) of :func:`spe_emu.tools.bulkdecode.scan_array`'s
    rows: a field whose HAS_* bit is clear is None, as Record has it."""
    present = rows["present"].tolist()
    cols = []
    for column, i, bit in ROW_FIELDS.values():
        values = (rows[column] if i is None else rows[column][:, i]).tolist()
        cols.append(values if not bit else
                    [v if has & bit else None for v, has in zip(values, present)])
    return [Record(**dict(zip(ROW_FIELDS, row)), packets=[]) for row in zip(*cols)]
