"""The register-table machinery validates declarations and derives masks (spe_emu.sysreg)."""

import pytest

from spe_emu.errors import RegisterTableError
from spe_emu.sysreg import Encoding, RegisterTable, reg


def test_masks_are_derived_from_fields():
    r = reg("X", (3, 0, 9, 9, 0), "A 7:4", "B 0", "C 1 RO", res1=1 << 63)
    assert r.field_mask == 0xF3
    assert r.res0 == ((1 << 64) - 1) & ~0xF3 & ~(1 << 63)
    assert r.write_mask == 0xF1
    assert r.get(0xA5, "A") == 0xA
    assert r.set(0, "A", 3) == 0x30
    assert r.make(A=1, B=1) == (1 << 63) | 0x11


def test_apply_write_masks_res0_keeps_read_only_and_res1():
    r = reg("X", (3, 0, 9, 9, 0), "A 7:4", "C 1 RO", res1=1 << 63)
    old = r.make(C=1)
    assert r.apply_write(old, (1 << 64) - 1) == (1 << 63) | 0xF0 | 0x2
    assert r.apply_write(old, 0) == (1 << 63) | 0x2


@pytest.mark.parametrize("fields, kw, message", [
    (("A 7:4", "B 5:5"), {}, "overlaps"),
    (("A 7:4", "A 9:8"), {}, "duplicate"),
    (("A 64:60",), {}, "bad bit range"),
    (("A 3:0",), {"reset": 0x10}, "RES0"),
    (("A 3:0",), {"res1": 0x1}, "RES1 bits overlap"),
])
def test_bad_declarations_are_refused(fields, kw, message):
    with pytest.raises(RegisterTableError, match=message):
        reg("BAD", (3, 0, 9, 9, 0), *fields, **kw)


def test_field_value_must_fit():
    r = reg("X", (3, 0, 9, 9, 0), "A 1:0")
    with pytest.raises(RegisterTableError, match="does not fit"):
        r.set(0, "A", 4)
    with pytest.raises(RegisterTableError, match="no field"):
        r.get(0, "Z")


def test_encoding_range_and_text():
    assert str(Encoding(3, 0, 9, 10, 7)) == "S3_0_C9_C10_7"
    with pytest.raises(RegisterTableError):
        Encoding(4, 0, 0, 0, 0)


def test_table_refuses_duplicates():
    a = reg("A", (3, 0, 9, 9, 0), "X 0")
    with pytest.raises(RegisterTableError, match="declared twice"):
        RegisterTable([a, reg("A", (3, 0, 9, 9, 1), "X 0")])
    with pytest.raises(RegisterTableError, match="share encoding"):
        RegisterTable([a, reg("B", (3, 0, 9, 9, 0), "X 0")])
