"""The Profiling Buffer: PMBPTR_EL1 / PMBLIMITR_EL1 / PMBSR_EL1 and Profiling Buffer management
events (SPE supplement §3.4, §3.5; Arm ARM D17.1 "sequential model" of record writes).

Owns the writes of record bytes into guest memory and the decision to raise a management
event. PMBIRQ is a pure function of PMBSR_EL1.S (§3.5: "PMBIRQ is a level interrupt driven by
PMBSR_EL1.S"; with FEAT_SPE_EXC also of the controls ``SPEInterruptEnabled()`` reads); the owner
recomputes the line after every change. With FEAT_SPE_EXC an event is recorded in the
PMBSR_ELx :attr:`ProfilingBuffer.route` names (``ReportSPEEvent()``, :mod:`.exc`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..arch.faults import ExternalAbort, TranslationFault, page_chunks
from ..arch.mmu import FSC_KIND_MASK, FSC_WALK_EXTERNAL
from ..sysreg import RegisterTable
from .config import SpeConfig
from .registers import (BSC_FILLED, EC_OTHER, EC_STAGE1_ABORT, EC_STAGE2_ABORT, PMBSR_MSS_ABORT,
                        PMBSR_MSS_OTHER)



@dataclass(slots=True)
class ManagementEvent:
    """A Profiling Buffer management event that happened (for statistics and logs)."""

    kind: str           # "buffer-full", "no-space", "fault"
    pmbsr: int
    pmbptr: int
    register: str = "PMBSR_EL1"   # the PMBSR_ELx that recorded it (FEAT_SPE_EXC)


class ProfilingBuffer:
    """Writes records at PMBPTR_EL1 and raises management events.

    Args:
        regs: the SPE register storage (name -> value), shared with the SPU.
        table: the SPE register table (field layouts).
        config: the implementation choices (MaxSize, Align).
        write_va: ``write_va(va, data)`` writes guest memory through the owning translation
            regime; raises :class:`TranslationFault` (stage 1 or 2, including an External
            abort on a walk) or :class:`ExternalAbort` (the write reached no memory).
        on_serror: called for each External abort that ``config.external_abort == "serror"``
            turns into a physical SError exception (Arm ARM D17.8.4.2).
    """

    def __init__(self, regs: dict[str, int], table: RegisterTable, config: SpeConfig,
                 write_va: Callable[[int, bytes], None],
                 on_serror: Callable[[], None] | None = None):
        self.regs = regs
        self.t = table
        self.write_va = write_va
        self.on_serror = on_serror
        self._external_abort = config.external_abort_behaviour
        self._no_space_dl = config.no_space_data_loss
        self._limit_mask = table["PMBLIMITR_EL1"].field("LIMIT").mask
        self._align = config.align_bytes
        self._max_record = config.max_record_bytes
        self.route: Callable[[int, int], str] | None = None
        """``route(ec, fsc)``: the PMBSR_ELx that records a management event (FEAT_SPE_EXC,
        Arm ARM Tables D17-5 to D17-7); None: PMBSR_EL1."""
        self.tap: Callable[[bytes], None] | None = None
        """Called with the bytes of every complete record written (padded, in write order):
        a host-side copy of what the SPU put into the buffer (``--perf-data`` on a board)."""

    @property
    def limit(self) -> int:
        """Address of the first byte past the buffer: PMBLIMITR_EL1.LIMIT:Zeros(12) (§4.3.2),
        which is the LIMIT field's bits in place."""
        return self.regs["PMBLIMITR_EL1"] & self._limit_mask

    @property
    def headroom_end(self) -> int:
        """The highest PMBPTR_EL1 a record write can leave without a buffer-full management
        event: 2**PMSIDR_EL1.MaxSize bytes below the limit (§3.5.2)."""
        return self.limit - self._max_record

    def _event(self, kind: str, *, ec: int, mss: int, dl: int | None = None,
               ea: bool = False) -> ManagementEvent:
        """Raise a Profiling Buffer management event (§3.5): PMBSR_ELx.{S, EC, MSS} and,
        when given, DL, and EA for an External abort (§3.5.4); the other fields are
        unchanged. x is 1, or with FEAT_SPE_EXC what :attr:`route` says (Arm ARM D17.8
        RHJXHT)."""
        name = "PMBSR_EL1"
        if self.route is not None:
            name = self.route(ec, PMBSR_MSS_ABORT[0].get(mss) if ec else 0)
        spec = self.t[name]
        value = self.regs[name]
        if ea:
            value = spec.set(value, "EA", 1)
        value = spec.set(value, "S", 1)
        value = spec.set(value, "EC", ec)
        value = spec.set(value, "MSS", mss)
        if dl is not None:
            value = spec.set(value, "DL", dl)
        self.regs[name] = value
        return ManagementEvent(kind, value, self.regs["PMBPTR_EL1"], name)

    def write_record(self, record: bytes) -> tuple[int, ManagementEvent | None]:
        """Write one complete record at PMBPTR_EL1 (§3.5.2, §3.5.3).

        Returns (bytes placed in the buffer including alignment padding -- 0 when the record
        was not written --, the management event the write raised or None).

        The caller has checked ``ProfilingBufferEnabled()``. Records are padded with Padding
        packets to 2**PMBIDR_EL1.Align. After the write, if fewer than 2**PMSIDR_EL1.MaxSize
        bytes remain below the limit, a buffer-full management event is generated
        (PMBSR_EL1.{S, EC, BSC} = {1, 0, 1}; PMBPTR_EL1 points after the last complete record).
        A record that does not fit at all (software broke the §3.4.1 rule) is not written and
        raises the same event, with DL = ``SpeConfig.no_space_data_loss`` (default 0: no byte
        reached memory, PMBPTR_EL1 points after the last complete record) -- the model's
        choice among the UNPREDICTABLE options.
        An MMU fault raises a Data Abort management event (Arm ARM D17.8.3): EC 0b100100 for
        stage 1, 0b100101 for stage 2, MSS.FSC = the fault's FSC with its level, PMBPTR_EL1 =
        the faulting virtual address (ESR, FAR and HPFAR_EL2 are not written) and DL = 1 if
        part of the record was written. External aborts (on the write or on a walk for it)
        are handled as ``SpeConfig.external_abort`` says (D17.8.4): reported the same way
        with PMBSR_EL1.EA = 1, ignored, or an SError exception.
        """
        record = self.padded(record)
        ptr = self.regs["PMBPTR_EL1"]
        if ptr + len(record) > self.limit:
            return 0, self._event("no-space", ec=EC_OTHER,
                                  mss=PMBSR_MSS_OTHER[0].set(0, BSC_FILLED),
                                  dl=int(self._no_space_dl))
        written, fault = self._write_pages(ptr, record)
        if fault is not None:
            on_walk = fault.fsc & FSC_KIND_MASK == FSC_WALK_EXTERNAL
            as_mmu_fault = on_walk and self._external_abort == "fault"
            self.regs["PMBPTR_EL1"] = fault.va
            return 0, self._event("fault",
                                  ec=EC_STAGE2_ABORT if fault.stage == 2 else EC_STAGE1_ABORT,
                                  mss=PMBSR_MSS_ABORT[0].set(0, fault.fsc),
                                  dl=1 if written else None,
                                  ea=(isinstance(fault, ExternalAbort) or on_walk)
                                  and not as_mmu_fault)
        ptr += len(record)
        self.regs["PMBPTR_EL1"] = ptr
        if self.tap is not None:
            self.tap(record)
        if ptr > self.headroom_end:
            return len(record), self._event("buffer-full", ec=EC_OTHER,
                                            mss=PMBSR_MSS_OTHER[0].set(0, BSC_FILLED))
        return len(record), None

    def write_records(self, records: list[bytes]) -> int | None:
        """Write several complete records at PMBPTR_EL1 in one go, each padded as
        :meth:`write_record` pads it, when that raises no management event: the last leaves at
        least 2**PMSIDR_EL1.MaxSize bytes below the limit. Returns the bytes placed, or None
        (nothing written) when the batch would not fit so.

        Raises:
            TranslationFault: a page of the batch does not translate (the caller has checked
                that it does; part of the batch may have been written).
        """
        return self.write_padded(b"".join(self.padded(r) for r in records))

    def write_padded(self, data: bytes) -> int | None:
        """:meth:`write_records` for records already padded and joined in ``data``: written
        only when no management event can result (the end stays at or below
        :attr:`headroom_end`, §3.5.2; the caller has checked the pages translate, §3.5.3)."""
        ptr = self.regs["PMBPTR_EL1"]
        if ptr + len(data) > self.headroom_end:
            return None
        fault = self._write_pages(ptr, data)[1]
        if fault is not None:
            raise fault
        self.regs["PMBPTR_EL1"] = ptr + len(data)
        if self.tap is not None:
            self.tap(data)
        return len(data)

    def padded(self, record: bytes) -> bytes:
        """``record`` followed by Padding packets (zero bytes) to 2**PMBIDR_EL1.Align."""
        return record + bytes(-len(record) % self._align)

    def _write_pages(self, ptr: int, data: bytes) -> tuple[int, TranslationFault | None]:
        """Write ``data`` at ``ptr`` page by page, so that a fault stops at the faulting
        address. An External abort that ``SpeConfig.external_abort`` ignores or makes an
        SError drops that page's bytes and the write goes on (Arm ARM D17.8.4.1, D17.8.4.2).
        Returns (bytes written, the fault or None)."""
        written = 0
        for va, start, end in page_chunks(ptr, len(data)):
            try:
                self.write_va(va, data[start:end])
            except TranslationFault as fault:
                external = (isinstance(fault, ExternalAbort)
                            or fault.fsc & FSC_KIND_MASK == FSC_WALK_EXTERNAL)
                if not external or self._external_abort not in ("ignore", "serror"):
                    return written, fault
                if self._external_abort == "serror" and self.on_serror is not None:
                    self.on_serror()
            written = end
        return written, None
