"""Translation faults of the emulator's own accesses (the stage 1 walker's verdicts), shared by
the SPU's Profiling Buffer writes and the machine's host-side accesses (Arm ARM D8.3,
"Translation faults"), and the split of an access at 4 KiB page boundaries."""

from __future__ import annotations

from typing import Iterator

from ..errors import GuestError

FSC_ADDRESS_SIZE = 0b000000
FSC_TRANSLATION = 0b000100
FSC_ACCESS_FLAG = 0b001000
FSC_PERMISSION = 0b001100
FSC_WALK_EXTERNAL = 0b010100
"""Long-descriptor FSCs of stage 1 and stage 2 faults, the level in bits[1:0]
(``EncodeLDFSC()``): address size, translation, Access flag, permission, synchronous External
abort on a translation table walk."""
FSC_KIND_MASK = ~0b11
"""Clears the level of a long-descriptor FSC (its bits[1:0])."""
FSC_TRANSLATION_L3 = FSC_TRANSLATION | 3
FSC_SYNC_EXTERNAL_ABORT = 0b010000
"""FSC: synchronous External abort, not on a translation table walk."""


class TranslationFault(GuestError):
    """Raised by a translate callback: the VA has no valid mapping for the access (a
    GuestError, so a fault the host itself cannot get past ends the run with one line).

    Attributes:
        va: the virtual address whose access faulted.
        fsc: the long-descriptor fault status code (the level in bits[1:0]).
        stage: 1, or 2 for a fault of the stage 2 translation (Arm ARM D8.3 "stage 2
            faults"; a Profiling Buffer write reports it with PMBSR_EL1.EC = 0b100101).
        ipa: for a stage 2 fault, the intermediate physical address that faulted.
        s1ptw: for a stage 2 fault, whether it happened on a stage 1 translation table
            walk's read (ESR_ELx.ISS.S1PTW).
    """

    def __init__(self, va: int, fsc: int = FSC_TRANSLATION_L3, *, stage: int = 1,
                 ipa: int | None = None, s1ptw: bool = False):
        super().__init__(f"{'stage 2 ' if stage == 2 else ''}translation fault at {va:#x}")
        self.va = va
        self.fsc = fsc
        self.stage = stage
        self.ipa = ipa
        self.s1ptw = s1ptw


class ExternalAbort(TranslationFault):
    """A write of the emulator's own (the SPU's Profiling Buffer) that reached no memory or
    device: a synchronous External abort (FSC 0b010000) at ``va``, reported like a fault
    (SPE §3.5.4, Arm ARM D17.8.4)."""

    def __init__(self, va: int):
        super().__init__(va, FSC_SYNC_EXTERNAL_ABORT)
        self.args = (f"external abort at {va:#x}",)


def page_chunks(va: int, size: int) -> Iterator[tuple[int, int, int]]:
    """Split ``size`` bytes at ``va`` at 4 KiB page boundaries: (VA, start, end) of each piece,
    start/end being offsets into the ``size`` bytes (guest memory is translated per page)."""
    done = 0
    while done < size:
        chunk = min(size - done, 0x1000 - ((va + done) & 0xFFF))
        yield va + done, done, done + chunk
        done += chunk
