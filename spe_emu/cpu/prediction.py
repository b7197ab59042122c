"""The fast run loop's samples inside a translated block (docs/model.md, "Samples inside a
block"): which instructions can be observed from the block's start or end, by their next PC
or by evaluating earlier instructions (prediction, :meth:`Prediction._predict`); the verdicts
and record templates learnt per block for the native hook and recorder, kept for the process
per code page (:class:`LearntCode`); settling a predicted sample and replaying the native
captures at the next stop (:meth:`Prediction._catch_up`), with the room the Profiling Buffer
has for their records.

:class:`Prediction` is a part of :class:`spe_emu.cpu.machine.Machine` (its attributes are
the machine's)."""

from __future__ import annotations

import ctypes
import struct
from functools import lru_cache
from typing import NamedTuple

from .. import native
from ..arch.context import AccessContext
from ..arch.faults import TranslationFault
from ..spe.records import Sample
from . import a64
from .controls import PSB_CSYNC_WORD
from .native_records import CAPTURE_SLOT, block_templates, plan_steps


# Upper bound on the bytes of one record before alignment padding (the largest record, with
# both Context packets, PC, operation type, data VA and PA, the previous branch target,
# events, three counters, a Data Source packet and a timestamp, is 72 bytes;
# tests/test_prediction.py checks the bound).
RECORD_BYTES_BOUND = 128
# Pages from PMBPTR_EL1's on that captured samples' records may fill before Python checks again.
RECORD_WINDOW_PAGES = 4
PREDICTION_CACHE_ENTRIES = 1 << 16  # code sequences whose predictability is remembered
SUCCESSOR_BLOCKS = 8     # blocks learnt ahead at a stop for lack of a verdict
LEARNT_PAGES_MAX = 256   # code pages whose learning is kept for the process (LearntCode)
TCG_MAX_INSNS = 256      # the longest translated block seen from Unicorn 2.1 (instructions)
PREDICT_NO, PREDICT_START, PREDICT_NEXT_PC, PREDICT_END, PREDICT_EVAL = 0, 1, 2, 3, 4


@lru_cache(maxsize=4096)
def _block_writes(code: bytes) -> tuple | None:
    """For the instructions of a translated block: (words, what each may write, what the
    instructions before each may write, what each and those after it may write), as sets of
    Unicorn register ids (:func:`a64.written_registers`); the last instruction may also be a
    branch (X30 for BL/BLR) or exception-generating (nothing: it is taken first). None when
    an instruction is not modelled."""
    words = struct.unpack(f"<{len(code) // 4}I", code)
    if PSB_CSYNC_WORD in words:
        # (a synchronisation point for the Profiling Buffer: the records of the samples before
        # it are written at its hook, so no sample of its block is predicted or captured)
        return None
    writes = []
    for i, word in enumerate(words):
        written = a64.written_registers(word)
        if written is None and i == len(words) - 1:
            last = a64.decode(word)
            if last.exception is not None:
                written = frozenset()
            elif last.is_branch and not last.is_eret:
                written = frozenset((a64.X_REGS[30],))
        if written is None:
            return None
        writes.append(written)
    before = [frozenset()]
    for w in writes[:-1]:
        before.append(before[-1] | w)
    after = [frozenset()] * len(writes)
    acc = frozenset()
    for i in range(len(writes) - 1, -1, -1):
        acc = acc | writes[i]
        after[i] = acc
    return words, writes, before, after


@lru_cache(maxsize=1 << 16)
def _ends_block(word: int) -> bool:
    """Whether QEMU ends a translated block after this instruction (as far as the guess of
    Prediction._guess_block needs): branches and exception returns, exception generation, system
    register writes, PSTATE and SYS operations, ISB, WFI/WFE, and what is not decoded."""
    info = a64.decode(word)
    return bool(info.is_branch or info.exception or info.is_eret or info.pstate is not None
                or info.sys_op is not None or (info.sysreg is not None and not info.is_read)
                or info.mnemonic_class in ("isb", "wfi", "wfe", "wfit", "wfet", "yield",
                                           "unknown", "unallocated"))


class LearntPage(NamedTuple):
    """One code page of :class:`LearntCode`."""
    code: bytes                                          # the page's 4 KiB
    blocks: dict[tuple[int, int], tuple[bytes, bytes]]   # (block, length) -> (verdict batch,
    #                                                      template bytes)
    expanded: set[tuple[int, int]]                       # (block, length) learnt at a stop


class LearntCode:
    """What the fast run loop learnt about code -- the native hook's verdicts, the recorder's
    templates, the blocks learnt at a stop with their successors -- kept for the process per
    4 KiB code page, with the page's bytes. A later machine running the same code gets all
    of it when profiling is first enabled (:meth:`Prediction._preload`) instead of stopping to
    learn it again: verdicts and templates are pure functions of the code, its address and
    the Exception level and Security state, so they hold wherever the page has the same bytes
    at the same virtual address in the same translation regime. A page whose bytes differ is
    learnt afresh.

    Args:
        max_pages: pages kept; when full, everything is forgotten.
    """

    def __init__(self, max_pages: int):
        self.max_pages = max_pages
        self.pages: dict[tuple[int, int, int, int], LearntPage] = {}  # (regime, EL, NS, VA page)

    def page(self, key: tuple[int, int, int, int], code: bytes) -> LearntPage:
        """What was learnt on the page ``key`` (regime, EL, NS, VA page) holding ``code``
        (empty when it held other bytes)."""
        found = self.pages.get(key)
        if found is None or found.code != code:
            if len(self.pages) >= self.max_pages:
                self.pages.clear()
            found = self.pages[key] = LearntPage(code, {}, set())
        return found


LEARNT_CODE = LearntCode(LEARNT_PAGES_MAX)


class Prediction:
    """The machine's predicted and captured samples and what it learnt about code (see the
    module's docstring)."""

    def _forget_code(self) -> None:
        """Code or its mapping may have changed: drop the native hook's verdicts and the
        instruction words and code pages remembered for captured samples and learning."""
        self._captured_words.clear()
        self._code_pages.clear()
        if self._model_every:   # (the branches that end blocks)
            self.spu.builder.model.forget_sites()
            self._ref_sites.clear()
        if self.records is not None:
            self.records.clear_templates()
        self._forget_verdicts()
        # (nothing of code is remembered now: an IC stays native until profiling is enabled)
        self.sysreg_filter.sys_code = int(self.enabled)

    def _forget_verdicts(self) -> None:
        self._learnt.clear()
        self._expanded.clear()
        if self.cfg.mode == "fast" and (self.counter.step_count or self._verdicts_added):
            native.verdicts_clear(self.counter)
            self._verdicts_added = False

    def _predict(self, block: int, k: int, n: int, index: int) -> bool:
        """Sample instruction ``k`` of the ``n``-instruction translated block at ``block``
        (instruction number ``index``) without stopping at it, when the state the run loop can
        see is provably the one the instruction sees (docs/model.md, "Samples inside a
        block"). Four ways (:meth:`_prediction_mode`):

        * PREDICT_START: no instruction before it in the block can write a register it reads
          (:func:`a64.written_registers`): observed now, at the block's start;
        * PREDICT_END: no instruction from it to the end of the block can write one: observed
          when the run has left the block (or at an exception on the way);
        * PREDICT_NEXT_PC: a branch (always the last instruction of its block): its outcome is
          the PC the block leaves to (a conditional branch to the next instruction is
          ambiguous and is not predicted);
        * PREDICT_EVAL: the earlier instructions that compute its operands are evaluated from
          the block's start (:meth:`_evaluate`).

        Every instruction of the block must be modelled (or be its final branch or exception-
        generating instruction): those cannot change the Exception level, the context registers
        or SPE state (the ones that can end their block in QEMU or are not modelled). The record
        must not be able to raise a Profiling Buffer management event (PMBIRQ timing is then
        not at stake), and the next interval event must not fall inside the block. The sample
        is then *pending* (:meth:`_settle`): committed when the run gets past instruction
        ``index``, dropped if an earlier instruction takes an exception. Returns False when the
        exact path (stop at the instruction) is needed.
        """
        if self._model_every:
            return False
        ctx = self.context()
        if not self._record_room(ctx):
            return False
        code = self._block_code(block, n, ctx)
        if code is None:
            return False
        self._learn_block(block, code)
        mode, plan = self._mode(code, k)
        if mode == PREDICT_NO:
            return False
        if index + self.spu.interval.members_between_events(
                self.spu.regs["PMSIRR_EL1"]) < index - k + n:
            return False  # the event after this one falls inside the block
        pc = block + 4 * k
        info = a64.decode(int.from_bytes(code[4 * k:4 * k + 4], "little"))
        if mode == PREDICT_END:  # observed at the settling point
            self._pending = (index, (pc, info, ctx), mode, None)
            self.sample_paths["predicted"] += 1
            return True
        if mode == PREDICT_EVAL:
            regs = self._evaluate(block, code, plan, info, ctx)
            if regs is None:
                return False
            self.sample_paths["evaluated"] += 1
            s = self._observe(pc, info, ctx, index, regs)
        else:
            s = self._observe(pc, info, ctx, index)
        if mode == PREDICT_NEXT_PC:
            self._pending = (index, (s, ctx), mode, None)
            self.sample_paths["predicted"] += 1
            return True
        # The interval step happens now (the run loop plans the next event from it); the
        # record is written when the run passes the instruction. Dropping the prediction
        # restores the interval counter, the population and the accounting point.
        interval = self.spu.interval
        undo = (interval.state, self.spu.stats.population, self.acct)
        selected = self._fire_member(index)
        self._pending = (index, (s, ctx) if selected else None, mode, undo)
        self.sample_paths["predicted"] += 1
        return True

    def _learn_blocks(self, blocks: list[tuple[int, bytes]]) -> None:
        """Give the native hook a verdict for every instruction it can capture in each block
        (address, code) not learnt yet (:meth:`_verdicts`), and the native recorder the
        templates of their instructions at the current EL and Security state, each in one
        call, so that later samples anywhere in them need no stop and no Python. Once per
        block address and length (forgotten with the verdicts); a full table is emptied first
        (the places sampled from now on are learnt again). Kept for the process in
        :data:`LEARNT_CODE`."""
        ctx = self.context()
        batch, templates, new = [], [], {}
        for block, code in blocks:
            key = (block, len(code) // 4)
            if key in self._learnt or key in new:
                continue
            new[key] = code
            verdicts = self._verdict_batch(block, code)
            tpl = (b"" if self.records is None
                   else block_templates(block, code, ctx.el, ctx.state_ns))
            batch.append(verdicts)
            templates.append(tpl)
            learnt = self._learnt_page(block, ctx)
            if learnt is not None:
                learnt.blocks[key] = (verdicts, tpl)
        self._add_verdicts(b"".join(batch))
        self._learnt.update(new)
        if new and self.records is not None:
            self.records.add_templates(b"".join(templates))

    def _learnt_page(self, block: int, ctx: AccessContext) -> LearntPage | None:
        """The :data:`LEARNT_CODE` page of ``block`` at ``ctx``'s EL and Security state (None:
        its code page does not translate or is not RAM)."""
        regime = self._regime_el(ctx.el)
        page = self._code_page(block, regime)
        if page is None:
            return None
        return LEARNT_CODE.page((regime, ctx.el, ctx.state_ns, block >> 12), page)

    def _add_verdicts(self, data: bytes) -> bool:
        """Give the native hook the verdict batch ``data``; a full table is emptied first (the
        places sampled from now on are learnt again). False: it does not fit even then."""
        self._verdicts_added = True
        if not data or native.verdicts_add(self.counter, data):
            return True
        self._forget_verdicts()
        return bool(native.verdicts_add(self.counter, data))

    def _preload(self) -> None:
        """Give the native hook and recorder what :data:`LEARNT_CODE` holds for the code pages
        that have the same bytes here (read through the current translation), as if it had
        been learnt in this run."""
        batch, templates, keys, expanded = [], [], set(), set()
        for (regime, _, _, va_page), learnt in LEARNT_CODE.pages.items():
            if self._code_page(va_page << 12, regime) != learnt.code:
                continue
            for verdicts, tpl in learnt.blocks.values():
                batch.append(verdicts)
                templates.append(tpl)
            keys.update(learnt.blocks)
            expanded.update(learnt.expanded)
        if not keys:
            return
        if self._add_verdicts(b"".join(batch)):
            self._learnt.update(keys)
            self._expanded.update(expanded)
            self.records.add_templates(b"".join(templates))

    @staticmethod
    @lru_cache(maxsize=PREDICTION_CACHE_ENTRIES)
    def _verdict_batch(block: int, code: bytes) -> bytes:
        """The verdicts of the block ``code`` at ``block`` as packed for
        :func:`native.verdicts_add` (empty: none); remembered for the process."""
        verdicts, entries = Prediction._verdicts(code)
        if not verdicts:
            return b""
        return struct.pack(native.VERDICT_BLOCK, block, len(code) // 4, len(verdicts)) + entries

    @staticmethod
    def _prediction_mode(code: bytes, k: int) -> tuple[int, tuple | None]:
        """How instruction ``k`` of the block ``code`` can be predicted (see :meth:`_predict`):
        (PREDICT_START | PREDICT_NEXT_PC | PREDICT_END | PREDICT_NO, None), or (PREDICT_EVAL,
        (plan, start registers)) when the operands can be computed from the block's start by
        evaluating the instructions of ``plan`` (indexes, in order; :func:`a64.evaluator`),
        which need ``start registers`` from the start."""
        analysis = _block_writes(code)
        if analysis is None:
            return PREDICT_NO, None
        words, writes, before, after = analysis
        info = a64.decode(words[k])
        reads = frozenset(info.reads)
        if reads.isdisjoint(before[k]):
            return PREDICT_START, None
        if Prediction._final_branch(words, k, info):
            return PREDICT_NEXT_PC, None
        if reads.isdisjoint(after[k]):
            return PREDICT_END, None
        # Backward from the sampled instruction: every earlier instruction that may write a
        # register still needed must be one the evaluator executes.
        needed = set(reads)
        plan = []
        for j in range(k - 1, -1, -1):
            if writes[j].isdisjoint(needed):
                continue
            step = a64.evaluator(words[j])
            if step is None:
                return PREDICT_NO, None
            if needed.isdisjoint(step.dests):
                continue                               # (the superset named a register)
            needed = (needed - set(step.dests)) | set(step.sources)
            plan.append(j)
        plan.reverse()
        if any(a64.evaluator(words[j]).load for j in plan) and any(
                a64.decode(w).is_store for w in words[:k]):
            return PREDICT_NO, None                    # a store may change what a load reads
        return PREDICT_EVAL, (tuple(plan), tuple(sorted(needed)))

    @staticmethod
    def _final_branch(words: tuple[int, ...], k: int, info) -> bool:
        """Whether instruction ``k`` of the block ``words`` is its final branch and its outcome
        follows from the PC the block leaves to (PREDICT_NEXT_PC): not ERET, and not a
        conditional branch to the next instruction (taken or not looks alike)."""
        if not info.is_branch or info.is_eret or k != len(words) - 1:
            return False
        return not (info.is_conditional and info.branch_offset == 4)

    @staticmethod
    @lru_cache(maxsize=PREDICTION_CACHE_ENTRIES)
    def _mode(code: bytes, k: int) -> tuple[int, tuple | None]:
        """:meth:`_prediction_mode`, remembered per (code, k) for the process (a pure
        function of the code)."""
        return Prediction._prediction_mode(code, k)

    def _learn_block(self, block: int, code: bytes) -> dict[int, int]:
        """:meth:`_learn_blocks` for one block; returns its verdicts (instruction ->
        PREDICT_*)."""
        self._learn_blocks([(block, code)])
        return self._verdicts(code)[0]

    @staticmethod
    @lru_cache(maxsize=PREDICTION_CACHE_ENTRIES)
    def _verdicts(code: bytes) -> tuple[dict[int, int], bytes]:
        """How the native hook can capture each instruction of the block ``code``: at its
        start or end (:meth:`_mode`), with its operands evaluated from the start (an
        evaluation plan the native evaluator runs: a load that cannot be read there makes it
        stop instead), a final branch by the PC the block leaves to (even when its operands
        are known at the start: the native recorder builds branch records from that PC).
        Instruction 0 needs no verdict unless it is a final branch (without one it is taken at
        the start). Returns ({k: mode}, the same as packed for :func:`native.verdicts_add`),
        remembered for the process (a pure function of the code; the result is not to be
        changed)."""
        n = len(code) // 4
        words = struct.unpack(f"<{n}I", code)
        found: dict[int, int] = {}
        entries = []

        def add(k: int, mode: int, steps: bytes = b"") -> None:
            found[k] = mode
            entries.append(struct.pack(native.VERDICT_ENTRY, k, mode,
                                       len(steps) // ctypes.sizeof(native.SpeStep), 0) + steps)

        def add_predicted(k: int) -> None:
            mode, plan = Prediction._mode(code, k)
            if mode in (PREDICT_START, PREDICT_END):
                add(k, mode)
            elif mode == PREDICT_EVAL:
                steps = plan_steps(words, plan[0])
                if steps is not None:
                    add(k, mode, steps)

        for k in range(1, n - 1):
            add_predicted(k)
        if Prediction._final_branch(words, n - 1, a64.decode(words[-1])):
            add(n - 1, PREDICT_NEXT_PC)
        elif n > 1:
            add_predicted(n - 1)
        return found, b"".join(entries)

    def _block_code(self, block: int, n: int, ctx: AccessContext) -> bytes | None:
        """The code of the ``n``-instruction block at ``block`` (None: it crosses a page,
        does not translate or is not RAM)."""
        offset = block & 0xFFF
        if offset + 4 * n > 0x1000:
            return None
        page = self._code_page(block, self._regime_el(ctx.el))
        return None if page is None else page[offset:offset + 4 * n]

    def _learn_stop_block(self, block: int, n: int, k: int) -> bool:
        """At a stop in front of the block holding the sample (instruction ``k`` of the
        ``n``-instruction block at ``block``), for lack of a verdict: learn the block, and the
        blocks it is likely to lead to (:meth:`_learn_successors`); True when the native hook
        can now capture the sample (the run loop runs again from here). A block already
        learnt at an earlier stop has no verdict for ``k`` (the hook would have captured it):
        False at once."""
        if (block, n) in self._expanded:
            return False
        ctx = self.context()
        code = self._block_code(block, n, ctx)
        if code is None:
            return False
        self._expanded.add((block, n))
        self._learnt_page(block, ctx).expanded.add((block, n))  # (code was read from it)
        captured = k in self._learn_block(block, code)
        self._learn_successors(block, code, ctx)
        return captured

    def _learn_successors(self, block: int, code: bytes, ctx: AccessContext) -> None:
        """Learn ahead the blocks the block ``code`` at ``block`` can go to directly (the
        target of a direct branch, the next instruction after a conditional branch or a BL),
        and theirs, up to SUCCESSOR_BLOCKS blocks, so that later samples there need no stop
        either. Their extent is guessed as QEMU translates (up to the first instruction that
        ends a translated block, the page end or TCG_MAX_INSNS, measured): a verdict is keyed by the
        block's address *and* length and derived from the code there, so a wrong guess is
        never used."""
        todo = [(block, code)]
        found: list[tuple[int, bytes]] = []
        seen = {(block, len(code) // 4)}
        while todo and len(found) < SUCCESSOR_BLOCKS:
            start, words = todo.pop(0)
            n = len(words) // 4
            last = a64.decode(int.from_bytes(words[-4:], "little"))
            nexts = []
            if last.branch_offset is not None:
                nexts.append(last.direct_target(start + 4 * (n - 1)))
            if last.is_conditional or last.mnemonic_class == "bl":
                nexts.append(start + 4 * n)
            for succ in nexts:
                guess = self._guess_block(succ, ctx)
                if guess is None:
                    continue
                key = (succ, len(guess) // 4)
                if key not in seen and key not in self._learnt:
                    seen.add(key)
                    found.append((succ, guess))
                    todo.append((succ, guess))
        self._learn_blocks(found)

    def _guess_block(self, start: int, ctx: AccessContext) -> bytes | None:
        """The code of the block QEMU would translate at ``start`` (see
        :meth:`_learn_successors`), or None when it does not translate."""
        page = self._code_page(start, self._regime_el(ctx.el))
        if page is None:
            return None
        first = (start & 0xFFF) // 4
        last, limit = first, min(0x3FF, first + TCG_MAX_INSNS - 1)
        # (the first instruction from ``first`` on that ends a block: a few words decoded, not
        # the whole page, which was most of a fresh process's learning at stops)
        while last < limit and not _ends_block(int.from_bytes(page[4 * last:4 * last + 4],
                                                              "little")):
            last += 1
        return page[4 * first:4 * (last + 1)]

    def _evaluate(self, block: int, code: bytes, plan: tuple, info, ctx: AccessContext
                  ) -> dict[int, int] | None:
        """The registers ``info`` reads, computed from the block's start by the evaluation
        plan of :meth:`_prediction_mode` (loads read RAM through the current regime); None when
        a load would read outside RAM or does not translate."""
        steps, start = plan
        regime = self._regime_el(ctx.el)
        words = struct.unpack(f"<{len(code) // 4}I", code)
        values = dict(self._regs(start))
        failed = []

        def read(va: int, size: int) -> int:
            pa = self._ram_at(va, size, regime)
            if pa is None:
                failed.append(va)
                return 0
            return int.from_bytes(self.fast.read(pa, size), "little")

        for j in steps:
            values.update(a64.evaluator(words[j]).run(block + 4 * j, values, read))
            if failed:
                return None
        return {rid: values[rid] for rid in info.reads}

    def _settle(self, insn_index: int, next_pc: int) -> None:
        """A stop or hook at instruction number ``insn_index``: commit the pending sample if
        the run got to the sampled instruction, else drop it (an earlier instruction took an
        exception; the member is still ahead and will be planned again). ``next_pc`` is the
        PC the run continues at (where a branch predicted by its next PC went)."""
        index, observed, mode, undo = self._pending
        self._pending = None
        if insn_index < index:
            self.sample_paths["dropped"] += 1
            if undo is not None:
                interval = self.spu.interval
                interval.state, self.spu.stats.population, self.acct = undo
            return
        if mode == PREDICT_END:
            pc, info, ctx = observed
            observed = (self._observe(pc, info, ctx, index), ctx)
        elif mode == PREDICT_NEXT_PC:
            self._resolve_branch(observed[0], next_pc)
        if undo is None:
            self._member_selected(index, observed)
        elif observed is not None:
            self._sample(*observed)

    def _catch_up(self, insn_index: int, next_pc: int | None = None) -> None:
        """Before anything at instruction number ``insn_index`` (a stop, or a hook about to
        change state), where the run goes on at ``next_pc`` (default: the PC): settle the
        pending predicted sample, then replay the native captures, in instruction order."""
        if self._pending is not None:
            self._settle(insn_index, self.pc if next_pc is None else next_pc)
        if self.counter.cap_count:
            self._drain(insn_index, next_pc)

    def _drain(self, insn_index: int, next_pc: int | None = None) -> None:
        """Replay the samples the native hook captured (in order) at a stop or hook at
        instruction number ``insn_index``, where the run goes on at ``next_pc`` (default: the
        PC): each fires its interval step and, if selected, is recorded from the registers the
        hook captured (a capture still waiting for the end of its block is completed from the
        live state, as :meth:`_settle` does). A capture beyond ``insn_index`` is dropped (an
        earlier instruction of its block took an exception), and so are the ones after it; the
        run loop plans from the interval counter again.

        The native recorder (``record.c``, :mod:`.native_records`) builds the records of runs
        of captures; Python builds the others (:meth:`_replay`), in order. All are written to
        the Profiling Buffer in one batch (the capture budget guarantees no Profiling Buffer
        management event)."""
        c = self.counter
        if c.feed:   # (the captures' outcomes: the model's thread may still be setting them)
            self.spu.builder.model.sync()
        count = c.cap_count
        c.cap_count = c.completing = c.armed = 0
        self.sample_paths["evaluated"] += c.evaluated
        c.evaluated = 0
        ctx = self.context()  # (no control state changes while captures are pending)
        go_on = self.pc if next_pc is None else next_pc
        interval = self.spu.interval
        gap = interval.fixed_gap(self.spu.regs["PMSIRR_EL1"])
        records = self.records if gap is not None else None
        types = None if records is None else self.spu.native_record_filter(ctx)
        if types is not None:
            ts, _, _, collect_pa = self._collection(ctx)
            prefix = self.spu.builder.context_packets(*self._context_ids(ctx))
            records.begin(insn_index, go_on, ctx.el, ctx.state_ns, ts is not None, collect_pa,
                          prefix, gap, self.clock.idle_ticks, types, self._regime_el(ctx.el))
        else:
            records = None
        chunks: list[bytes] = []   # padded records, in order
        python_records = 0
        i = 0
        while i < count:
            if records is not None:
                expect = self.acct + interval.members_to_next_event() - 1
                records.recorder.s.expect = expect
                j = records.recorder.record(c, i, count)
                if j > i:
                    self._fire_captured(expect, j - i, gap)
                i = j
                reason = records.recorder.s.reason
                if reason == native.REC_TEMPLATE:
                    pc = c.caps[i].pc
                    records.add_template(records.template(
                        pc, ctx.el, ctx.state_ns, self._captured_word(pc, ctx.el)))
                    continue
                if reason == native.REC_XLATE:   # (as _observe translates for a PA packet)
                    va = records.recorder.s.xlate_va
                    try:
                        pa = self._translate(va, records.recorder.s.xlate_regime)
                    except TranslationFault:
                        # (not remembered, as _translate does not: a translation fault is
                        # not cached, so the page may translate at the next sample with no
                        # TLBI. Python records this one.)
                        reason = native.REC_PYTHON
                    else:
                        records.add_translation(va, pa)
                        continue
                if reason == native.REC_ORDER:
                    raise AssertionError(f"captured sample at {c.caps[i].index} is not the "
                                         f"planned event {expect}")
                if reason != native.REC_PYTHON:
                    break  # done, or the rest is dropped
                chunks.append(records.recorder.take_output())
            if c.caps[i].index > insn_index:
                break
            data = self._replay(c.caps[i], ctx, go_on)
            if data is not None:
                chunks.append(self.spu.buffer.padded(data))
                python_records += 1
            i += 1
        if i < count:
            self.sample_paths["dropped"] += count - i
        built = filtered = 0
        if records is not None:
            built, filtered = records.recorder.s.records, records.recorder.s.filtered
            chunks.append(records.recorder.take_output())
        self.spu.write_batch(b"".join(chunks), python_records + built, built, filtered)

    def _fire_captured(self, first: int, n: int, gap: int) -> None:
        """The interval steps of ``n`` captured members, the first at instruction number
        ``first`` and then one every ``gap`` (a fixed gap: COUNT reaches zero at each, which
        selects it and reloads the same value, §3.1.2)."""
        self.sample_paths["captured"] += n
        if not self._fire_member(first):
            raise AssertionError(f"captured member {first} is not selected")
        if n > 1:
            self.spu.stats.population += (n - 1) * gap
            self.acct = first + (n - 1) * gap + 1

    def _captured_word(self, pc: int, el: int) -> int:
        """The instruction word of a captured sample (remembered until code may have changed,
        read from its code page)."""
        words = self._captured_words
        word = words.get((pc, el))
        if word is None:
            if len(words) >= PREDICTION_CACHE_ENTRIES:
                words.clear()
            page = self._code_page(pc, self._regime_el(el))
            if page is None:
                word = self._fetch(pc, el)
            else:
                word = int.from_bytes(page[pc & 0xFFF:(pc & 0xFFF) + 4], "little")
            words[(pc, el)] = word
        return word

    def _replay(self, cap: native.SpeCapture, ctx: AccessContext, go_on: int) -> bytes | None:
        """Python's replay of one capture: its interval step and, if selected, its record
        (None: not selected, or removed by ``CollectRecord()``)."""
        index = cap.index
        if self.acct + self.spu.interval.members_to_next_event() - 1 != index:
            raise AssertionError(f"captured sample at {index} is not the planned event")
        self.sample_paths["captured"] += 1
        if not self._fire_member(index):
            return None
        info = a64.decode(self._captured_word(cap.pc, ctx.el))
        if cap.mode == PREDICT_END and not cap.next_pc:
            observed = None                                   # live registers
        else:
            regs = cap.regs
            observed = {rid: regs[CAPTURE_SLOT[rid]] for rid in info.reads}
        s = self._observe(cap.pc, info, ctx, index, observed)
        if cap.mode == PREDICT_NEXT_PC:
            self._resolve_branch(s, cap.next_pc or go_on)
        if cap.fed != native.FED_NONE:   # (model_feed "every": what the hooks saw)
            s.fed = cap.fed
        return self.spu.record(s, ctx)

    @staticmethod
    def _resolve_branch(s: Sample, next_pc: int) -> None:
        """Outcome of the sampled branch ``s`` from the PC its block left to."""
        if s.info.is_conditional:
            s.branch_taken = s.cond_passed = next_pc == s.branch_target
        else:
            s.branch_taken, s.branch_target = True, next_pc

    def _record_room(self, ctx: AccessContext) -> int:
        """How many records can be written from PMBPTR_EL1 on with no Profiling Buffer
        management event (§3.5.2, §3.5.3): each record (at most 2**PMSIDR_EL1.MaxSize bytes,
        and RECORD_BYTES_BOUND, plus alignment padding) leaves 2**PMSIDR_EL1.MaxSize bytes
        below the limit, and lands in PMBPTR_EL1's page or the RECORD_WINDOW_PAGES - 1 after
        it, all of which translate for the owning regime."""
        ptr = self.spu.regs["PMBPTR_EL1"]
        _, owner_el = self.spu.owner(ctx)
        key = (ptr >> 12, owner_el)
        if key not in self._headroom_pages:
            try:
                for page in range(RECORD_WINDOW_PAGES):
                    pa = self._translate((ptr & ~0xFFF) + 0x1000 * page, owner_el, write=True)
                    if self.bus.find(pa) is None:  # (an External abort: written one by one)
                        return 0
            except TranslationFault:
                return 0
            self._headroom_pages.add(key)
            self.sysreg_filter.sys_cache = 1
        end = min(self.spu.buffer.headroom_end, (ptr & ~0xFFF) + 0x1000 * RECORD_WINDOW_PAGES)
        bound = min(RECORD_BYTES_BOUND, self.cfg.spe.max_record_bytes) + self.cfg.spe.align_bytes
        return max(0, (end - ptr) // bound)
