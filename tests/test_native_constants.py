"""The constants spe_emu.native mirrors from spe_native.h (the C side's one declaration) hold
the header's values: every ``#define SPE_<NAME> <number>`` with a Python ``native.<NAME>`` has
the same value (a tuple of names: as many names), and the per-PC ground-truth counts are
named in the order of SPE_GTE_*."""

from __future__ import annotations

import re

from spe_emu import native
from spe_emu.native.sources import HEADER

DEFINE = re.compile(r"^#define SPE_([A-Z0-9_]+)\s+\(?(~?0?x?[0-9A-Fa-f]+)(ull|u)?\)?\s*(/\*|$)",
                    re.M)


def header_values() -> dict[str, int]:
    out = {}
    for name, text, _, _ in DEFINE.findall(HEADER.read_text()):
        value = ~int(text[1:], 0) & (1 << 64) - 1 if text.startswith("~") else int(text, 0)
        out[name] = value
    return out


def test_python_mirrors_hold_the_header_values():
    values = header_values()
    mirrored = {name: v for name, v in values.items() if hasattr(native, name)}
    # (among them the model's branch kinds, the capture's "no outcome" and the encodings)
    assert {"BR_COND", "BR_CALL", "BR_ERET", "FED_NONE", "ENCODINGS", "GTE_COUNTS",
            "OUT_LEVEL_SHIFT", "REC_XLATE", "CAP_MAX"} <= set(mirrored)
    # (a tuple of names mirrors a count: MODEL_STATS)
    python = {name: getattr(native, name) for name in mirrored}
    assert {name: len(v) if isinstance(v, tuple) else v for name, v in python.items()} \
        == mirrored


def test_ground_truth_counts_follow_the_header():
    values = header_values()
    header_names = {"ops": "GTE_OPS", "l1d_refill": "GTE_L1D_REFILL",
                    "llc_access": "GTE_LLC_ACCESS", "llc_miss": "GTE_LLC_MISS",
                    "tlb_walk": "GTE_WALK", "branches": "GTE_BRANCHES",
                    "mispredicted": "GTE_MISPRED", "faulted": "GTE_FAULTED"}
    assert [values[header_names[n]] for n in native.GT_EVENTS] == list(range(len(
        native.GT_EVENTS)))
    assert len(native.GT_EVENTS) == values["GTE_COUNTS"]
