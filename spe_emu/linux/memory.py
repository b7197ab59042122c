"""The user address space of a Linux process run at EL0 under the firmware.

The firmware's TTBR0_EL1 tables (4 KiB granule, 39-bit VA, level 1 start: ``firmware/start.S``)
identity-map the devices and its own RAM for EL1. The host plays the kernel's memory manager:
it takes 4 KiB physical pages from a pool of RAM the firmware does not use, writes level 2 and
level 3 tables of its own under the firmware's level 1 table, and maps the process's pages there
with EL0 permissions (Arm ARM D8.3 "Translation table descriptor formats", D8.4 "Memory access
control"). A 2 MiB slot the firmware maps itself (its RAM, a device) is never taken; device
blocks of the first GiB that hold no device may be (the firmware maps the whole GiB as Device
memory in 2 MiB blocks).

After a change that removes or narrows a mapping the firmware must invalidate the TLBs
(:attr:`AddressSpace.tlb_dirty`; the firmware runs ``TLBI VMALLE1`` when the host says so).
Permissions are per page: PROT_READ -> EL0 read, PROT_WRITE -> AP[2] clear, PROT_EXEC -> UXN
clear; PXN is always set. Pages are backed when mapped (no demand paging), except PROT_NONE
reservations, which get memory when mprotect makes them accessible.
"""

from __future__ import annotations

from ..arch.firmware_regs import AP_EL0_RW, SH_INNER
from ..arch.mmu import DESC
from ..errors import GuestError

PAGE = 0x1000
PAGE_SHIFT = 12
ENTRIES = 512
L1_SHIFT, L2_SHIFT = 30, 21
VA_BITS = 39
"""The firmware's TCR_EL1.T0SZ = 25: a 39-bit user address space."""
VA_LIMIT = 1 << VA_BITS
PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
PROT_MASK = PROT_READ | PROT_WRITE | PROT_EXEC
MT_DEVICE, MT_NORMAL = 0, 1
"""MAIR_EL1 attribute indices the firmware programs (``firmware/sysreg.h`` MT_*)."""
AP2_READ_ONLY = 1
EL0_ACCESS = AP_EL0_RW  # AP[1] = 1: EL0 may access


class OutOfMemory(Exception):
    """No physical page or no room in the address space (the syscall returns -ENOMEM)."""


def page_down(a: int) -> int:
    return a & ~(PAGE - 1)


def page_up(a: int) -> int:
    return (a + PAGE - 1) & ~(PAGE - 1)


class AddressSpace:
    """The process's pages: VA page -> [PA page or None, prot].

    Args:
        mem_read, mem_write: physical memory access (bytes).
        pool: ``(lo, hi)`` physical range the host may use for pages and tables (bytes).
        reserved: VA ranges ``(lo, hi)`` the firmware maps itself (devices, its RAM), whole
            2 MiB slots: never given to the process.
    """

    def __init__(self, mem_read, mem_write, pool: tuple[int, int],
                 reserved: tuple[tuple[int, int], ...] = ()):
        self._read = mem_read
        self._write = mem_write
        self._next_pa, self._pool_end = pool
        self._pool_start = pool[0]
        self._free: list[int] = []
        self._reserved = reserved
        self.pages: dict[int, list] = {}
        self.l1 = 0  # PA of the firmware's level 1 table, set by attach()
        self.tlb_dirty = False
        self.pages_in_use = 0
        self.peak_pages = 0

    # -- physical pages ---------------------------------------------------------------------
    def _alloc(self) -> int:
        if self._free:
            pa = self._free.pop()
            self._write(pa, bytes(PAGE))
        elif self._next_pa + PAGE <= self._pool_end:
            pa = self._next_pa
            self._next_pa += PAGE
        else:
            raise OutOfMemory("out of physical pages")
        self.pages_in_use += 1
        self.peak_pages = max(self.peak_pages, self.pages_in_use)
        return pa

    def pool_bytes(self) -> tuple[int, int]:
        """(total, free) bytes of the physical pool."""
        total = self._pool_end - self._pool_start
        return total, total - self.pages_in_use * PAGE

    def _release(self, pa: int) -> None:
        self._free.append(pa)
        self.pages_in_use -= 1

    # -- tables -----------------------------------------------------------------------------
    def _desc(self, pa: int) -> int:
        return int.from_bytes(self._read(pa, 8), "little")

    def _set_desc(self, pa: int, value: int) -> None:
        self._write(pa, value.to_bytes(8, "little"))

    def attach(self, l1: int, private: tuple[tuple[int, int], ...] = ()) -> None:
        """Use the firmware's level 1 table at ``l1`` (PA); the identity-mapped 2 MiB blocks of
        the ``private`` physical ranges (the guest region, whose pages become the pool) are
        removed so that EL0 cannot reach the process's page tables through them."""
        self.l1 = l1
        for lo, hi in private:
            for va in range(lo, hi, 1 << L2_SHIFT):
                slot = self._l2_slot(va)
                if slot is not None and DESC.get(self._desc(slot), "VALID"):
                    self._set_desc(slot, 0)
        self.tlb_dirty = True

    @staticmethod
    def _slot(table: int, va: int, shift: int) -> int:
        """PA of the descriptor for ``va`` in the next-level table that the table descriptor
        ``table`` points to (``shift``: that level's VA shift; Arm ARM D8.2)."""
        return (DESC.get(table, "OA") << PAGE_SHIFT) + ((va >> shift) % ENTRIES) * 8

    def _l2_slot(self, va: int) -> int | None:
        e1 = self._desc(self.l1 + (va >> L1_SHIFT) * 8)
        if not DESC.get(e1, "VALID") or not DESC.get(e1, "TYPE"):
            return None
        return self._slot(e1, va, L2_SHIFT)

    def _l3_slot(self, va: int, create: bool) -> int | None:
        """PA of the level 3 descriptor for ``va``, making the tables on the way if
        ``create``; None if absent. Raises OutOfMemory for a slot the firmware owns."""
        slot1 = self.l1 + (va >> L1_SHIFT) * 8
        e1 = self._desc(slot1)
        if not DESC.get(e1, "VALID"):
            if not create:
                return None
            e1 = DESC.make(VALID=1, TYPE=1, OA=self._alloc() >> PAGE_SHIFT)
            self._set_desc(slot1, e1)
        elif not DESC.get(e1, "TYPE"):
            raise OutOfMemory(f"VA {va:#x} is in a 1 GiB block of the firmware")
        slot2 = self._slot(e1, va, L2_SHIFT)
        e2 = self._desc(slot2)
        if DESC.get(e2, "VALID") and DESC.get(e2, "TYPE"):
            return self._slot(e2, va, PAGE_SHIFT)
        if not create:
            return None
        if DESC.get(e2, "VALID"):
            # a block of the firmware's: only an empty device block may be taken
            if DESC.get(e2, "AttrIndx") != MT_DEVICE or self._holds_device(va):
                raise OutOfMemory(f"VA {va:#x} is in a 2 MiB block the firmware uses")
            self.tlb_dirty = True
        e2 = DESC.make(VALID=1, TYPE=1, OA=self._alloc() >> PAGE_SHIFT)
        self._set_desc(slot2, e2)
        return self._slot(e2, va, PAGE_SHIFT)

    def _holds_device(self, va: int) -> bool:
        lo = va & ~((1 << L2_SHIFT) - 1)
        return not self.usable(lo, lo + (1 << L2_SHIFT))

    def usable(self, lo: int, hi: int) -> bool:
        """Whether ``[lo, hi)`` may hold process pages (inside the user address space, clear of
        device slots; the firmware's own slots are found when the tables are made)."""
        return PAGE <= lo < hi <= VA_LIMIT and not any(
            r_lo < hi and lo < r_hi for r_lo, r_hi in self._reserved)

    @staticmethod
    def _pte(pa: int, prot: int) -> int:
        if not prot & PROT_MASK:
            return 0
        return DESC.make(VALID=1, TYPE=1, AttrIndx=MT_NORMAL, SH=SH_INNER, AF=1,
                         AP1=EL0_ACCESS, AP2=0 if prot & PROT_WRITE else AP2_READ_ONLY,
                         PXN=1, UXN=0 if prot & PROT_EXEC else 1, OA=pa >> PAGE_SHIFT)

    # -- mapping ----------------------------------------------------------------------------
    def is_free(self, lo: int, hi: int) -> bool:
        """Whether no page of ``[lo, hi)`` is mapped."""
        return all((va >> PAGE_SHIFT) not in self.pages for va in range(lo, hi, PAGE))

    def is_mapped(self, lo: int, hi: int) -> bool:
        """Whether every page of ``[lo, hi)`` is mapped (PROT_NONE ones included)."""
        return all((va >> PAGE_SHIFT) in self.pages for va in range(lo, hi, PAGE))

    def prot_at(self, va: int) -> int:
        """The PROT_* bits of the mapped page holding ``va`` (KeyError if none)."""
        return self.pages[va >> PAGE_SHIFT][1]

    def map(self, lo: int, hi: int, prot: int) -> None:
        """Map fresh zeroed pages over ``[lo, hi)`` (page aligned), replacing what was there.

        Raises:
            OutOfMemory: no physical page left, or a slot the firmware or a device owns.
        """
        if not self.usable(lo, hi):
            raise OutOfMemory(f"{lo:#x}-{hi:#x} is outside the usable address space")
        self.unmap(lo, hi)
        template, oa = self._pte(0, prot), DESC.field("OA")   # (pages differ by OA only)
        va = lo
        while va < hi:
            # (the pages up to the end of va's level 3 table: one write of their descriptors,
            # each 0 for PROT_NONE as unmap left it; tables and pages allocated in VA order)
            end = min(hi, (va | ((1 << L2_SHIFT) - 1)) + 1)
            slot = self._l3_slot(va, True)
            descs = bytearray()
            try:
                for page in range(va, end, PAGE):
                    pa = self._alloc() if prot & PROT_MASK else None
                    self.pages[page >> PAGE_SHIFT] = [pa, prot]
                    desc = 0 if pa is None else oa.set(template, pa >> PAGE_SHIFT)
                    descs += desc.to_bytes(8, "little")
            finally:   # (out of pages: the pages mapped so far are in the tables, as before)
                self._write(slot, bytes(descs))
            va = end

    def unmap(self, lo: int, hi: int) -> None:
        """Remove the pages of ``[lo, hi)`` (absent pages are fine)."""
        for va in range(lo, hi, PAGE):
            entry = self.pages.pop(va >> PAGE_SHIFT, None)
            if entry is None:
                continue
            slot = self._l3_slot(va, False)
            if slot is not None:
                self._set_desc(slot, 0)
            if entry[0] is not None:
                self._release(entry[0])
            self.tlb_dirty = True

    def protect(self, lo: int, hi: int, prot: int) -> bool:
        """Change the permissions of ``[lo, hi)``; False if a page is not mapped (ENOMEM)."""
        if not self.is_mapped(lo, hi):
            return False
        for va in range(lo, hi, PAGE):
            entry = self.pages[va >> PAGE_SHIFT]
            if entry[0] is None and prot & PROT_MASK:
                entry[0] = self._alloc()
            entry[1] = prot
            self._set_desc(self._l3_slot(va, True), self._pte(entry[0] or 0, prot))
        self.tlb_dirty = True
        return True

    def move(self, old: int, new: int, size: int) -> None:
        """Move the pages of ``[old, old + size)`` to ``new`` (free, page aligned): the
        physical pages follow, nothing is copied (mremap)."""
        for off in range(0, size, PAGE):
            entry = self.pages.pop((old + off) >> PAGE_SHIFT)
            slot = self._l3_slot(old + off, False)
            if slot is not None:
                self._set_desc(slot, 0)
            self.pages[(new + off) >> PAGE_SHIFT] = entry
            if entry[0] is not None:
                self._set_desc(self._l3_slot(new + off, True), self._pte(entry[0], entry[1]))
        self.tlb_dirty = True

    # -- access on behalf of the process ----------------------------------------------------
    def _chunks(self, va: int, n: int, need: int):
        done = 0
        while done < n:
            a = va + done
            entry = self.pages.get(a >> PAGE_SHIFT)
            if entry is None or entry[0] is None or not entry[1] & need:
                raise GuestError(f"bad user address {a:#x}")
            k = min(n - done, PAGE - (a & (PAGE - 1)))
            yield entry[0] + (a & (PAGE - 1)), done, k
            done += k

    def accessible(self, va: int, n: int, need: int) -> bool:
        """Whether the process may access (``need``: PROT_READ / PROT_WRITE) every byte of
        ``[va, va + n)``."""
        for page in range(page_down(va), va + n, PAGE):
            entry = self.pages.get(page >> PAGE_SHIFT)
            if entry is None or entry[0] is None or not entry[1] & need:
                return False
        return True

    def read(self, va: int, n: int) -> bytes:
        """``n`` bytes the process may read at ``va``. Raises GuestError (-> EFAULT)."""
        if n <= 0:
            return b""
        return b"".join(self._read(pa, k) for pa, _d, k in self._chunks(va, n, PROT_READ))

    def write(self, va: int, data: bytes, force: bool = False) -> None:
        """Store ``data`` at ``va`` where the process may write (``force``: any mapped page,
        for loading). Raises GuestError (-> EFAULT)."""
        for pa, d, k in self._chunks(va, len(data), PROT_MASK if force else PROT_WRITE):
            self._write(pa, bytes(data[d:d + k]))

    def read_cstr(self, va: int, limit: int = 4096) -> bytes:
        """The NUL-terminated string at ``va`` (without the NUL), at most ``limit`` bytes.
        Raises GuestError (-> EFAULT) for an unmapped byte or no NUL within the limit."""
        out = bytearray()
        while len(out) < limit:
            k = PAGE - ((va + len(out)) & (PAGE - 1))
            chunk = self.read(va + len(out), min(k, limit - len(out)))
            end = chunk.find(b"\0")
            if end >= 0:
                return bytes(out + chunk[:end])
            out += chunk
        raise GuestError(f"string at {va:#x} longer than {limit} bytes")
