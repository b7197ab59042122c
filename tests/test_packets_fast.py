"""The fast byte encoders used by the record builder equal the canonical encoder (§5.3)."""

from hypothesis import given
from hypothesis import strategies as st

import spe_emu.spe.packets as P

u64 = st.integers(0, 2**64 - 1)


@given(st.sampled_from([P.ADDR_PC, P.ADDR_BRANCH_TARGET]), u64, st.integers(0, 3),
       st.integers(0, 1))
def test_instruction_address(index, addr, el, ns):
    assert P.instruction_address_bytes(index, addr, el, ns) == P.encode(
        P.address_packet(index, addr, el=el, ns=ns))


@given(u64, st.integers(0, 1))
def test_data_addresses(addr, ns):
    assert P.data_va_bytes(addr) == P.encode(P.address_packet(P.ADDR_DATA_VA, addr))
    assert P.data_pa_bytes(addr, ns) == P.encode(P.address_packet(P.ADDR_DATA_PA, addr, ns=ns))


@given(st.sampled_from([P.COUNTER_TOTAL, P.COUNTER_ISSUE, P.COUNTER_XLAT]),
       st.integers(0, 100000))
def test_counter(index, value):
    assert P.counter_bytes(index, value) == P.encode(P.counter_packet(index, value))


@given(u64.map(lambda b: b & ~P.EVENTS_RAZ_MASK))
def test_events(bits):
    assert P.events_bytes(bits) == P.encode(P.events_packet(bits))


@given(st.sampled_from([(0, 0), (0, 1), (1, 0), (1, 1), (1, 4), (1, 5), (1, 0x12), (1, 0x0A),
                        (2, 0), (2, 1), (2, 2), (2, 3)]))
def test_op_type(cs):
    assert P.op_type_bytes(*cs) == P.encode(P.op_type_packet(*cs))


@given(st.sampled_from([P.CONTEXT_EL1, P.CONTEXT_EL2]), st.integers(0, 2**32 - 1), u64)
def test_context_timestamp_end(index, value, ts):
    assert P.context_bytes(index, value) == P.encode(P.context_packet(index, value))
    assert P.timestamp_bytes(ts) == P.encode(P.timestamp_packet(ts))
    assert P.END_BYTES == P.encode(P.end_packet()) == b"\x01"
