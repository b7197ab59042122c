"""Assemble AArch64 text with keystone, accepting the SPE names keystone 0.9 does not know.

``psb csync`` becomes ``hint #17`` and every system register of the SPE register table (and the
GIC CPU interface table) becomes its generic ``s<op0>_<op1>_c<n>_c<m>_<op2>`` name, so tests and
users can write ``msr pmscr_el1, x0``. The translation is driven by the same tables the model
uses, so a register added to the model is known here too.
"""

from __future__ import annotations

import re

from keystone import KS_ARCH_ARM64, KS_MODE_LITTLE_ENDIAN, Ks, KsError

from .devices.gicv3 import ICC_REGISTERS
from .errors import SpeEmuError
from .spe.config import SpeConfig
from .spe.registers import spe_registers


class AssemblyError(SpeEmuError):
    """keystone rejected the text (the message names the line)."""


def _names() -> dict[str, str]:
    out = {}
    every = SpeConfig(ernd=1, pmsver=5, fne=1, lds=1, fds=1, flag_updates=1)  # all registers
    for table in (spe_registers(every), ICC_REGISTERS):
        for spec in table:
            e = spec.encoding
            out[spec.name.lower()] = f"s{e.op0}_{e.op1}_c{e.crn}_c{e.crm}_{e.op2}"
    return out


_NAMES = _names()
_NAME_RE = re.compile(r"\b(" + "|".join(sorted(_NAMES, key=len, reverse=True)) + r")\b",
                      re.IGNORECASE)
_PSB_RE = re.compile(r"\bpsb\s+csync\b", re.IGNORECASE)


def translate(text: str) -> str:
    """The text with SPE mnemonics and register names replaced by keystone-known forms."""
    text = _PSB_RE.sub("hint #17", text)
    return _NAME_RE.sub(lambda m: _NAMES[m.group(1).lower()], text)


UNKNOWN_ERROR_ATTEMPTS = 3
"""keystone 0.9 now and then fails a text it assembles at other times with an error number
it has no message for ("Unknown error"; it depends on the process's state, cf. keystone issue
#487); such a failure is tried again with a new engine, up to this many attempts in all."""


def assemble(text: str, address: int = 0) -> bytes:
    """Machine code for ``text`` placed at ``address``.

    Raises:
        AssemblyError: keystone could not assemble the text.
    """
    source = translate(text)
    for attempt in range(UNKNOWN_ERROR_ATTEMPTS):
        ks = Ks(KS_ARCH_ARM64, KS_MODE_LITTLE_ENDIAN)
        try:
            encoding, _ = ks.asm(source, address)
        except KsError as exc:
            if "Unknown error" in str(exc) and attempt + 1 < UNKNOWN_ERROR_ATTEMPTS:
                continue
            raise AssemblyError(f"cannot assemble: {exc}") from None
        return bytes(encoding or b"")
    raise AssertionError("unreachable")
