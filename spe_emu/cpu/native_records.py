"""Glue between the fast run loop and the native record builder (``spe_emu/native/record.c``).

The block hook captures registers for samples it can observe without stopping (docs/model.md,
"Samples inside a block"). :class:`NativeRecords` lets ``record.c`` build those samples'
records: it fills the recorder's fixed fields from the Python declarations (packet headers
from :mod:`spe_emu.spe.packets`, event numbers, latencies from :mod:`spe_emu.spe.records`),
sets the per-drain inputs, and turns a decoded instruction into a *template* -- what its
record holds apart from the register-dependent parts -- once per (PC, EL, NS). Instructions
the template cannot describe (exception-generating instructions, ERET, system register
accesses, unknown address forms) are recorded by Python, from the same model state.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from unicorn import arm64_const as A

from .. import native
from ..spe import packets as P
from ..spe import records as R
from ..spe.config import SpeConfig
from . import a64

M64 = (1 << 64) - 1

#: The registers the block hook captures, in the order of ``struct spe_capture.regs``.
CAPTURE_REGS = a64.X_REGS + (A.UC_ARM64_REG_SP, A.UC_ARM64_REG_NZCV)
CAPTURE_SLOT = {rid: i for i, rid in enumerate(CAPTURE_REGS)}


def _header(packet: P.Packet) -> int:
    """The header of ``packet`` (record.c writes one-byte headers)."""
    header = P.header_bytes(packet)
    if len(header) != 1:
        raise AssertionError(f"record.c needs one-byte headers, not {header.hex()}")
    return header[0]


class NativeRecords:
    """The native recorder of one machine.

    Args:
        config: the SPE implementation choices (model latencies, Align, not-taken targets).
        model: the machine's micro-architecture model (the SPU's RecordBuilder.model).
        max_captures: captures per drain (sizes the output buffer).
        record_bound: an upper bound of one record's bytes before padding.

    Raises:
        spe_emu.native.NativeBuildError: the library cannot be loaded, or out of memory.
    """

    def __init__(self, config: SpeConfig, model: native.Model, max_captures: int,
                 record_bound: int):
        self.config = config
        self.recorder = native.Recorder(model, max_captures * (2 * record_bound
                                                                + config.align_bytes))
        s = self.recorder.s
        s.lat_mispredict = config.mispredict_penalty
        for outcome, (events, execute, xlat) in enumerate(R.outcome_table(config)):
            s.outcome_events[outcome] = events
            s.outcome_execute[outcome] = execute
            s.outcome_xlat[outcome] = xlat
        s.align = config.align_bytes
        s.not_taken_target = int(config.not_taken_target)
        s.feed_every = int(config.model_feed == "every")
        fields, events = _fixed_fields()
        for name, value in fields:
            setattr(s, name, value)
        s.hdr_events[:] = events

    def begin(self, insn_index: int, next_pc: int, el: int, ns: int, timestamp: bool,
              collect_pa: bool, prefix: bytes, gap: int, ts_offset: int = 0,
              type_filter: int = 0, regime: int = 1) -> None:
        """Inputs of one drain: the stop's instruction number, where the run goes on, the
        context of every capture, CollectTimeStamp(), CollectPhysicalAddress(), the Context
        packets that start each record, the members from one capture to the next, the
        system counter minus the instruction number (ticks spent waiting: a Timestamp
        packet holds the counter at its instruction), PMSFCR_EL1.FT's OR filter
        (:meth:`spe_emu.spe.spu.Spu.native_record_filter`: OpType bits, 0 for none), and the
        translation regime of the data addresses (``Machine._regime_el``: the translations
        :meth:`add_translation` gives are for it)."""
        s = self.recorder.s
        s.type_filter = type_filter
        s.xlate_regime = regime
        s.filtered = 0
        s.insn_index = insn_index
        s.next_pc = next_pc
        s.el = el
        s.ns = ns
        s.timestamp = int(timestamp)
        s.collect_pa = int(collect_pa)
        s.prefix_len = len(prefix)
        s.prefix[:len(prefix)] = prefix
        s.gap = gap
        s.ts_offset = ts_offset
        s.records = 0

    def template(self, pc: int, el: int, ns: int, word: int) -> native.SpeTemplate:
        """The template of the instruction ``word`` at ``pc`` sampled at ``el``/``ns``: the
        packets :meth:`spe_emu.spe.records.RecordBuilder.build` would emit whatever the
        registers (PC and Operation Type), and how the rest follows from them (§5.3).
        Remembered for the process (a pure function of its arguments)."""
        return native.SpeTemplate.from_buffer_copy(_template_bytes(pc, el, ns, word))

    def add_template(self, template: native.SpeTemplate) -> None:
        """Store ``template``; a full table is emptied first (templates are learnt again)."""
        self._store(bytes(template))

    def add_templates(self, data: bytes) -> None:
        """Store the templates of ``data`` (consecutive structs, e.g. of
        :func:`block_templates`) in one native call, ahead of their samples."""
        self._store(data)

    def _store(self, data: bytes) -> None:
        """Store the templates of ``data`` (consecutive structs); a full table is emptied
        first (templates are learnt again)."""
        if not self.recorder.add_templates(data):
            self.recorder.clear_templates()
            self.recorder.add_templates(data)

    def clear_templates(self) -> None:
        """Code or its mapping may have changed."""
        self.recorder.clear_templates()

    def add_translation(self, va: int, pa: int) -> None:
        """The PA of the page of ``va`` in the drain's regime (:meth:`begin`), as the machine
        translates it for a Physical Address packet (a translation that faults is not
        remembered: Python records that capture)."""
        self.recorder.add_translation(va, pa & ~0xFFF)

    def clear_translations(self) -> None:
        """Translations may have changed (TLBI, a translation control write)."""
        self.recorder.clear_translations()


def _template(pc: int, el: int, ns: int, info: a64.InsnInfo) -> native.SpeTemplate:
    """See :meth:`NativeRecords.template`."""
    t = native.SpeTemplate(pc=pc, el=el, ns=ns, cond=-1)
    if info.exception or info.is_eret or info.sysreg is not None:
        t.kind = native.TPL_PYTHON   # may take an exception: Machine._generates_exception
        return t
    head = (P.instruction_address_bytes(P.ADDR_PC, pc, el, ns)
            + P.op_type_bytes(info.op_class, info.op_subclass))
    t.head_len = len(head)
    t.head[:len(head)] = head
    t.optypes = sum(1 << op.value for op in R.RecordBuilder.optypes(info))
    check = info.condition_check
    if info.op_class == P.OP_CLASS_BRANCH:
        t.kind = native.TPL_BRANCH
        t.branch = R.branch_kind(info)
        if info.is_conditional:   # (conditional branches are direct: A64 has no other)
            t.target = info.direct_target(pc)
    elif info.op_class == P.OP_CLASS_LDST:
        t.kind = native.TPL_LDST
        t.store_only = int(info.is_store and not info.is_load)
        form = info.address_form if (info.is_load or info.is_store) else None
        if isinstance(form, a64.BaseOffset):
            t.addr, t.base, t.offset = native.ADDR_BASE, CAPTURE_SLOT[form.base], form.offset
        elif isinstance(form, a64.Literal):
            t.addr, t.offset = native.ADDR_LITERAL, form.offset
        elif isinstance(form, a64.RegisterOffset):
            t.addr, t.base, t.index = (native.ADDR_REGOFF, CAPTURE_SLOT[form.base],
                                       CAPTURE_SLOT[form.index])
            t.extend, t.shift = form.extend, form.shift   # (a64.EXTEND_* = SPE_EXTEND_*)
        elif form is not None:
            t.kind = native.TPL_PYTHON
    elif check is None:
        t.kind = native.TPL_OTHER
    elif isinstance(check, a64.ConditionCheck):
        t.kind, t.cond = native.TPL_OTHER, check.cond
    else:
        t.kind = native.TPL_PYTHON
    return t


@lru_cache(maxsize=1 << 16)
def _template_bytes(pc: int, el: int, ns: int, word: int) -> bytes:
    """:meth:`NativeRecords.template`, as the bytes of the struct."""
    return bytes(_template(pc, el, ns, a64.decode(word)))


def plan_steps(words: tuple[int, ...], plan: tuple[int, ...]) -> bytes | None:
    """The steps of an evaluation plan (the indexes of the block's instructions ``words`` to
    evaluate, in order: :meth:`spe_emu.cpu.machine.Machine._prediction_mode`) for the native
    evaluator, as the bytes of ``SpeStep`` structs; None when a step is not one it runs."""
    out = []
    for j in plan:
        step = a64.evaluator(words[j])
        encoded = None if step is None else _step(step.op, 4 * j)
        if encoded is None:
            return None
        out.append(bytes(encoded))
    return b"".join(out)


def _slot(reg: int | None) -> int:
    return native.NO_REG if reg is None else CAPTURE_SLOT[reg]


def _step(op: tuple, at: int) -> native.SpeStep | None:
    """``a64.Step.op`` of the instruction at byte offset ``at`` in its block as a native step
    (None: a step or address form the native evaluator does not know)."""
    kind = op[0] if op else None
    if kind in ("add", "sub"):
        _, rd, rn, operand2, mask, flags = op
        step = native.SpeStep(kind=native.STEP_ADD if kind == "add" else native.STEP_SUB,
                              dst=_slot(rd), src=_slot(rn), mask=mask, flags=int(flags),
                              op2=native.NO_REG, at=at)
        if operand2[0] == "imm":
            step.imm = operand2[1]
        elif operand2[1] is not None:          # (XZR, shifted, is the immediate 0)
            step.op2, step.shift_type, step.shift = _slot(operand2[1]), *operand2[2:]
        return step
    if kind == "mov":
        _, rd, rm, mask = op
        return native.SpeStep(kind=native.STEP_MOV, dst=_slot(rd), src=_slot(rm), mask=mask,
                              at=at)
    if kind != "load":
        return None
    _, rt, size, sext, wb, form = op
    step = native.SpeStep(kind=native.STEP_LOAD, dst=_slot(rt), size=size, sext=sext,
                          writeback=int(wb is not None), wb=wb or 0, at=at)
    if isinstance(form, a64.BaseOffset):
        step.form, step.src, step.imm = native.ADDR_BASE, _slot(form.base), form.offset & M64
    elif isinstance(form, a64.Literal):
        step.form, step.imm = native.ADDR_LITERAL, form.offset & M64
    elif isinstance(form, a64.RegisterOffset):
        step.form, step.src, step.index = (native.ADDR_REGOFF, _slot(form.base),
                                           _slot(form.index))
        step.extend, step.shift = form.extend, form.shift
    else:
        return None
    return step


@lru_cache(maxsize=1)
def _fixed_fields() -> tuple[tuple[tuple[str, int], ...], tuple[int, ...]]:
    """The recorder's fixed inputs, computed once for the process from their declarations:
    ((field, value) of the one-byte packet headers, event numbers and fixed latencies, and
    ``hdr_events``: the Events packet header for payloads of 1, 2, 4 and 8 bytes, the smallest
    that holds the events)."""
    fields = (
        ("hdr_target", _header(P.address_packet(P.ADDR_BRANCH_TARGET, 0))),
        ("hdr_va", _header(P.address_packet(P.ADDR_DATA_VA, 0))),
        ("hdr_pa", _header(P.address_packet(P.ADDR_DATA_PA, 0))),
        # (the PA packet's address bits and NS bit, from its encoder)
        ("pa_mask", int.from_bytes(P.data_pa_bytes(M64, 0)[1:], "little")),
        ("pa_ns", int.from_bytes(P.data_pa_bytes(0, 1)[1:], "little")),
        ("hdr_total", _header(P.counter_packet(P.COUNTER_TOTAL, 0))),
        ("hdr_issue", _header(P.counter_packet(P.COUNTER_ISSUE, 0))),
        ("hdr_xlat", _header(P.counter_packet(P.COUNTER_XLAT, 0))),
        ("hdr_timestamp", _header(P.timestamp_packet(0))),
        ("hdr_end", _header(P.end_packet())),
        ("ev_retired", P.EV_RETIRED), ("ev_not_taken", P.EV_NOT_TAKEN),
        ("ev_mispred", P.EV_MISPRED), ("lat_store", R.STORE_CYCLES),
        ("lat_issue", R.ISSUE_CYCLES),
        ("counter_max", P.COUNTER_MAX))
    events = tuple(_header(P.events_packet(1 << (8 * size - 1))) for size in (1, 2, 4, 8))
    return fields, events


@lru_cache(maxsize=1 << 12)
def block_templates(block: int, code: bytes, el: int, ns: int) -> bytes:
    """The templates (:meth:`NativeRecords.template`) of every instruction of the block
    ``code`` at ``block`` sampled at ``el``/``ns``, as the bytes of consecutive structs (for
    :meth:`NativeRecords.add_templates`); remembered for the process (a pure function of its
    arguments)."""
    return b"".join(_template_bytes(block + 4 * k, el, ns, word)
                    for k, (word,) in enumerate(struct.iter_unpack("<I", code)))
