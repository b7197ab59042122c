"""Sampled operation -> sample record (SPE supplement §2.3, §5; Arm ARM D18.1).

This layer turns what the CPU glue observed about a sampled operation (:class:`Sample`) into the
packets of one record. It never touches the Profiling Buffer (that is :mod:`.buffer`).

Events and cycle counts come from a documented, deterministic model (docs/model.md "Events
and latency model"; its parameters are :data:`spe_emu.spe.config.MODEL_PARAMETERS`):

* caches and TLB: :class:`spe_emu.native.Model`, set-associative LRU TLB, L1D, optional L2 and
  last level cache. Every sampled load/store accesses the L1D and the TLB (E[2], E[4]); it
  walks the TLB (E[5]) when its 4 KiB page misses there, refills the L1D (E[3]) when its
  64-byte line misses there, and accesses the last level cache (E[8]) when it also misses the
  L2, missing it (E[9]) when the line is not there either. With ``model_feed="every"`` (the
  default) every data access the PE makes updates the model (at its physical address) and
  every branch it executes trains the predictor, and a record shows what the operation found
  as it executed; with ``"sampled"`` only sampled operations do (loads/stores at their data
  virtual address), which makes the events unrepresentative of the program.
* branch prediction (:meth:`spe_emu.native.Model.branch`): gshare for conditional branches,
  a return stack for returns, the last target of each other indirect branch; exception
  returns and unconditional direct branches are always predicted. A wrong prediction sets
  E[7].
* latencies (cycles, 12-bit saturating counters, §5.3.4): ISSUE = 1; TOT = ISSUE + execution,
  where execution is 1 (other, branch; + ``mispredict_penalty`` on a misprediction), by the
  level that holds a load's line ``l1d_latency``, ``l2_latency``, ``llc_latency`` or
  ``dram_latency``, 1 for a store; XLAT = 1, or ``walk_latency`` after a TLB walk (which also
  adds ``walk_latency`` - 1 to TOT).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import native
from ..arch import INSN_BYTES
from . import packets as P
from .config import SpeConfig
from .filters import OpType

# Data Source packet values (PMSIDR_EL1.LDS = 1; §5.3.5 leaves them IMPLEMENTATION DEFINED):
# the encoding Arm's Neoverse and Cortex cores use, as Linux perf decodes it
# (tools/perf/util/arm-spe-decoder/arm-spe-decoder.h, ``arm_spe_common_data_source``), for
# the model's outcomes of a load: L1D hit, L2 hit, LLC (system cache) hit, DRAM, and (several
# PEs) a peer core's cache that held the line modified.
DS_L1D, DS_L2, DS_PEER_CORE, DS_SYS_CACHE, DS_DRAM = 0x0, 0x8, 0x9, 0xB, 0xE
# Data Source by the level of native.Model that held the line (native.LEVEL_*).
DATA_SOURCE = (DS_L1D, DS_L2, DS_SYS_CACHE, DS_DRAM, DS_PEER_CORE)
DS_PAYLOAD_BYTES = 2  # SZ = 0b01: halfword payload
PACKET_CACHE_ENTRIES = 1 << 16

# Execution latencies of the model, in cycles (docs/model.md); the cache, TLB walk and
# misprediction ones are SpeConfig model parameters.
ISSUE_CYCLES = 1         # ISSUE: every operation issues at once
STORE_CYCLES = 1         # a store (that is not also a load) does not wait for its data


@dataclass(slots=True)
class Sample:
    """What the CPU glue observed about one sampled operation, before it executed.

    Attributes:
        pc: virtual address of the instruction.
        el, ns: Exception level and Security state it executes in.
        info: the decoded instruction (:class:`spe_emu.cpu.a64.InsnInfo`).
        data_va: lowest data virtual address for loads/stores, else None.
        data_pa: data physical address when CollectPhysicalAddress() is true, else None.
        branch_taken, branch_target: outcome for branches (target None for ERET: see below).
        target_el, target_ns: Exception level / Security state at the branch target.
        cond_passed: result of the condition check for conditional instructions, else None.
        exception: True when the operation generates a synchronous exception.
        timestamp: CNTVCT_EL0/CNTPCT_EL0 value (None: End packet).
        context: CONTEXTIDR_EL1 value when CollectContextIDR1() is true, else None.
        context2: CONTEXTIDR_EL2 value when CollectContextIDR2() is true, else None.
        index: the operation's instruction number (instructions retired before it), for the
            sample collision model (``SpeConfig.in_flight_ops``).
        prev_branch: the target VA of the most recent taken branch retired with profiling
            enabled before the operation (FEAT_SPE_PBT, Arm ARM D17.6.3.1), at the same EL
            and Security state, or None.
        model_address: with ``model_feed="every"``, the physical address of ``data_va`` (the
            model is keyed by PA then; ``data_va`` itself when it does not translate).
        fed: with ``model_feed="every"``, what the model gave the operation as it executed,
            when the run loop captured it (a load/store's ``Model.access`` outcome, a
            branch's misprediction 0/1); None: the record reads the model now, before the
            operation executes.
    """

    pc: int
    el: int
    ns: int
    info: object
    data_va: int | None = None
    data_pa: int | None = None
    branch_taken: bool = False
    branch_target: int | None = None
    target_el: int = 0
    target_ns: int = 1
    cond_passed: bool | None = None
    exception: bool = False
    timestamp: int | None = None
    context: int | None = None
    context2: int | None = None
    index: int = 0
    prev_branch: int | None = None
    model_address: int | None = None
    fed: int | None = None


@dataclass(slots=True)
class Built:
    """A record ready for filtering: its bytes and what ``CollectRecord()`` needs."""

    data: bytes
    events: int
    total_latency: int
    optypes: frozenset
    data_source: int | None = None  # the Data Source packet's value, when there is one


def simd_fp_kind(word: int) -> tuple[bool, bool]:
    """(Advanced SIMD, floating-point) of a data-processing SIMD&FP instruction (word[28:25]
    == x111, Arm ARM C4.1.9; the decoder is spe_emu.cpu.a64): word[28] == 1 with word[30] == 0 is the scalar floating-point
    group (conversions and FCSEL/FCCMP included): floating-point; every other encoding of the
    group is Advanced SIMD (vector, scalar AdvSIMD, crypto). Any other word: (False, False).
    The Operation Type packet's ASE and FP flags (FEAT_SPE_FPF) and the PMSFCR_EL1.{SIMD, FP}
    filters (FEAT_SPE_EFT) use it."""
    w = word & 0xFFFFFFFF
    if (w >> 25) & 0b0111 != 0b0111:
        return False, False
    fp = bool(w >> 28 & 1) and not w >> 30 & 1
    return not fp, fp


class RecordBuilder:
    """Builds records and owns the deterministic micro-architecture model."""

    def __init__(self, config: SpeConfig):
        self.config = config
        self.model = native.Model(config.model_geometry, config.model_predictor,
                                  BRANCH_ENCODINGS)
        self._feed_every = config.model_feed == "every"
        self._outcomes = outcome_table(config)
        # Encoded packets that recur from sample to sample (PC packets, operation types,
        # counters, events), memoised: the fast path builds thousands of records per second.
        self._packet_cache: dict[tuple, bytes] = {}
        self._optypes: dict[tuple, frozenset] = {}  # what optypes() depends on -> result
        self.counter_max = (1 << config.counter_bits) - 1  # PMSIDR_EL1.CountSize

    def _packet(self, key: tuple, encode, *args) -> bytes:
        cache = self._packet_cache
        data = cache.get(key)
        if data is None:
            if len(cache) >= PACKET_CACHE_ENTRIES:
                cache.clear()
            data = cache[key] = encode(*args)
        return data

    def subclass(self, info) -> int:
        """The Operation Type packet's SUBCLASS (§5.3.8), with the call/return field of
        FEAT_SPE_CRR (PMSIDR_EL1.CRR == 1; branches with link are calls, RET/RETAA/RETAB
        returns, every other branch and exception return 0b11) and the Advanced SIMD and
        floating-point flags of FEAT_SPE_FPF (PMSIDR_EL1.FPF == 1; :func:`simd_fp_kind`)."""
        sub = info.op_subclass
        if self.config.crr and info.op_class == P.OP_CLASS_BRANCH:
            name = info.mnemonic_class
            sub = P.branch_with_cr(sub, P.CR_CALL if name.startswith("bl") else
                                   P.CR_RETURN if name.startswith("ret") else P.CR_OTHER)
        elif (self.config.fpf and info.op_class == P.OP_CLASS_OTHER
              and not P.other_is_sve(sub)):
            sub = P.other_with_simd_fp(sub, *simd_fp_kind(info.word))
        return sub

    @staticmethod
    def optypes(info) -> frozenset:
        """The ``OpType`` values an operation counts as for the FT filter (§3.2.2), with the
        Advanced SIMD and floating-point types of the FEAT_SPE_EFT filters (data-processing
        SIMD&FP operations, :func:`simd_fp_kind`; loads and stores of SIMD&FP registers
        are loads and stores only)."""
        if info.op_class == P.OP_CLASS_BRANCH:
            return frozenset({OpType.BRANCH})
        if info.op_class == P.OP_CLASS_LDST:
            out = set()
            if info.is_load:
                out.add(OpType.LOAD)
            if info.is_store or info.is_atomic:
                out.add(OpType.STORE)
            return frozenset(out or {OpType.OTHER})
        simd, fp = simd_fp_kind(info.word)
        return frozenset({OpType.OTHER} | ({OpType.SIMD} if simd else set())
                         | ({OpType.FP} if fp else set()))

    def build(self, s: Sample) -> Built:
        """The packets of the record for ``s`` (§2.3, §5.3), encoded."""
        info = s.info
        cfg = self.config
        packet = self._packet
        events = 1 << P.EV_RETIRED
        issue = ISSUE_CYCLES
        execute = 1
        xlat = None
        source = None
        out: list[bytes] = [self.context_packets(s.context, s.context2)]
        out.append(packet(("pc", s.pc, s.el, s.ns), P.instruction_address_bytes, P.ADDR_PC,
                          s.pc, s.el, s.ns))
        subclass = self.subclass(info)
        optype = packet(("op", info.op_class, subclass), P.op_type_bytes, info.op_class,
                        subclass)
        if s.exception:
            events |= 1 << P.EV_EXCEPTION_GEN
            if cfg.exception_record_detail:
                out.append(optype)
        else:
            out.append(optype)
            if s.cond_passed is False:
                events |= 1 << P.EV_NOT_TAKEN
            if info.op_class == P.OP_CLASS_BRANCH:
                if self._branch(s, out):
                    events |= 1 << P.EV_MISPRED
                    execute += cfg.mispredict_penalty
            elif info.op_class == P.OP_CLASS_LDST and s.data_va is not None:
                out.append(P.data_va_bytes(s.data_va))
                if s.data_pa is not None:
                    out.append(P.data_pa_bytes(s.data_pa, s.ns))
                ev, execute, xlat, level = self._memory(s, info)
                events |= ev
                if cfg.lds and info.is_load:
                    source = DATA_SOURCE[level]
        if cfg.pbt and s.prev_branch is not None:
            # (D18.2 Address packet index 0b00100: EL and NS as for the PC packet)
            out.append(P.instruction_address_bytes(P.ADDR_PREV_BRANCH, s.prev_branch, s.el,
                                                   s.ns))
        total = issue + execute + (xlat - 1 if xlat else 0)
        out.append(packet(("tail", events, total, issue, xlat), self._tail, events, total,
                          issue, xlat))
        if source is not None:
            out.append(packet(("ds", source), self._data_source, source))
        out.append(P.timestamp_bytes(s.timestamp) if s.timestamp is not None else P.END_BYTES)
        kind = (info.op_class, info.is_load, info.is_store, info.is_atomic,
                info.op_class == P.OP_CLASS_OTHER and simd_fp_kind(info.word))
        optypes = self._optypes.get(kind)
        if optypes is None:
            optypes = self._optypes[kind] = self.optypes(info)
        # CollectRecord() sees the latency the TOT counter reports: saturating (§5.3.4).
        return Built(b"".join(out), events, min(total, self.counter_max), optypes, source)

    @staticmethod
    def context_packets(context: int | None, context2: int | None) -> bytes:
        """The Context packets that start a record (§5.3.3): CONTEXTIDR_EL1's then
        CONTEXTIDR_EL2's value, each when collected (not None)."""
        out = b""
        if context is not None:
            out += P.context_bytes(P.CONTEXT_EL1, context)
        if context2 is not None:
            out += P.context_bytes(P.CONTEXT_EL2, context2)
        return out

    def _tail(self, events: int, total: int, issue: int, xlat: int | None) -> bytes:
        """The Events packet and the latency Counter packets (TOT, ISSUE, then XLAT if any),
        which follow each other in every record; counters saturate at 2**CountSize bits - 1."""
        top = self.counter_max
        return (P.events_bytes(events) + P.counter_bytes(P.COUNTER_TOTAL, total, top)
                + P.counter_bytes(P.COUNTER_ISSUE, issue, top)
                + (P.counter_bytes(P.COUNTER_XLAT, xlat, top) if xlat is not None else b""))

    @staticmethod
    def _data_source(value: int) -> bytes:
        """The Data Source packet (§5.3.5) with ``value`` (DS_*), halfword payload."""
        return P.encode(P.data_source_packet(value, DS_PAYLOAD_BYTES))

    def _branch(self, s: Sample, out: list) -> bool:
        """Append the branch target packet; return whether the model mispredicted it."""
        info = s.info
        taken = s.branch_taken
        target = s.branch_target
        if target is not None and (taken or self.config.not_taken_target):
            out.append(P.instruction_address_bytes(P.ADDR_BRANCH_TARGET, target, s.target_el,
                                                   s.target_ns))
        if target is None:   # (a branch that took an exception: no outcome)
            return False
        if s.fed is not None:
            return bool(s.fed)
        if self._feed_every:
            # (the branch's execution trains the predictor, seen from where the run goes on:
            # a conditional branch taken to the next instruction looks not taken, as the
            # fast loop's blocks and the reference loop's _feed_branch train it and as a
            # captured branch's verdict (s.fed) is asked)
            return self.model.branch(branch_kind(info), s.pc, target,
                                     bool(taken) and target != s.pc + INSN_BYTES,
                                     update=False)
        return self.model.branch(branch_kind(info), s.pc, target, bool(taken))

    def _memory(self, s: Sample, info) -> tuple[int, int, int, int]:
        """Events, execution cycles, XLAT cycles and the level (native.LEVEL_*) that held the
        line, of the sampled load/store ``s`` (:func:`outcome_table`)."""
        if s.fed is not None:
            outcome = s.fed
        elif self._feed_every:   # (the access itself updates the model as it executes)
            address = s.data_va if s.model_address is None else s.model_address
            outcome = self.model.access(address >> 6, False)
        else:
            outcome = self.model.access(s.data_va >> 6, True)
        events, execute, xlat = self._outcomes[outcome]
        if info.is_store and not info.is_load:
            execute = STORE_CYCLES
        return events, execute, xlat, outcome >> native.OUT_LEVEL_SHIFT


def branch_kind(info) -> int:
    """The branch predictor's kind of the branch ``info`` (an ``a64`` decode), as
    ``native.BR_*`` flags (:meth:`spe_emu.native.Model.branch`, model.c
    ``spe_model_branch``): conditional (B.cond, CBZ/CBNZ, TBZ/TBNZ: all direct), indirect,
    a return (RET*, ERET) among the indirect ones, an exception return (ERET*) among those,
    and a call (BL, BLR, BLRAA/BLRAB...: branches with link)."""
    kind = native.BR_COND if info.is_conditional else 0
    if info.is_indirect:   # (ERET included)
        kind |= native.BR_INDIRECT
        if info.mnemonic_class.startswith("ret") or info.is_eret:
            kind |= native.BR_RETURN
        if info.is_eret:
            kind |= native.BR_ERET
    if info.mnemonic_class.startswith("bl"):
        kind |= native.BR_CALL
    return kind


_B = native.BR_BRANCH
BRANCH_ENCODINGS = (
    (0xFF000000, 0x54000000, _B | native.BR_COND),                    # B.cond, BC.cond
    (0x7E000000, 0x34000000, _B | native.BR_COND),                    # CBZ, CBNZ
    (0x7E000000, 0x36000000, _B | native.BR_COND),                    # TBZ, TBNZ
    (0xFC000000, 0x14000000, _B),                                     # B
    (0xFC000000, 0x94000000, _B | native.BR_CALL),                    # BL
    (0xFFFFFC1F, 0xD61F0000, _B | native.BR_INDIRECT),                # BR
    (0xFFFFFC1F, 0xD63F0000, _B | native.BR_INDIRECT | native.BR_CALL),   # BLR
    (0xFFFFFC1F, 0xD65F0000, _B | native.BR_INDIRECT | native.BR_RETURN),  # RET
    (0xFFFFF81F, 0xD61F081F, _B | native.BR_INDIRECT),                # BRAAZ, BRABZ
    (0xFFFFF81F, 0xD63F081F, _B | native.BR_INDIRECT | native.BR_CALL),   # BLRAAZ, BLRABZ
    (0xFFFFFBFF, 0xD65F0BFF, _B | native.BR_INDIRECT | native.BR_RETURN),  # RETAA, RETAB
    (0xFFFFF800, 0xD71F0800, _B | native.BR_INDIRECT),                # BRAA, BRAB
    (0xFFFFF800, 0xD73F0800, _B | native.BR_INDIRECT | native.BR_CALL),   # BLRAA, BLRAB
    (0xFFFFFFFF, 0xD69F03E0, _B | native.BR_INDIRECT | native.BR_RETURN | native.BR_ERET),
    (0xFFFFFBFF, 0xD69F0BFF, _B | native.BR_INDIRECT | native.BR_RETURN | native.BR_ERET),
)
"""The branch encodings (Arm ARM C4.1 "Branches, Exception Generating and System
instructions"), as (word mask, value, ``native.BR_*`` kind | ``BR_BRANCH``): what the block
hook (model.c ``spe_model_classify``) and the reference loop know the branch that ended a
block by, to train the predictor with it (model_feed "every"). The kinds are
:func:`branch_kind`'s of what ``spe_emu.cpu.a64`` decodes (tests/test_native_records.py holds
them equal); the last two rows are ERET and ERETAA/ERETAB."""



def outcome_table(config: SpeConfig) -> tuple[tuple[int, int, int], ...]:
    """What a load/store puts in its record by its outcome in the model
    (:meth:`spe_emu.native.Model.access`, indexes 0 .. native.OUTCOMES - 1): (Events bits,
    execution cycles of a load, XLAT cycles). Every load/store accesses the L1D and the TLB
    (E[2], E[4]); a TLB miss is a walk (E[5], XLAT ``walk_latency``); a line the L1D misses
    is a refill (E[3]), then an LLC access (E[8]) when the L2 misses too, then an LLC miss
    (E[9]) when the LLC does; a line a peer PE's cache held modified is an LLC access that
    does not miss (the snoop is answered at that level; SPE supplement §5.3.7 Events packet;
    docs/model.md). record.c
    reads the same table (NativeRecords)."""
    latency = (config.l1d_latency, config.l2_latency, config.llc_latency, config.dram_latency,
               config.peer_latency)
    table = []
    for outcome in range(native.OUTCOMES):
        level = outcome >> native.OUT_LEVEL_SHIFT
        walk = outcome & native.OUT_WALK
        events = ((1 << P.EV_L1D_ACCESS) | (1 << P.EV_TLB_ACCESS)
                  | (walk and 1 << P.EV_TLB_WALK)
                  | (level != native.LEVEL_L1D and 1 << P.EV_L1D_REFILL)
                  | (level >= native.LEVEL_LLC and 1 << P.EV_LLC_ACCESS)
                  | (level == native.LEVEL_DRAM and 1 << P.EV_LLC_MISS))
        table.append((events, latency[level], config.walk_latency if walk else 1))
    return tuple(table)
