"""Tests for the committed guest images (guests/*.elf) and their build.

(a) the committed images exist and are AArch64 ELF executables whose entry
    point is inside the guest region;
(b) rebuilding them with scripts/build_images.py gives byte-identical files
    (skipped without the Debian cross toolchain and picolibc);
(c) guests/expected.json matches small, independent Python models of what
    each guest computes.

Running the guests under the emulator is tested elsewhere.
"""

from __future__ import annotations

import filecmp
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

REPO = Path(__file__).resolve().parent.parent
GUESTS = REPO / "guests"
SRC = GUESTS / "src"
EXPECTED = json.loads((GUESTS / "expected.json").read_text())

GUEST_NAMES = ["sort", "matmul", "pointer_chase", "interp", "asm_loop"]
GUEST_REGION = (0x4800_0000, 0x5000_0000)
CC = "aarch64-linux-gnu-gcc"

MASK = (1 << 64) - 1


def _load_build_script():
    """Import scripts/build_images.py (not a package) as module build_images."""
    if "build_images" in sys.modules:
        return sys.modules["build_images"]
    spec = importlib.util.spec_from_file_location("build_images",
                                                  REPO / "scripts" / "build_images.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_images"] = module    # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------
# (a) the committed images


def test_every_guest_has_an_image_and_a_checksum():
    assert sorted(EXPECTED) == sorted(GUEST_NAMES)
    assert sorted(_load_build_script().GUESTS) == sorted(GUEST_NAMES)
    for value in EXPECTED.values():
        assert re.fullmatch(r"0x[0-9a-f]{16}", value)


@pytest.mark.parametrize("name", GUEST_NAMES)
def test_image_is_an_aarch64_executable_in_the_guest_region(name):
    path = GUESTS / f"{name}.elf"
    assert path.is_file(), f"{path} is not committed"
    with path.open("rb") as f:
        elf = ELFFile(f)
        assert elf.elfclass == 64 and elf.little_endian
        assert elf["e_machine"] == "EM_AARCH64"
        assert elf["e_type"] == "ET_EXEC"
        entry = elf["e_entry"]
        assert entry == GUEST_REGION[0], "_start must be first in .text"
        assert elf.get_section_by_name(".symtab").get_symbol_by_name("_start")[0][
            "st_value"] == entry

        loads = [s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
        assert loads
        for seg in loads:
            lo, hi = seg["p_vaddr"], seg["p_vaddr"] + seg["p_memsz"]
            assert GUEST_REGION[0] <= lo and hi <= GUEST_REGION[1], hex(lo)
        assert any(s["p_vaddr"] <= entry < s["p_vaddr"] + s["p_memsz"]
                   and s["p_flags"] & 1 for s in loads), "entry is not in an executable segment"
        # reproducibility: no build-id note, no interpreter, no dynamic section
        kinds = {s["p_type"] for s in elf.iter_segments()}
        assert not kinds & {"PT_NOTE", "PT_INTERP", "PT_DYNAMIC"}


# --------------------------------------------------------------------------
# (b) the build is reproducible


def _toolchain_missing() -> str | None:
    if shutil.which(CC) is None:
        return f"{CC} is not installed"
    specs = subprocess.run([CC, "-print-file-name=picolibc.specs"], capture_output=True,
                           text=True, check=False).stdout.strip()
    if not Path(specs).is_absolute() or not Path(specs).exists():
        return "picolibc-aarch64-linux-gnu is not installed"
    return None


@pytest.mark.skipif(_toolchain_missing() is not None, reason=str(_toolchain_missing()))
def test_rebuild_is_byte_identical(tmp_path):
    build = _load_build_script()
    assert build.main(["--out-dir", str(tmp_path), "--no-firmware"]) == 0
    for name in GUEST_NAMES:
        rebuilt = tmp_path / "guests" / f"{name}.elf"
        assert filecmp.cmp(rebuilt, GUESTS / f"{name}.elf", shallow=False), (
            f"{name}.elf differs from a fresh build: run scripts/build_images.py")


# --------------------------------------------------------------------------
# (c) independent models of the guests' computations


def source_defines(filename: str) -> dict[str, int]:
    """Integer #defines of a guest source, to keep the models in step."""
    text = (SRC / filename).read_text()
    return {m[1]: int(m[2].rstrip("ULul"), 0)
            for m in re.finditer(r"^#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)\w*", text, re.M)}


def lcg(state: int) -> int:
    """guest.h lcg_next(): Knuth's MMIX LCG."""
    return (state * 6364136223846793005 + 1442695040888963407) & MASK


def mix64(h: int, v: int) -> int:
    """guest.h mix64()."""
    h = ((h ^ v) * 0x9E3779B97F4A7C15) & MASK
    return h ^ (h >> 29)


def fold(values) -> int:
    h = 0
    for v in values:
        h = mix64(h, v & MASK)
    return h


def lcg_stream(seed: int, count: int) -> list[int]:
    out = []
    for _ in range(count):
        seed = lcg(seed)
        out.append(seed)
    return out


def model_sort(n=8192, seed=0x5350455F534F5254):
    return fold(sorted(lcg_stream(seed, n)))


def model_matmul(dim=64, seed=0x5350455F4D41544D):
    # elements are k/8, so C*64 is the integer product of the k matrices
    ks = [(x >> 54) - 512 for x in lcg_stream(seed, 2 * dim * dim)]
    a = [ks[i * dim:(i + 1) * dim] for i in range(dim)]
    b_cols = [ks[dim * dim + j::dim] for j in range(dim)]
    return fold(sum(x * y for x, y in zip(row, col)) for row in a for col in b_cols)


def model_pointer_chase(nodes=32768, steps=262144, seed=0x5350455F43484153):
    perm = list(range(nodes))
    for i in range(nodes - 1, 0, -1):          # Sattolo's algorithm
        seed = lcg(seed)
        j = (seed >> 33) % i
        perm[i], perm[j] = perm[j], perm[i]
    values = lcg_stream(seed, nodes)
    acc, p = 0, 0
    for _ in range(steps):
        acc = (acc * 31 + values[p]) & MASK
        p = perm[p]
    return mix64(mix64(0, acc), p)


def model_interp(collatz_limit=500, sieve_limit=3000):
    # the bytecode program's two phases, computed directly
    acc = 0
    for n in range(1, collatz_limit + 1):
        x, steps = n, 0
        while x != 1:
            x = 3 * x + 1 if x & 1 else x >> 1
            steps += 1
        acc = (acc * 31 + (steps ^ n)) & MASK
    primes = [p for p in range(2, sieve_limit)
              if all(p % d for d in range(2, int(p ** 0.5) + 1))]
    return mix64(mix64(mix64(0, acc), len(primes)), sum(primes))


def model_asm_loop(iterations=50000, seed=0x5350455F41534D4C):
    """The iteration described at the top of guests/src/asm_loop.S."""
    h = seed
    buf = [0] * 512
    vec0 = vec1 = vec2 = excl = rel = atom = 0
    for i in range(iterations):
        idx = (h >> 7) & 511
        v = (buf[idx] + (h ^ i)) & MASK
        buf[(idx + 1) & 511] = v
        h = (h + v) & MASK if v & 1 else h ^ ((v << 1) & MASK)
        h = (h + 0x123000) & MASK if i & 2 else ((h >> 13) | (h << 51)) & MASK
        vec0, vec1, vec2 = (vec0 + v) & MASK, (vec1 + h) & MASK, v
        excl = (excl + i) & MASK
        rel = excl
        old, atom = atom, (atom + v) & MASK
        h = mix64(h, old if i & 4 else ~excl & MASK)
    for x in (vec0, vec1, vec2, excl, rel, atom):
        h = mix64(h, x)
    return h


def test_model_parameters_match_the_sources():
    assert {k: source_defines("sort.c")[k] for k in ("N", "SEED")} == {
        "N": 8192, "SEED": 0x5350455F534F5254}
    assert {k: source_defines("matmul.c")[k] for k in ("DIM", "SEED")} == {
        "DIM": 64, "SEED": 0x5350455F4D41544D}
    assert {k: source_defines("pointer_chase.c")[k] for k in ("NODES", "STEPS", "SEED")} == {
        "NODES": 32768, "STEPS": 262144, "SEED": 0x5350455F43484153}
    assert {k: source_defines("interp.c")[k] for k in ("COLLATZ_LIMIT", "SIEVE_LIMIT")} == {
        "COLLATZ_LIMIT": 500, "SIEVE_LIMIT": 3000}
    assert source_defines("asm_loop.S")["ITERATIONS"] == 50000
    assert "0x5350455f41534d4c" in (SRC / "asm_loop.S").read_text()


MODELS = {
    "sort": model_sort,
    "matmul": model_matmul,
    "pointer_chase": model_pointer_chase,
    "interp": model_interp,
    "asm_loop": model_asm_loop,
}


@pytest.mark.parametrize("name", GUEST_NAMES)
def test_expected_checksum_matches_the_model(name):
    assert EXPECTED[name] == f"0x{MODELS[name]():016x}"
