"""Golden bytes for each record kind, built by hand from the SPE §5 encodings, and the
documented event/latency model (docs/model.md)."""

import struct
from types import SimpleNamespace

from spe_emu.spe.config import SpeConfig
from spe_emu.spe.filters import OpType
from spe_emu.spe.records import RecordBuilder, Sample


def info(**kw):
    base = dict(op_class=0, op_subclass=0, is_load=False, is_store=False, is_atomic=False,
                is_branch=False, is_indirect=False, is_conditional=False, is_eret=False,
                mnemonic_class="x", word=0)
    return SimpleNamespace(**{**base, **kw})


def addr(header, value, el=None, ns=None, top=0):
    """Address packet: short header 0xB0|index, 64-bit payload; byte 7 holds NS<<7 | EL<<5
    for instruction addresses (§5.3.1)."""
    payload = value & ((1 << 56) - 1)
    if el is not None:
        payload |= (ns << 63) | (el << 61)
    else:
        payload |= top << 56
    return bytes([header]) + struct.pack("<Q", payload)


def counter(index, value):
    return bytes([0x98 | index]) + struct.pack("<H", value)      # §5.3.4 short header


def ts(value):
    return b"\x71" + struct.pack("<Q", value)                     # §5.3.10


def test_load_record_golden_bytes():
    b = RecordBuilder(SpeConfig(model_feed="sampled"))   # (records feed the model)
    s = Sample(pc=0x4800_1234, el=0, ns=1, info=info(op_class=1, op_subclass=0x00,
                                                     is_load=True), data_va=0x4810_0008,
               timestamp=1000)
    built = b.build(s)
    # Fresh model: TLB walk, L1D refill, LLC miss. Events: RETIRED(1) L1D-ACCESS(2)
    # L1D-REFILL(3) TLB-ACCESS(4) TLB-WALK(5) LLC-ACCESS(8) LLC-MISS(9) -> halfword (0x52).
    events = (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 8) | (1 << 9)
    expected = (addr(0xB0, 0x4800_1234, el=0, ns=1)
                + bytes([0x49, 0x00])                              # Op Type LD/ST, GP load
                + addr(0xB2, 0x4810_0008)                          # data VA
                + b"\x52" + struct.pack("<H", events)
                + counter(0, 1 + 120 + 29) + counter(1, 1) + counter(2, 30)
                + ts(1000))
    assert built.data == expected
    assert built.total_latency == 150
    assert built.optypes == frozenset({OpType.LOAD})
    # Second access to the same line and page: hits everywhere.
    s2 = Sample(pc=0x4800_1238, el=0, ns=1, info=info(op_class=1, op_subclass=0x01,
                                                      is_store=True), data_va=0x4810_0010)
    built2 = b.build(s2)
    assert built2.data == (addr(0xB0, 0x4800_1238, el=0, ns=1) + bytes([0x49, 0x01])
                           + addr(0xB2, 0x4810_0010) + b"\x42" + bytes([0b10110])
                           + counter(0, 2) + counter(1, 1) + counter(2, 1) + b"\x01")


def test_branch_record_golden_bytes():
    b = RecordBuilder(SpeConfig(model_feed="sampled"))   # (records feed the model)
    # Conditional direct branch, taken: gshare's counters start weakly taken: predicted.
    s = Sample(pc=0x4800_0100, el=1, ns=1, info=info(op_class=2, op_subclass=0b01,
                                                     is_branch=True, is_conditional=True),
               branch_taken=True, branch_target=0x4800_00F0, target_el=1, target_ns=1,
               cond_passed=True)
    assert b.build(s).data == (addr(0xB0, 0x4800_0100, el=1, ns=1) + bytes([0x4A, 0x01])
                               + addr(0xB1, 0x4800_00F0, el=1, ns=1) + b"\x42\x02"
                               + counter(0, 2) + counter(1, 1) + b"\x01")
    # The same branch not taken: NOT-TAKEN (E[6]); the history has moved on to another
    # counter, weakly taken: MISPREDICTED (E[7]), TOT + mispredict_penalty.
    s = Sample(pc=0x4800_0100, el=0, ns=1, info=info(op_class=2, op_subclass=0b01,
                                                     is_branch=True, is_conditional=True),
               branch_taken=False, branch_target=0x4800_0200, target_el=0, cond_passed=False)
    assert b.build(s).data == (addr(0xB0, 0x4800_0100, el=0, ns=1) + bytes([0x4A, 0x01])
                               + addr(0xB1, 0x4800_0200, el=0, ns=1) + b"\x42"
                               + bytes([(1 << 7) | (1 << 6) | (1 << 1)]) + counter(0, 12)
                               + counter(1, 1) + b"\x01")


def test_other_and_exception_records():
    b = RecordBuilder(SpeConfig(model_feed="sampled"))   # (records feed the model)
    s = Sample(pc=0x4800_0004, el=0, ns=1, info=info(op_class=0, op_subclass=0x01),
               cond_passed=False, context=0x1234)
    assert b.build(s).data == (b"\x64" + struct.pack("<I", 0x1234)     # Context, CONTEXTIDR_EL1
                               + addr(0xB0, 0x4800_0004, el=0, ns=1) + bytes([0x48, 0x01])
                               + b"\x42" + bytes([(1 << 6) | (1 << 1)])
                               + counter(0, 2) + counter(1, 1) + b"\x01")
    # SVC: EXCEPTION-GEN (E[0]) and RETIRED (E[1]).
    s = Sample(pc=0x4800_0008, el=0, ns=1, info=info(), exception=True)
    assert b.build(s).data == (addr(0xB0, 0x4800_0008, el=0, ns=1) + bytes([0x48, 0x00])
                               + b"\x42\x03" + counter(0, 2) + counter(1, 1) + b"\x01")


def test_records_fit_maxsize():
    b = RecordBuilder(SpeConfig(model_feed="sampled"))   # (records feed the model)
    s = Sample(pc=1, el=1, ns=1, info=info(op_class=1, is_load=True), data_va=8, data_pa=8,
               timestamp=5, context=1, context2=2)
    assert len(b.build(s).data) <= SpeConfig().max_record_bytes
