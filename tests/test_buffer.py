"""Profiling Buffer writes and management events (SPE §3.5, §3.5.2, §3.5.3)."""

from spe_emu.arch.faults import TranslationFault
from spe_emu.spe.buffer import ProfilingBuffer
from spe_emu.spe.config import SpeConfig
from spe_emu.spe.registers import spe_registers

CFG = SpeConfig()          # MaxSize 64 bytes
T = spe_registers(CFG)


def make(base=0x1000, size=0x1000, fault_at=None):
    regs = T.reset_values()
    regs["PMBPTR_EL1"] = base
    regs["PMBLIMITR_EL1"] = (base + size) | 1
    mem = {}

    def write(va, data):
        if fault_at is not None and va <= fault_at < va + len(data):
            raise TranslationFault(fault_at)
        for i, b in enumerate(data):
            mem[va + i] = b
    return ProfilingBuffer(regs, T, CFG, write), regs, mem


def test_record_is_written_at_pmbptr_and_pointer_advances():
    buf, regs, mem = make()
    buf.write_record(b"\x01\x02\x03")
    assert [mem[0x1000 + i] for i in range(3)] == [1, 2, 3]
    assert regs["PMBPTR_EL1"] == 0x1003
    assert regs["PMBSR_EL1"] == 0


def test_buffer_full_event_after_maxsize_rule():
    buf, regs, mem = make()
    rec = bytes(range(40))
    n = 0
    while regs["PMBSR_EL1"] == 0:
        buf.write_record(rec)
        n += 1
    # 4096-byte buffer, 40-byte records: event once fewer than 64 bytes remain (§3.5.2).
    assert n == (4096 - 64) // 40 + 1
    assert regs["PMBPTR_EL1"] == 0x1000 + 40 * n            # after the last complete record
    # S = 1, EC = 0 (other), MSS.BSC = 1 (buffer filled), DL = 0.
    assert regs["PMBSR_EL1"] == (1 << 17) | 1
    assert max(mem) < 0x2000                                 # never at or past the limit


def test_record_that_does_not_fit_is_not_written():
    # §3.4.1 broken at enable: buffer full, DL = 0 by default (no byte reached memory,
    # PMBPTR_EL1 unchanged), DL = 1 with SpeConfig.no_space_data_loss.
    for data_loss in (False, True):
        buf, regs, mem = make()
        if data_loss:
            buf = ProfilingBuffer(regs, T, SpeConfig(no_space_data_loss=True), buf.write_va)
        regs["PMBPTR_EL1"] = 0x2000 - 10
        buf.write_record(bytes(20))
        assert not mem
        assert regs["PMBSR_EL1"] == (data_loss << 19) | (1 << 17) | 1
        assert regs["PMBPTR_EL1"] == 0x2000 - 10


def test_translation_fault_is_a_stage1_abort_event():
    buf, regs, mem = make(fault_at=0x1000)
    buf.write_record(bytes(8))
    # EC = 0b100100 (stage 1 Data Abort on write), S = 1, FSC = translation fault level 3.
    assert regs["PMBSR_EL1"] == (0b100100 << 26) | (1 << 17) | 0b000111
    assert regs["PMBPTR_EL1"] == 0x1000


def test_partial_record_before_fault_sets_dl():
    buf, regs, mem = make(fault_at=0x2000, size=0x2000)
    regs["PMBPTR_EL1"] = 0x2000 - 4
    buf.write_record(bytes(8))
    assert regs["PMBSR_EL1"] & (1 << 19)
    assert regs["PMBPTR_EL1"] == 0x2000


def test_alignment_pads_records():
    cfg = CFG.with_(align_code=3)
    t = spe_registers(cfg)
    regs = t.reset_values()
    regs["PMBPTR_EL1"], regs["PMBLIMITR_EL1"] = 0x1000, 0x2001
    mem = {}
    buf = ProfilingBuffer(regs, t, cfg, lambda va, d: mem.update({va + i: b for i, b in
                                                                  enumerate(d)}))
    buf.write_record(b"\x01\x02\x03")
    assert regs["PMBPTR_EL1"] == 0x1008 and mem[0x1007] == 0   # padding packets (0x00)


def test_batch_write_equals_record_by_record_writes():
    # Records crossing a page boundary, with alignment padding (Align = 6: 64 bytes).
    cfg = SpeConfig(align_code=6)
    records = [bytes(range(1, 1 + n)) for n in (40, 7, 64, 65, 3)]
    out = []
    for batch in (False, True):
        regs = T.reset_values()
        regs["PMBPTR_EL1"] = 0x1F40
        regs["PMBLIMITR_EL1"] = 0x4000 | 1
        mem = {}
        writes = []

        def write(va, data, mem=mem, writes=writes):
            writes.append((va, len(data)))
            for i, b in enumerate(data):
                mem[va + i] = b
        buf = ProfilingBuffer(regs, T, cfg, write)
        if batch:
            assert buf.write_records(records) == 64 * 6
            assert all((va & 0xFFF) + n <= 0x1000 for va, n in writes)   # page by page
        else:
            for r in records:
                assert buf.write_record(r)[1] is None
        out.append((mem, regs["PMBPTR_EL1"], regs["PMBSR_EL1"]))
    assert out[0] == out[1]
    assert out[1][1] == 0x1F40 + 64 * 6


def test_batch_write_refuses_what_would_raise_an_event():
    buf, regs, mem = make()
    regs["PMBPTR_EL1"] = 0x2000 - 64 - 40      # 40 bytes would leave 64: fine; 41 would not
    assert buf.write_records([bytes(41)]) is None
    assert not mem and regs["PMBPTR_EL1"] == 0x2000 - 104 and regs["PMBSR_EL1"] == 0
    assert buf.write_records([bytes(40)]) == 40
