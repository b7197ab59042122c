"""Thin, allocation-free accessors to libunicorn for the run loop's hot path.

The Python binding's ``reg_read``/``reg_read_batch``/``mem_read`` spend several microseconds
per call converting arguments; at every sample the run loop needs the PC, the instruction word
and a few registers. :class:`FastAccess` calls the same libunicorn entry points (the binding's
own ctypes prototypes) with buffers allocated once per register set. Errors are raised as the
binding's :class:`unicorn.UcError`.
"""

from __future__ import annotations

import ctypes

from unicorn import Uc, UcError
from unicorn.arm64_const import UC_ARM64_REG_CP_REG
from unicorn.unicorn_py3.arch.arm64 import UcRegCP64
from unicorn.unicorn_py3.unicorn import uclib


class FastAccess:
    """Direct register and memory reads and writes for one engine."""

    def __init__(self, uc: Uc):
        self._uch = uc._uch
        self._one = ctypes.c_uint64()
        self._one_ref = ctypes.byref(self._one)
        self._word = ctypes.create_string_buffer(4)
        self._cp = UcRegCP64()
        self._cp_ref = ctypes.byref(self._cp)
        self._batches: dict[tuple, tuple] = {}

    @property
    def uch(self):
        """The engine's ``uc_engine *`` (for native code)."""
        return self._uch

    def reg(self, reg_id: int) -> int:
        """One register (X0-X30, SP, PC, NZCV, PSTATE ...). 32-bit registers fill only the
        low half, so the buffer is cleared first."""
        self._one.value = 0
        err = uclib.uc_reg_read(self._uch, reg_id, self._one_ref)
        if err:
            raise UcError(err)
        return self._one.value

    def cpr(self, enc: tuple[int, int, int, int, int]) -> int:
        """The system register with encoding ``enc`` = (op0, op1, CRn, CRm, op2), as
        ``Uc.cpr_read`` reads it."""
        cp = self._cp
        cp.op0, cp.op1, cp.crn, cp.crm, cp.op2 = enc
        cp.val = 0
        err = uclib.uc_reg_read(self._uch, UC_ARM64_REG_CP_REG, self._cp_ref)
        if err:
            raise UcError(err)
        return cp.val

    def set_reg(self, reg_id: int, value: int) -> None:
        """Write one register (X0-X30, SP, PC, PSTATE, ELR_ELx, ...)."""
        self._one.value = value
        err = uclib.uc_reg_write(self._uch, reg_id, self._one_ref)
        if err:
            raise UcError(err)

    def set_cpr(self, enc: tuple[int, int, int, int, int], value: int) -> None:
        """Write the system register with encoding ``enc`` = (op0, op1, CRn, CRm, op2), as
        ``Uc.cpr_write`` does."""
        cp = self._cp
        cp.op0, cp.op1, cp.crn, cp.crm, cp.op2 = enc
        cp.val = value
        err = uclib.uc_reg_write(self._uch, UC_ARM64_REG_CP_REG, self._cp_ref)
        if err:
            raise UcError(err)

    def regs(self, reg_ids: tuple[int, ...]) -> dict[int, int]:
        """Several registers in one libunicorn call: ``{reg_id: value}`` (:meth:`snapshot`)."""
        return dict(zip(reg_ids, self.snapshot(reg_ids, ())))

    def snapshot(self, reg_ids: tuple[int, ...], encs: tuple[tuple[int, int, int, int, int], ...]
                 ) -> tuple[int, ...]:
        """Registers ``reg_ids`` then the system registers with encodings ``encs`` (as
        :meth:`cpr` reads them), in one libunicorn call: their values, in that order. The
        buffers are kept per (registers, encodings) and cleared before each read, so a 32-bit
        register never shows stale upper bits."""
        key = (reg_ids, encs)
        batch = self._batches.get(key)
        if batch is None:
            n = len(reg_ids)
            values = (ctypes.c_uint64 * n)()
            cps = (UcRegCP64 * len(encs))()
            for cp, enc in zip(cps, encs):
                cp.op0, cp.op1, cp.crn, cp.crm, cp.op2 = enc
            ptrs = (ctypes.c_void_p * (n + len(encs)))(
                *(ctypes.addressof(values) + 8 * i for i in range(n)),
                *(ctypes.addressof(cp) for cp in cps))
            ids = (ctypes.c_int32 * (n + len(encs)))(
                *reg_ids, *(UC_ARM64_REG_CP_REG for _ in encs))
            batch = self._batches[key] = (ids, ptrs, values, cps, n + len(encs))
        ids, ptrs, values, cps, count = batch
        ctypes.memset(values, 0, ctypes.sizeof(values))   # (32-bit registers fill half)
        err = uclib.uc_reg_read_batch(self._uch, ids, ptrs, count)
        if err:
            raise UcError(err)
        return (*values, *(cp.val for cp in cps))

    def word(self, pa: int) -> int:
        """The little-endian 32-bit word at physical address ``pa``."""
        err = uclib.uc_mem_read(self._uch, pa, self._word, 4)
        if err:
            raise UcError(err)
        return int.from_bytes(self._word.raw, "little")

    def read(self, pa: int, n: int) -> bytes:
        """``n`` bytes at physical address ``pa``."""
        buf = ctypes.create_string_buffer(n)
        err = uclib.uc_mem_read(self._uch, pa, buf, n)
        if err:
            raise UcError(err)
        return buf.raw

    def write(self, pa: int, data: bytes) -> None:
        """Write ``data`` at physical address ``pa``."""
        err = uclib.uc_mem_write(self._uch, pa, data, len(data))
        if err:
            raise UcError(err)
