"""FastAccess (the run loop's direct libunicorn reads) returns what the binding's own
reg_read / cpr_read / mem_read return."""

from unicorn import UC_ARCH_ARM64, UC_MODE_ARM, UC_PROT_ALL, Uc
from unicorn import arm64_const as A

from spe_emu.arch.context import CONTEXTIDR_EL1, HCR_EL2, MDCR_EL2, MDCR_EL3
from spe_emu.cpu.exceptions import PSTATE
from spe_emu.cpu.fastuc import FastAccess


def engine() -> Uc:
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    uc.mem_map(0x1000, 0x1000, UC_PROT_ALL)
    return uc


def test_cpr_reads_what_cpr_write_wrote():
    uc = engine()
    fast = FastAccess(uc)
    values = {MDCR_EL3: MDCR_EL3.make(NSPB=0b11), HCR_EL2: HCR_EL2.make(RW=1),
              MDCR_EL2: MDCR_EL2.make(E2PB=0b11), CONTEXTIDR_EL1: 0xDEADBEEF}
    for spec, value in values.items():
        uc.cpr_write(*spec.encoding.tuple, value)
    for spec, value in values.items():
        assert fast.cpr(spec.encoding.tuple) == uc.cpr_read(*spec.encoding.tuple) == value, \
            spec.name
    # the same buffer serves every register: a later read does not see an earlier value
    uc.cpr_write(*CONTEXTIDR_EL1.encoding.tuple, 0)
    assert fast.cpr(MDCR_EL3.encoding.tuple) == values[MDCR_EL3]
    assert fast.cpr(CONTEXTIDR_EL1.encoding.tuple) == 0


def test_reg_regs_and_memory():
    uc = engine()
    fast = FastAccess(uc)
    uc.reg_write(A.UC_ARM64_REG_X3, 0x1122334455667788)
    nzcv = PSTATE.make(Z=1, C=1)
    uc.reg_write(A.UC_ARM64_REG_NZCV, nzcv)
    assert fast.reg(A.UC_ARM64_REG_X3) == 0x1122334455667788
    assert fast.regs((A.UC_ARM64_REG_X3, A.UC_ARM64_REG_NZCV)) == {
        A.UC_ARM64_REG_X3: 0x1122334455667788, A.UC_ARM64_REG_NZCV: nzcv}
    fast.write(0x1010, bytes.fromhex("1f2003d5aabb"))
    assert fast.word(0x1010) == 0xD503201F
    assert fast.read(0x1010, 6) == bytes(uc.mem_read(0x1010, 6))


def test_writes_and_snapshot_agree_with_the_binding():
    uc = engine()
    fast = FastAccess(uc)
    fast.set_reg(A.UC_ARM64_REG_X5, 0x8000_0000_0000_0001)
    fast.set_cpr(MDCR_EL2.encoding.tuple, MDCR_EL2.make(E2PB=0b11))
    fast.set_cpr(CONTEXTIDR_EL1.encoding.tuple, 0x1234)
    assert uc.reg_read(A.UC_ARM64_REG_X5) == 0x8000_0000_0000_0001
    assert uc.cpr_read(*MDCR_EL2.encoding.tuple) == MDCR_EL2.make(E2PB=0b11)
    encs = (MDCR_EL2.encoding.tuple, CONTEXTIDR_EL1.encoding.tuple)
    ids = (A.UC_ARM64_REG_X5, A.UC_ARM64_REG_PSTATE)
    assert fast.snapshot(ids, encs) == (0x8000_0000_0000_0001, uc.reg_read(A.UC_ARM64_REG_PSTATE),
                                        MDCR_EL2.make(E2PB=0b11), 0x1234)
    # the buffers are reused: a second snapshot sees the new values
    uc.reg_write(A.UC_ARM64_REG_X5, 7)
    uc.cpr_write(*CONTEXTIDR_EL1.encoding.tuple, 0)
    assert fast.snapshot(ids, encs)[::3] == (7, 0)
