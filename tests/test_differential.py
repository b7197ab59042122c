"""Fast path == reference mode (issue 3): for every guest, several seeds, intervals (with RND),
filters, EL0-only profiling (EL0/EL1 transitions), buffer-full interrupts and records built
natively (with Context packets, physical addresses, a small locality model), the native run
loop and the per-instruction oracle leave byte-identical Profiling Buffers and traces, the same
PMBSR_EL1 / PMBPTR_EL1 / PMSICR_EL1, the same population and the same guest state -- and the
same guest-visible Profiling Buffer at every synchronisation point on the way: each PSB CSYNC
executed with profiling enabled (after which a load must read every earlier record, SPE
supplement §3.6) and each trapped PMS*/PMB* access.

Each run stops after the same instruction budget (the oracle runs at ~0.2 MIPS), so the
comparison is of the complete machine state at that instruction."""

import hashlib
from pathlib import Path

import pytest
from unicorn import arm64_const as A

from spe_emu.errors import GuestRunaway
from spe_emu.session import BUFFER_BASE, RunOptions, prepare_machine
from spe_emu.spe.config import SpeConfig

GUESTS = sorted(p.stem for p in Path(__file__).resolve().parents[1].glob("guests/*.elf"))
BUDGET = 160_000
CONFIGS = {
    # interval 256, small buffer: several PMBIRQs and IRQ handler runs at EL1
    "irq": dict(opts=dict(interval=256, buffer_size=4096), spe={}),
    # RND with a per-guest seed, EL0 only: every exception entry/return changes profiling
    "rnd-el0": dict(opts=dict(interval=512, random=True, el1=False, buffer_size=4096), spe={}),
    # secondary counter (ERnd = 1), type + latency filters, CONTEXTIDR collection
    "ernd-filters": dict(opts=dict(interval=256, random=True, filters=("load", "branch"),
                                   min_latency=3, context=True, buffer_size=8192),
                         spe=dict(ernd=1)),
    # fixed interval, so records are built natively (record.c): a small locality model (LRU
    # evictions), 64-byte padding, no not-taken targets, End packets
    "native-model": dict(opts=dict(interval=256, timestamps=False, buffer_size=8192),
                         spe=dict(l1d_lines=8, llc_lines=64, tlb_entries=4, align_code=6,
                                  not_taken_target=False)),
    # Context packets in every native record; loads/stores with Physical Address packets
    # (record.c asks Machine._translate for each data page once)
    "context-pa": dict(opts=dict(interval=512, context=True, physical=True, buffer_size=8192),
                       spe={}),
    # what Linux's perf asks for with load_filter, store_filter, branch_filter, pa_enable:
    # PMSFCR_EL1.FT's OR filter of B, LD, ST applied natively, the model seeing every sample
    "perf-types-pa": dict(opts=dict(interval=256, filters=("load", "store", "branch"),
                                    physical=True, context=True, buffer_size=8192), spe={}),
    # model_feed "every": every data access updates a set-associative model with an L2 (by
    # PA, through the native memory hook in both loops); each sample taken in front of its
    # instruction reads it
    "model-every": dict(opts=dict(interval=256, buffer_size=8192),
                        spe=dict(model_feed="every", l1d_lines=64, l1d_ways=4, l2_lines=256,
                                 l2_ways=8, llc_lines=1024, llc_ways=16, tlb_entries=16,
                                 tlb_ways=4, lds=1)),
    # FEAT_SPE_PBT: every record's previous branch target (records built in Python, samples
    # not captured natively), across exception entries and returns
    "pbt": dict(opts=dict(interval=256, buffer_size=8192),
                spe=dict(pbt=1, pmsver=3, fne=1, max_size_code=7)),
}


def run(guest: str, mode: str, config: str, seed: int, outdir: Path) -> dict:
    spec = CONFIGS[config]
    opts = RunOptions(seed=seed, mode=mode, outdir=outdir, max_insns=BUDGET,
                      spe=SpeConfig(**spec["spe"]), **spec["opts"])
    m = prepare_machine(Path(__file__).resolve().parents[1] / "guests" / f"{guest}.elf", opts)
    sync_points = []

    def observe(kind: str, index: int) -> None:
        buf = bytes(m.uc.mem_read(BUFFER_BASE, opts.buffer_size))
        sync_points.append((kind, index, hashlib.sha256(buf).hexdigest()))

    m.sync_observer = observe
    with pytest.raises(GuestRunaway):
        m.run()
    regs = m.uc.reg_read_batch([A.UC_ARM64_REG_X0 + i for i in range(29)]
                               + [A.UC_ARM64_REG_X29, A.UC_ARM64_REG_X30, A.UC_ARM64_REG_SP,
                                  A.UC_ARM64_REG_PC, A.UC_ARM64_REG_NZCV,
                                  A.UC_ARM64_REG_PSTATE])
    trace = outdir / "spe.trace"
    m.semihost.close_all()
    return {
        "instructions": m.insns(),
        "registers": regs,
        "buffer": bytes(m.uc.mem_read(BUFFER_BASE, opts.buffer_size)),
        "trace": trace.read_bytes() if trace.exists() else b"",
        "PMBSR_EL1": m.spu.regs["PMBSR_EL1"],
        "PMBPTR_EL1": m.spu.regs["PMBPTR_EL1"],
        "PMSICR_EL1": m.spu.interval.value,
        "population": m.spu.stats.population,
        "samples": m.spu.stats.samples,
        "filtered": m.spu.stats.filtered_out,
        "records": m.spu.stats.records_written,
        "irqs": m.irqs_taken,
        "console": m.semihost.console_output,
        "sync points": sync_points,
    }


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("guest", GUESTS)
def test_fast_path_matches_reference(tmp_path, guest, config):
    seed = 1 + GUESTS.index(guest) * 7 + sorted(CONFIGS).index(config)
    fast = run(guest, "fast", config, seed, tmp_path / "fast")
    ref = run(guest, "reference", config, seed, tmp_path / "ref")
    assert fast["instructions"] == ref["instructions"] == BUDGET
    assert fast["samples"] > 50
    assert len(fast["sync points"]) >= 5  # (PMS*/PMB* accesses of the start and of each IRQ)
    if config == "irq":
        assert fast["irqs"] >= 1
    if config == "perf-types-pa":
        assert 0 < fast["filtered"] < fast["samples"]
    for key in fast:
        assert fast[key] == ref[key], f"{key} differs between fast path and reference"
