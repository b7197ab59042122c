"""Sampled operation -> sample record (SPE supplement §2.3, §5; Arm ARM D18.1).

This layer turns what the CPU glue observed about a sampled operation (:class:`Sample`) into the
packets of one record. It never touches the Profiling Buffer (that is :mod:`.buffer`).

Events and cycle counts come from a documented, deterministic model (docs/model.md):

* caches and TLB: a *sampled-access locality model*. Every sampled load/store accesses the L1D
  and the TLB (E[2], E[4]). It refills the L1D (E[3]) when its 64-byte line is not among the
  ``l1d_lines`` lines most recently touched by sampled accesses, and then accesses the last
  level cache (E[8]), missing it (E[9]) when the line is not among the ``llc_lines`` most recent;
  it walks the TLB (E[5]) when its 4 KiB page is not among the ``tlb_entries`` most recent.
  Only sampled operations update the model, so the fast path and the reference mode agree.
* branch prediction: conditional direct branches are predicted backward-taken/forward-not-
  taken; returns are always predicted; other indirect branches are predicted to go where that
  branch went the last time it was sampled. A wrong prediction sets E[7].
* latencies (cycles, 12-bit saturating counters, §5.3.4): ISSUE = 1; TOT = ISSUE + execution,
  where execution is 1 (other, branch; +10 on a misprediction), 4 for an L1D hit, 20 for an L1D
  refill that hits the LLC, 120 for an LLC miss, 1 for a store; XLAT = 1, or 30 after a TLB walk
  (which also adds 30 to TOT).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from . import packets as P
from .config import SpeConfig
from .filters import OpType

LINE = 64
PAGE = 4096
# Data Source packet values (PMSIDR_EL1.LDS = 1; §5.3.5 leaves them IMPLEMENTATION DEFINED):
# the encoding Arm's Neoverse and Cortex cores use, as Linux perf decodes it
# (tools/perf/util/arm-spe-decoder/arm-spe-decoder.h, ``arm_spe_common_data_source``), for
# the model's three outcomes of a load: L1D hit, LLC (system cache) hit, DRAM.
DS_L1D, DS_SYS_CACHE, DS_DRAM = 0x0, 0xB, 0xE
DS_PAYLOAD_BYTES = 2  # SZ = 0b01: halfword payload
PACKET_CACHE_ENTRIES = 1 << 16

# Execution latencies of the model, in cycles (docs/model.md).
ISSUE_CYCLES = 1         # ISSUE: every operation issues at once
MISPREDICT_PENALTY = 10  # added to TOT for a mispredicted branch
L1D_HIT_CYCLES = 4
LLC_HIT_CYCLES = 20      # an L1D refill that hits the LLC
LLC_MISS_CYCLES = 120
STORE_CYCLES = 1         # a store (that is not also a load) does not wait for its data
WALK_CYCLES = 30         # XLAT after a TLB walk (also added to TOT)


class _Lru:
    """A fixed-capacity LRU set of keys."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.keys: OrderedDict[int, None] = OrderedDict()

    def touch(self, key: int) -> bool:
        """Record an access; True if it was a hit."""
        hit = key in self.keys
        if hit:
            self.keys.move_to_end(key)
        else:
            self.keys[key] = None
            if len(self.keys) > self.capacity:
                self.keys.popitem(last=False)
        return hit


class LocalityModel:
    """The state of the micro-architecture model: the L1D, LLC and TLB LRU sets and the last
    target of each indirect branch. The fast run loop swaps in the native one
    (:class:`spe_emu.native.Recorder`, same methods), which the native record builder shares.
    """

    L1D, LLC, TLB = 0, 1, 2

    def __init__(self, config: SpeConfig):
        self.sets = (_Lru(config.l1d_lines), _Lru(config.llc_lines), _Lru(config.tlb_entries))
        self.last_target: dict[int, int] = {}

    def touch(self, which: int, key: int) -> bool:
        """Access ``key`` (a line or page number) in set ``which``: True for a hit."""
        return self.sets[which].touch(key)

    def swap_target(self, pc: int, target: int) -> int | None:
        """Set the last target of the indirect branch at ``pc``; its previous one or None."""
        old = self.last_target.get(pc)
        self.last_target[pc] = target
        return old


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
        self.model = LocalityModel(config)
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

    def optypes(self, info) -> frozenset:
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
                    execute += MISPREDICT_PENALTY
            elif info.op_class == P.OP_CLASS_LDST and s.data_va is not None:
                out.append(P.data_va_bytes(s.data_va))
                if s.data_pa is not None:
                    out.append(P.data_pa_bytes(s.data_pa, s.ns))
                ev, execute, xlat = self._memory(s, info)
                events |= ev
                if cfg.lds and info.is_load:
                    source = (DS_L1D if not ev & (1 << P.EV_L1D_REFILL) else
                              DS_DRAM if ev & (1 << P.EV_LLC_MISS) else DS_SYS_CACHE)
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
        if info.is_indirect:
            if info.mnemonic_class.startswith("ret") or info.is_eret:
                mispredicted = False
            else:
                mispredicted = self.model.swap_target(s.pc, target) != target
        elif info.is_conditional:
            backward = target is not None and target <= s.pc
            mispredicted = taken != backward
        else:
            mispredicted = False
        return mispredicted

    def _memory(self, s: Sample, info) -> tuple[int, int, int]:
        va = s.data_va
        events = (1 << P.EV_L1D_ACCESS) | (1 << P.EV_TLB_ACCESS)
        xlat = 1
        model = self.model
        if not model.touch(LocalityModel.TLB, va // PAGE):
            events |= 1 << P.EV_TLB_WALK
            xlat = WALK_CYCLES
        line = va // LINE
        if model.touch(LocalityModel.L1D, line):
            execute = L1D_HIT_CYCLES
        else:
            events |= (1 << P.EV_L1D_REFILL) | (1 << P.EV_LLC_ACCESS)
            if model.touch(LocalityModel.LLC, line):
                execute = LLC_HIT_CYCLES
            else:
                events |= 1 << P.EV_LLC_MISS
                execute = LLC_MISS_CYCLES
        if info.is_store and not info.is_load:
            execute = STORE_CYCLES
        return events, execute, xlat
