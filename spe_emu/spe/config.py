"""IMPLEMENTATION DEFINED and CONSTRAINED UNPREDICTABLE choices of the modelled SPU.

Wherever the SPE supplement (DDI 0586A) leaves a choice to the implementation, spe_emu makes it
an explicit, documented field of :class:`SpeConfig` with a sensible default. Nothing here is
guessed silently: each field names the section it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ..errors import ConfigError

# PMSIDR_EL1.Interval encodings -> recommended minimum interval in operations (§4.3.11).
INTERVAL_CODES = {0b0000: 256, 0b0010: 512, 0b0011: 768, 0b0100: 1024, 0b0101: 1536,
                  0b0110: 2048, 0b0111: 3072, 0b1000: 4096}
PMSVER_NI = 0b0000
PMSVER_SPE = 0b0001
"""ID_AA64DFR0_EL1.PMSVer: SPE not implemented; FEAT_SPE (Arm ARM D19.2 ID_AA64DFR0_EL1)."""
PMSVER_V1P1, PMSVER_V1P2, PMSVER_V1P3, PMSVER_V1P4 = 0b0010, 0b0011, 0b0100, 0b0101
"""ID_AA64DFR0_EL1.PMSVer of FEAT_SPEv1p1 .. FEAT_SPEv1p4 (Arm ARM D19.2; Linux
arch/arm64/tools/sysreg ``ID_AA64DFR0_EL1.PMSVer`` V1P1..V1P4)."""
PMSVER_NAMES = {PMSVER_NI: "not implemented", PMSVER_SPE: "FEAT_SPE",
                PMSVER_V1P1: "FEAT_SPEv1p1", PMSVER_V1P2: "FEAT_SPEv1p2",
                PMSVER_V1P3: "FEAT_SPEv1p3", PMSVER_V1P4: "FEAT_SPEv1p4"}
COUNT_SIZE_12BIT_SAT = 0b0010
"""PMSIDR_EL1.CountSize: 12-bit saturating counters (§4.3.11)."""
COUNT_SIZE_16BIT_SAT = 0b0011
"""PMSIDR_EL1.CountSize: 16-bit saturating counters (Arm ARM PMSIDR_EL1.CountSize)."""
COUNT_SIZE_BITS = {COUNT_SIZE_12BIT_SAT: 12, COUNT_SIZE_16BIT_SAT: 16}
MAX_SIZE_CODES = range(0b0100, 0b1011 + 1)
"""PMSIDR_EL1.MaxSize encodings: records of at most 2**code bytes, 16 B..2 KiB (§4.3.11; an
implementation may not use 16 or 32 B)."""
ALIGN_CODES = range(0b0000, 0b1011 + 1)
"""PMBIDR_EL1.Align encodings: records aligned to 2**code bytes, 1 B..2 KiB (§4.3.1)."""
EXTERNAL_ABORT_CHOICES = ("report", "ignore", "serror", "fault")
"""The values of :attr:`SpeConfig.external_abort` (Arm ARM D17.8.4)."""
PMBIDR_EA = {"report": 0b0000, "ignore": 0b0001, "serror": 0b0010, "fault": 0b0000}
"""PMBIDR_EL1.EA for each :attr:`SpeConfig.external_abort`: the mechanism used for an External
abort that does not generate an MMU fault (Arm ARM D17.8.4 IKDMQG; PMBIDR_EL1.EA: 0b0000 not
described, 0b0001 ignored, 0b0010 SError; the field exists from FEAT_SPEv1p2). "report"
(reported to the SPU) has no encoding of its own: 0b0000, which FEAT_SPEv1p3 does not permit,
nor reporting to the SPU (D17.8.4.4): with PMSVer >= FEAT_SPEv1p3 only "ignore" and "serror"
are valid."""


@dataclass(frozen=True)
class Feature:
    """One implementation choice settable by name (``spe-emu run --spe-feature NAME=VALUE``).

    Attributes:
        name: the ID register field's name as the Arm ARM spells it (PMSIDR_EL1.FnE ...),
            or ``PMSVer`` (ID_AA64DFR0_EL1), ``Align``/``F`` (PMBIDR_EL1).
        attr: the :class:`SpeConfig` field it sets.
        values: the values the model implements.
        register: the ID register holding it.
        doc: what the value 1 (or each value) means, with where it is defined.
    """

    name: str
    attr: str
    values: tuple[int, ...]
    register: str
    doc: str


FEATURES = (
    Feature("PMSVer", "pmsver", tuple(PMSVER_NAMES), "ID_AA64DFR0_EL1",
            "0 no SPE, 1 FEAT_SPE, 2..5 FEAT_SPEv1p1..v1p4 (v1p2 and later need FnE=1, "
            "v1p3 and later F=1)"),
    Feature("FnE", "fne", (0, 1), "PMSIDR_EL1",
            "PMSNEVFR_EL1 and PMSFCR_EL1.FnE: inverted event filter (FEAT_SPEv1p2)"),
    Feature("LDS", "lds", (0, 1), "PMSIDR_EL1",
            "Data Source packet in the records of loads (§5.3.5)"),
    Feature("FDS", "fds", (0, 1), "PMSIDR_EL1",
            "PMSDSFR_EL1 and PMSFCR_EL1.FDS: filter loads by data source (FEAT_SPE_FDS; "
            "needs LDS=1)"),
    Feature("ERnd", "ernd", (0, 1), "PMSIDR_EL1",
            "random interval part after INTERVAL, secondary counter PMSICR_EL1.ECOUNT (§3.1.2)"),
    Feature("ArchInst", "arch_inst", (0, 1), "PMSIDR_EL1",
            "1 architecture instructions sampled; 0 micro-ops (one per instruction here)"),
    Feature("CountSize", "count_size_code", tuple(COUNT_SIZE_BITS), "PMSIDR_EL1",
            "2 (0b0010) 12-bit, 3 (0b0011) 16-bit saturating counters"),
    Feature("MaxSize", "max_size_code", tuple(range(0b0110, MAX_SIZE_CODES[-1] + 1)),
            "PMSIDR_EL1", "records of at most 2**MaxSize bytes"),
    Feature("Interval", "interval_code", tuple(INTERVAL_CODES), "PMSIDR_EL1",
            "recommended minimum interval code (0 -> 256)"),
    Feature("Align", "align_code", tuple(ALIGN_CODES), "PMBIDR_EL1",
            "records aligned (padded) to 2**Align bytes"),
    Feature("F", "flag_updates", (0, 1), "PMBIDR_EL1",
            "SPU translations manage the Access flag and dirty state"),
    Feature("EFT", "eft", (0, 1), "PMSIDR_EL1",
            "PMSFCR_EL1.{SIMDm, FPm, STm, Bm, LDm, SIMD, FP} (FEAT_SPE_EFT): type filters "
            "with masks, Advanced SIMD and floating-point types"),
    Feature("CRR", "crr", (0, 1), "PMSIDR_EL1",
            "call/return field CR in branch Operation Type packets (FEAT_SPE_CRR)"),
    Feature("FPF", "fpf", (0, 1), "PMSIDR_EL1",
            "Advanced SIMD and floating-point flags in Other Operation Type packets "
            "(FEAT_SPE_FPF)"),
    Feature("PBT", "pbt", (0, 1), "PMSIDR_EL1",
            "previous branch target Address packet (FEAT_SPE_PBT, FEAT_SPEv1p2 OPTIONAL)"),
    Feature("SPE_EXC", "spe_exc", (0, 1), "ID_AA64DFR2_EL1",
            "FEAT_SPE_EXC: PMBSR_EL2/EL3, PMSCR_EL1/EL2.{EE, KE}, MDCR_EL3.PMSEE routing of "
            "management events and PMBIRQ (Arm ARM D17.8)"),
)
"""Every settable ID-register choice, by its architectural name (docs/model.md)."""
FEATURES_BY_NAME = {f.name.lower(): f for f in FEATURES}

CHOICES = {
    "ft_all_zero_discards": "§3.2.3: PMSFCR_EL1.FT = 1 with B, LD, ST all 0: 1 records nothing, "
                            "0 (default) as if FT were 0",
    "fe_zero_discards": "§3.2.3: PMSFCR_EL1.FE = 1 with PMSEVFR_EL1 = 0: 1 records nothing, "
                        "0 (default) as if FE were 0",
    "fl_zero_discards": "§3.2.3: PMSFCR_EL1.FL = 1 with MINLAT = 0: 1 records nothing, 0 "
                        "(default) as if FL were 0",
    "zero_interval": "§4.3.12: the INTERVAL used when PMSIRR_EL1.INTERVAL = 0 (default 1)",
    "no_space_data_loss": "§3.4.1: a record that does not fit at enable: buffer full with "
                          "PMBSR_EL1.DL = 0 (default) or 1",
    "max_in_flight": "§2.2.4: sampled operations in flight at most (default 1)",
    "in_flight_ops": "§2.2.4: operations a sampled operation stays in flight (default 0: no "
                     "collisions)",
    "not_taken_target": "§2.3.3: target Address packet of a not-taken conditional branch "
                        "(default 1)",
    "exception_return_target": "§5.3.1: target of an exception return to an EL where "
                               "profiling is disabled (default 1)",
    "exception_record_detail": "§2.3.5: PC/type/counters in the record of an operation that "
                               "generates an exception (default 1)",
}
"""The CONSTRAINED UNPREDICTABLE and IMPLEMENTATION DEFINED choices settable by name
(``spe-emu run --spe-option NAME=VALUE``): :class:`SpeConfig` attribute -> what it chooses."""

MODEL_FEEDS = ("sampled", "every")
"""What updates the micro-architecture model (:attr:`SpeConfig.model_feed`)."""
MODEL_FEED_FROM = ("enable", "reset")
"""From when ``model_feed="every"`` feeds the model (:attr:`SpeConfig.model_feed_from`)."""

MODEL_PARAMETERS = {
    "model_feed": "what updates the caches, TLB and branch predictor: every (default: each "
                  "data access the PE makes, by physical address, and each branch it "
                  "executes, from reset) or sampled (only the sampled operations: faster, "
                  "but the events and latencies are not the program's: caches that see one "
                  "access in thousands miss almost every time)",
    "model_feed_from": "with model_feed=every, from when: enable (default: from the first "
                       "write that enables the Profiling Buffer, PMBLIMITR_EL1.E = 1, before "
                       "any sample) or reset (from the first instruction: every access of a "
                       "Linux boot too, about 4x its time)",
    "model_feed_linger": "with model_feed=every, instructions the model is still fed after "
                         "the Profiling Buffer is disabled (PMBLIMITR_EL1.E = 0), so that "
                         "what runs between a profiled task's time slices still evicts its "
                         "lines, while work long after profiling (perf report in a guest) "
                         "runs at sampled-mode speed; fed again from the next enable "
                         "(default 100000000: 0.1 s at the board's 1 GHz; -1: never stop)",
    "tlb_entries": "TLB entries, 4 KiB pages (default 48)",
    "tlb_ways": "TLB ways per set (default 0: fully associative)",
    "l1d_lines": "L1D size in 64-byte lines (default 512: 32 KiB)",
    "l1d_ways": "L1D ways per set (default 4; 0: fully associative)",
    "l2_lines": "L2 size in 64-byte lines (default 0: no L2)",
    "l2_ways": "L2 ways per set (default 0: fully associative)",
    "llc_lines": "last level cache size in 64-byte lines (default 16384: 1 MiB)",
    "llc_ways": "last level cache ways per set (default 16; 0: fully associative)",
    "l1d_latency": "cycles of a load that hits the L1D (default 4)",
    "l2_latency": "cycles of a load that misses the L1D and hits the L2 (default 12)",
    "llc_latency": "cycles of a load that hits the last level cache (default 20)",
    "dram_latency": "cycles of a load that misses the last level cache (default 120)",
    "peer_latency": "cycles of a load another PE's cache holds modified (--smp; default 40)",
    "walk_latency": "XLAT cycles of an access that walks the TLB (default 30)",
    "mispredict_penalty": "cycles a mispredicted branch adds to TOT (default 10)",
    "gshare_bits": "conditional branch predictor: 2**N two-bit counters indexed by the PC "
                   "XOR N bits of global history (default 12)",
    "ras_entries": "return stack entries (default 16; 0: every return is mispredicted)",
}
"""The micro-architecture model's parameters settable by name (``spe-emu run --spe-model
NAME=VALUE``; docs/model.md "Events and latency model"): attribute -> what it sets. The model
is IMPLEMENTATION DEFINED (§5.3.4, §5.3.5): none of these is architectural."""

# (feature attribute, value) -> the (attribute, minimum value) it requires, and what says so.
REQUIREMENTS = (
    ("pmsver", PMSVER_V1P2, "fne", 1, "Arm ARM PMSIDR_EL1.FnE: FEAT_SPEv1p2 implements FnE = 1"),
    ("fne", 1, "pmsver", PMSVER_V1P2, "Arm ARM PMSIDR_EL1.FnE: PMSNEVFR_EL1 is FEAT_SPEv1p2's"),
    ("pmsver", PMSVER_V1P3, "flag_updates", 1,
     "Arm ARM D17.8.3: with FEAT_SPEv1p3 SPU translations manage the Access flag and dirty "
     "state (PMBIDR_EL1.F = 1)"),
    ("fds", 1, "lds", 1, "the data source filter compares the Data Source packet's value"),
    ("pbt", 1, "pmsver", PMSVER_V1P2,
     "Arm ARM PMSIDR_EL1.PBT: FEAT_SPEv1p2 implements the OPTIONAL previous branch target"),
    ("pbt", 1, "max_size_code", 7,
     "§4.3.11 PMSIDR_EL1.MaxSize bounds every record: with the previous branch target Address "
     "packet a record (both Context packets, PC, Operation Type, data VA and PA, PBT, Events, "
     "three Counters, Data Source, Timestamp) takes up to 72 bytes"),
)


@dataclass(frozen=True)
class SpeConfig:
    """The modelled implementation.

    ID register values (§4.3.1 PMBIDR_EL1, §4.3.11 PMSIDR_EL1, ID_AA64DFR0_EL1.PMSVer):
        pmsver: ID_AA64DFR0_EL1.PMSVer (1 = FEAT_SPE). 0 removes SPE: every PMS*/PMB* access
            is UNDEFINED and PSB CSYNC is a NOP.
        max_size_code: PMSIDR_EL1.MaxSize; records are at most 2**code bytes (6 -> 64 bytes).
        interval_code: PMSIDR_EL1.Interval, the recommended minimum interval (0 -> 256).
        count_size_code: PMSIDR_EL1.CountSize (0b0010 = 12-bit saturating counters).
        ernd: PMSIDR_EL1.ERnd (0: random number added at the start of the interval;
            1: secondary counter PMSICR_EL1.ECOUNT, §3.1.2).
        arch_inst: PMSIDR_EL1.ArchInst (1: architecture instructions are the operations;
            0: micro-ops, of which every instruction here is exactly one).
        align_code: PMBIDR_EL1.Align (0 = byte; records padded to 2**code bytes).
        flag_updates: PMBIDR_EL1.F (Arm ARM D17.8.3.1). 0: a buffer page with AF == 0 is an
            Access flag fault and a read-only one a Permission fault, DBM ignored (Table
            D17-11); 1: the SPU's walks set AF and make DBM == 1 pages writable-dirty where
            the owning regime enables it (TCR_ELx.HA / HD, VTCR_EL2.HA / HD for stage 2).
        fne: PMSIDR_EL1.FnE (PMSNEVFR_EL1 and PMSFCR_EL1.FnE implemented; FEAT_SPEv1p2).
        lds: PMSIDR_EL1.LDS (loads' records carry a Data Source packet, §5.3.5; values in
            docs/model.md).
        fds: PMSIDR_EL1.FDS (PMSDSFR_EL1 and PMSFCR_EL1.FDS implemented).
        eft: PMSIDR_EL1.EFT (FEAT_SPE_EFT: PMSFCR_EL1.{SIMD, FP} and the mask fields of the
            type filters, :func:`spe_emu.spe.filters.collect_record`).
        crr: PMSIDR_EL1.CRR (FEAT_SPE_CRR: branch records say call, return or neither).
        fpf: PMSIDR_EL1.FPF (FEAT_SPE_FPF: Other records say Advanced SIMD / floating-point).
        pbt: PMSIDR_EL1.PBT (FEAT_SPE_PBT, Arm ARM D17.6.3.1; needs PMSVer >= FEAT_SPEv1p2):
            each record carries the previous branch target Address packet (index 4) when a
            taken branch was retired with profiling enabled before the sampled operation
            (records are then built in Python, and the fast loop captures no samples
            natively: docs/model.md).
        spe_exc: ID_AA64DFR2_EL1.SPE_EXC (FEAT_SPE_EXC, Arm ARM D17.8; default 0): the
            registers PMBSR_EL2, PMBSR_EL3, the fields PMSCR_EL1/EL2.{EE, KE} and
            MDCR_EL3.PMSEE route management events and PMBIRQ, and the machine takes the
            SPE Profiling exception (:mod:`spe_emu.spe.exc`; ID_AA64DFR2_EL1.SPE_EXC reads it).
        :data:`FEATURES` lists these by their architectural names, :data:`REQUIREMENTS` the
        combinations the architecture requires.

    CONSTRAINED UNPREDICTABLE choices (§3.2.3 ``CollectRecord()``, §4.3.9):
        ft_all_zero_discards: PMSFCR_EL1.FT == 1 with B, LD and ST all 0: True records nothing,
            False behaves as if FT were 0 (default).
        fe_zero_discards: PMSFCR_EL1.FE == 1 with PMSEVFR_EL1 == 0 (same choice).
        fl_zero_discards: PMSFCR_EL1.FL == 1 with PMSLATFR_EL1.MINLAT == 0 (same choice).
        zero_interval: the interval used when PMSIRR_EL1.INTERVAL == 0 ("an UNKNOWN sampling
            interval", §4.3.12); the value replaces INTERVAL (default 1 -> 256 operations).

        no_space_data_loss: a record that does not fit at all below PMBLIMITR_EL1 (software
            broke §3.4.1 at enable): it is discarded and raises the buffer-full management
            event with PMBSR_EL1.DL = 0 (default: no byte of it reached memory, PMBPTR_EL1 still
            points after the last complete record, which holds) or, when True, DL = 1
            (§3.4.1 lists both "with or without data loss").

    IMPLEMENTATION DEFINED sample collisions (§2.2.4, §2.6 SAMPLE_COLLISION):
        max_in_flight: the number of sampled operations the PE supports in flight (default 1).
        in_flight_ops: how many operations a sampled operation stays in flight after it is
            selected -- its record is complete after that many later population members
            (default 0: complete before the next operation, so no sample ever collides). An
            operation selected while ``max_in_flight`` earlier sampled operations are in
            flight collides: no record, PMBSR_EL1.COLL = 1, SAMPLE_COLLISION counts it and
            SAMPLE_FEED does not.

    IMPLEMENTATION DEFINED record contents:
        not_taken_target: include the branch target Address packet for a conditional branch
            that failed its condition (§2.3.3; default True, as perf shows the target).
        exception_return_target: include the target of an exception return even when it goes
            to an Exception level where profiling is disabled (§5.3.1 index 0b00001; default True).
        exception_record_detail: for a sampled operation that generates an exception, keep
            the PC, Operation Type and counters in the record (§2.3.5 says it is UNPREDICTABLE
            whether the record has more than Events + End/Timestamp; default True).
        external_abort: what an External abort on a Profiling Buffer write does -- the write
            itself reached no memory or device, or a translation table walk for it did
            (§3.5.4, Arm ARM D17.8.4, IMPLEMENTATION DEFINED; PMBIDR_EL1.EA advertises it
            from FEAT_SPEv1p2 on, :data:`PMBIDR_EA`):

            Default (None): ``"report"`` below FEAT_SPEv1p3 (PMSVer 0b0100), ``"ignore"``
            from it on (:attr:`external_abort_behaviour`).

            - ``"report"``: reported to the SPU synchronously (D17.8.4.4; not permitted
              with FEAT_SPEv1p3): a Profiling Buffer management event with
              PMBSR_EL1.EA = 1, S = 1, EC = 0b100100
              (0b100101 for an abort on a stage 2 walk), MSS.FSC = 0b010000 (synchronous
              External abort) or 0b0101LL (on a walk, level LL), DL = 1 if part of the
              record was written, PMBPTR_EL1 = the aborted virtual address;
            - ``"ignore"`` (D17.8.4.1): the aborted bytes are dropped and profiling goes on
              as if the write had succeeded; PMBSR_EL1 is not modified;
            - ``"serror"`` (D17.8.4.2): as ``"ignore"`` for the SPU, and the PE takes a
              physical SError exception (ESR_ELx.EC = 0x2F, ISS = 0: IDS 0, DFSC
              Uncategorized), routed by SCR_EL3.EA and HCR_EL2.{AMO, TGE}, masked by
              PSTATE.A;
            - ``"fault"`` (D17.8.4.3): an External abort on a translation table walk is an
              MMU fault -- the management event of ``"report"`` with PMBSR_EL1.EA unchanged
              (D17.8.3 leaves EA to the implementation: unchanged here); an External abort on
              the write itself, which cannot be an MMU fault, is reported as with
              ``"report"``.

    Model parameters (:data:`MODEL_PARAMETERS`, documented in docs/model.md "Events and
    latency model"):
        model_feed: ``"sampled"`` or ``"every"`` (:data:`MODEL_FEEDS`).
        model_feed_from: ``"enable"`` or ``"reset"`` (:data:`MODEL_FEED_FROM`).
        model_feed_linger: instructions ``"every"`` still feeds the model after the Profiling
            Buffer is disabled (-1: never stops); fed again from the next enable.
        tlb_entries, l1d_lines, l2_lines, llc_lines: sizes, in 4 KiB pages (TLB) and 64-byte
            lines; l2_lines 0: no L2.
        tlb_ways, l1d_ways, l2_ways, llc_ways: ways per set, 0 for fully associative; the
            size must be a power-of-two multiple of the ways.
        l1d_latency, l2_latency, llc_latency, dram_latency: execution cycles of a load by the
            level that holds its line; peer_latency: of a load served by another PE's cache
            that holds the line modified (several PEs); walk_latency: XLAT after a TLB walk;
            mispredict_penalty: cycles a mispredicted branch adds (all cycles, >= 1).
        seed: seed of the pseudorandom number generator used when PMSIRR_EL1.RND == 1 (§2.2.2).

    Host option:
        strict: ``spe-emu run --strict``: a broken driver rule (:mod:`.driver_rules`) stops
            the run with :class:`spe_emu.errors.DriverRuleBroken` instead of only being
            reported.
    """

    pmsver: int = PMSVER_SPE
    max_size_code: int = 6
    interval_code: int = 0b0000
    count_size_code: int = COUNT_SIZE_12BIT_SAT
    ernd: int = 0
    arch_inst: int = 1
    align_code: int = 0
    flag_updates: int = 0
    ft_all_zero_discards: bool = False
    fe_zero_discards: bool = False
    fl_zero_discards: bool = False
    zero_interval: int = 1
    not_taken_target: bool = True
    exception_return_target: bool = True
    exception_record_detail: bool = True
    model_feed: str = "every"
    model_feed_from: str = "enable"
    model_feed_linger: int = 100_000_000
    tlb_entries: int = 48
    tlb_ways: int = 0
    l1d_lines: int = 512
    l1d_ways: int = 4
    l2_lines: int = 0
    l2_ways: int = 0
    llc_lines: int = 16384
    llc_ways: int = 16
    l1d_latency: int = 4
    l2_latency: int = 12
    llc_latency: int = 20
    dram_latency: int = 120
    peer_latency: int = 40
    walk_latency: int = 30
    mispredict_penalty: int = 10
    gshare_bits: int = 12
    ras_entries: int = 16
    seed: int = 0
    external_abort: str | None = None
    fne: int = 0
    lds: int = 0
    fds: int = 0
    eft: int = 0
    crr: int = 0
    fpf: int = 0
    pbt: int = 0
    no_space_data_loss: bool = False
    max_in_flight: int = 1
    in_flight_ops: int = 0
    strict: bool = False
    spe_exc: int = 0

    def __post_init__(self) -> None:
        def need(cond: bool, name: str, value: object, what: str) -> None:
            if not cond:
                raise ConfigError(f"SpeConfig.{name}={value!r}: {what}")

        need(self.external_abort is None or self.external_abort in EXTERNAL_ABORT_CHOICES,
             "external_abort", self.external_abort,
             f"must be one of {', '.join(EXTERNAL_ABORT_CHOICES)}")
        need(self.pmsver < PMSVER_V1P3 or PMBIDR_EA[self.external_abort_behaviour],
             "external_abort", self.external_abort,
             "FEAT_SPEv1p3 and later do not report External aborts to the SPU (Arm ARM "
             "D17.8.4.4, PMBIDR_EL1.EA != 0b0000): 'ignore' or 'serror'")

        for feature in FEATURES:
            value = getattr(self, feature.attr)
            need(value in feature.values, feature.attr, value,
                 f"{feature.register}.{feature.name} must be one of "
                 f"{', '.join(map(str, feature.values))} ({feature.doc})")
        for attr, at_least, needs, minimum, why in REQUIREMENTS:
            # (PMSVer 0: no SPE, the other choices are moot -- the raw loop's configuration)
            if self.pmsver != PMSVER_NI and getattr(self, attr) >= at_least:
                need(getattr(self, needs) >= minimum, needs, getattr(self, needs),
                     f"{attr} >= {at_least} requires {needs} >= {minimum} ({why})")
        need(0b0110 <= self.max_size_code <= MAX_SIZE_CODES[-1], "max_size_code",
             self.max_size_code,
             "PMSIDR_EL1.MaxSize must be 0b0110..0b1011 (64 B..2 KiB; 16/32 B not permitted)")
        need(self.interval_code in INTERVAL_CODES, "interval_code", self.interval_code,
             f"must be one of {sorted(INTERVAL_CODES)}")
        need(self.align_code in ALIGN_CODES, "align_code", self.align_code, "must be 0..11")
        need(self.align_code <= self.max_size_code, "align_code", self.align_code,
             "must not exceed max_size_code")
        need(self.flag_updates in (0, 1), "flag_updates", self.flag_updates, "must be 0 or 1")
        need(1 <= self.zero_interval < (1 << 24), "zero_interval", self.zero_interval,
             "must fit PMSIRR_EL1.INTERVAL (1..2**24-1)")
        need(self.max_in_flight >= 1, "max_in_flight", self.max_in_flight, "must be >= 1")
        need(self.in_flight_ops >= 0, "in_flight_ops", self.in_flight_ops, "must be >= 0")
        need(self.model_feed in MODEL_FEEDS, "model_feed", self.model_feed,
             f"must be one of {', '.join(MODEL_FEEDS)}")
        need(self.model_feed_from in MODEL_FEED_FROM, "model_feed_from", self.model_feed_from,
             f"must be one of {', '.join(MODEL_FEED_FROM)}")
        need(self.model_feed_linger >= -1, "model_feed_linger", self.model_feed_linger,
             "must be -1 (never stop) or a count of instructions >= 0")
        need(1 <= self.gshare_bits <= 24, "gshare_bits", self.gshare_bits, "must be 1..24")
        need(0 <= self.ras_entries <= 1024, "ras_entries", self.ras_entries,
             "must be 0..1024")
        for level in ("tlb_entries", "l1d_lines", "l2_lines", "llc_lines"):
            size, ways_name = getattr(self, level), level.split("_")[0] + "_ways"
            ways = getattr(self, ways_name)
            need(size >= (0 if level == "l2_lines" else 1) and size < 1 << 28, level, size,
                 "must be 1..2**28-1" + (" (0: no L2)" if level == "l2_lines" else ""))
            need(0 <= ways <= 64, ways_name, ways, "must be 0 (fully associative) .. 64")
            sets = size // ways if 0 < ways < size else 1
            need(not size or (sets * min(ways or size, size) == size and not sets & (sets - 1)),
                 ways_name, ways, f"{level}={size} must be a power-of-two multiple of it")
        for name in ("l1d_latency", "l2_latency", "llc_latency", "dram_latency", "peer_latency",
                     "walk_latency", "mispredict_penalty"):
            need(1 <= getattr(self, name) < 1 << 16, name, getattr(self, name),
                 "must be 1..65535 cycles")

    @property
    def counter_bits(self) -> int:
        """Width of the saturating Counter packet values (PMSIDR_EL1.CountSize): 12 or 16."""
        return COUNT_SIZE_BITS[self.count_size_code]

    @property
    def max_record_bytes(self) -> int:
        """2**PMSIDR_EL1.MaxSize, in bytes."""
        return 1 << self.max_size_code

    @property
    def external_abort_behaviour(self) -> str:
        """:attr:`external_abort`, or its default: ``"report"`` below FEAT_SPEv1p3, else
        ``"ignore"`` (FEAT_SPEv1p3 forbids reporting to the SPU)."""
        if self.external_abort is not None:
            return self.external_abort
        return "report" if self.pmsver < PMSVER_V1P3 else "ignore"

    @property
    def pmbidr_ea(self) -> int:
        """PMBIDR_EL1.EA: :data:`PMBIDR_EA` of :attr:`external_abort` with FEAT_SPEv1p2 or
        later (``pmsver`` >= 0b0011), else 0 (the field is RES0)."""
        return PMBIDR_EA[self.external_abort_behaviour] if self.pmsver >= PMSVER_V1P2 else 0

    @property
    def align_bytes(self) -> int:
        """2**PMBIDR_EL1.Align, in bytes."""
        return 1 << self.align_code

    def with_features(self, assignments: "list[str] | tuple[str, ...]") -> "SpeConfig":
        """A copy with ``NAME=VALUE`` assignments applied (names of :data:`FEATURES`, any
        case; values decimal, 0x.. or 0b..). A PMSVer given brings the features that version
        makes mandatory (:data:`REQUIREMENTS` of ``pmsver``: FnE = 1 from FEAT_SPEv1p2,
        PMBIDR_EL1.F = 1 from FEAT_SPEv1p3) unless the same call sets them too, so
        ``PMSVer=3`` alone is FEAT_SPEv1p2; a value given explicitly is checked, not changed.

        Raises:
            ConfigError: an unknown name, a malformed value or a value the model does not
                implement.
        """
        changes: dict[str, object] = {}
        for text in assignments:
            name, sep, value = text.partition("=")
            feature = FEATURES_BY_NAME.get(name.strip().lower())
            if not sep or feature is None:
                raise ConfigError(f"--spe-feature {text!r}: expected NAME=VALUE with NAME one "
                                  f"of {', '.join(f.name for f in FEATURES)}")
            try:
                changes[feature.attr] = int(value.strip(), 0)
            except ValueError:
                raise ConfigError(f"--spe-feature {text!r}: {value!r} is not a number") from None
        if "pmsver" in changes:
            for attr, at_least, needed, minimum, _why in REQUIREMENTS:
                if (attr == "pmsver" and changes["pmsver"] >= at_least
                        and needed not in changes and getattr(self, needed) < minimum):
                    changes[needed] = minimum
        return self.with_(**changes)

    def with_options(self, assignments: "list[str] | tuple[str, ...]") -> "SpeConfig":
        """A copy with ``NAME=VALUE`` assignments of :data:`CHOICES` applied (values decimal,
        0x.., or true/false for the yes/no choices).

        Raises:
            ConfigError: an unknown name, a malformed or invalid value.
        """
        changes: dict[str, object] = {}
        for text in assignments:
            name, sep, value = text.partition("=")
            name = name.strip().lower()
            if not sep or name not in CHOICES:
                raise ConfigError(f"--spe-option {text!r}: expected NAME=VALUE with NAME one "
                                  f"of {', '.join(CHOICES)}")
            value = value.strip().lower()
            try:
                number = {"true": 1, "false": 0}.get(value)
                number = int(value, 0) if number is None else number
            except ValueError:
                raise ConfigError(f"--spe-option {text!r}: {value!r} is not a number") from None
            changes[name] = (bool(number) if isinstance(getattr(self, name), bool)
                             else number)
        return self.with_(**changes)

    @property
    def model_geometry(self) -> tuple[int, ...]:
        """Entries and ways of the TLB, L1D, L2 and LLC (:class:`spe_emu.native.Model`)."""
        return (self.tlb_entries, self.tlb_ways, self.l1d_lines, self.l1d_ways,
                self.l2_lines, self.l2_ways, self.llc_lines, self.llc_ways)

    @property
    def model_predictor(self) -> tuple[int, int]:
        """gshare bits and return stack entries (:class:`spe_emu.native.Model`)."""
        return (self.gshare_bits, self.ras_entries)

    def with_model(self, assignments: "list[str] | tuple[str, ...]") -> "SpeConfig":
        """A copy with ``NAME=VALUE`` assignments of :data:`MODEL_PARAMETERS` applied
        (``model_feed`` takes a name of :data:`MODEL_FEEDS`, the others a number).

        Raises:
            ConfigError: an unknown name, a malformed or invalid value.
        """
        changes: dict[str, object] = {}
        for text in assignments:
            name, sep, value = text.partition("=")
            name, value = name.strip().lower(), value.strip().lower()
            if not sep or name not in MODEL_PARAMETERS:
                raise ConfigError(f"--spe-model {text!r}: expected NAME=VALUE with NAME one "
                                  f"of {', '.join(MODEL_PARAMETERS)}")
            if name in ("model_feed", "model_feed_from"):
                changes[name] = value
                continue
            try:
                changes[name] = int(value, 0)
            except ValueError:
                raise ConfigError(f"--spe-model {text!r}: {value!r} is not a number") from None
        return self.with_(**changes)

    def model_config(self) -> dict:
        """The micro-architecture model's parameters (:data:`MODEL_PARAMETERS`) by name, as
        summary.json's ``model_config`` states them (``spe-emu report`` prints them)."""
        return {name: getattr(self, name) for name in MODEL_PARAMETERS}

    def with_(self, **changes: object) -> "SpeConfig":
        """A copy with some fields changed (validated)."""
        known = {f.name for f in fields(self)}
        for key in changes:
            if key not in known:
                raise ConfigError(f"SpeConfig has no option {key!r}")
        return replace(self, **changes)
