"""The fast run loop hooks every ERET and PSB CSYNC (not MSR DAIFSet/DAIFClr) in executable code
(Machine._control_sites, through control_offsets); the scan is vectorised over the segment's words
and must find exactly the word-aligned instructions a word-by-word decode finds."""

import struct

from hypothesis import given
from hypothesis import strategies as st

from spe_emu.cpu.machine import ERET_WORD, PSB_CSYNC_WORD, control_offsets

DAIFSET_2 = 0xD50342DF     # MSR DAIFSet, #2
DAIFCLR_F = 0xD5034FFF     # MSR DAIFClr, #0xf
NEAR_MISSES = [0xD69F03E1, 0xD50342BF, 0xD503421F, 0xD50352DF, 0xD51342DF,
               0xD503225F, 0xD503221F]  # (TSB CSYNC, ESB)


def by_words(data: bytes) -> list[int]:
    return [off for off in range(0, len(data) - 3, 4)
            if struct.unpack_from("<I", data, off)[0] in (ERET_WORD, PSB_CSYNC_WORD)]


def test_known_encodings():
    data = struct.pack("<6I", 0xD503201F, ERET_WORD, DAIFSET_2, *NEAR_MISSES[:2], DAIFCLR_F)
    # (MSR DAIFSet only masks; an unmasking MSR DAIFClr is seen by the native block hook)
    assert control_offsets(data) == (4,)


def test_psb_csync_is_found():
    data = struct.pack("<4I", 0xD503201F, PSB_CSYNC_WORD, 0xD503225F, 0xD5033F9F)
    assert control_offsets(data) == (4,)


def test_misaligned_copy_is_not_reported():
    data = b"\x00\x00" + struct.pack("<I", ERET_WORD) + b"\x00\x00" + struct.pack("<I", PSB_CSYNC_WORD)
    assert list(control_offsets(data)) == by_words(data) == [8]


@given(st.lists(st.one_of(st.sampled_from([ERET_WORD, PSB_CSYNC_WORD, DAIFSET_2, DAIFCLR_F, *NEAR_MISSES]),
                          st.integers(0, 2**32 - 1)), max_size=16),
       st.integers(0, 3), st.integers(0, 3))
def test_same_as_word_by_word(words, lead, trail):
    # (with lead != 0 every word is misaligned: none may be reported)
    data = bytes(lead) + struct.pack(f"<{len(words)}I", *words) + bytes(trail)
    assert list(control_offsets(data)) == by_words(data)
