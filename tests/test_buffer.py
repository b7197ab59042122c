"""Profiling Buffer writes and management events (SPE §3.5, §3.5.2, §3.5.3)."""

from spe_emu.spe.buffer import ProfilingBuffer, TranslationFault
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


def test_record_that_does_not_fit_is_lost_with_dl():
    buf, regs, mem = make()
    regs["PMBPTR_EL1"] = 0x2000 - 10
    buf.write_record(bytes(20))
    assert not mem
    assert regs["PMBSR_EL1"] == (1 << 19) | (1 << 17) | 1
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
