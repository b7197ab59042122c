"""Linux user mode with static musl programs (Debian's musl-dev for arm64, linked by
aarch64-linux-gnu-gcc through musl's own gcc specs) against qemu-aarch64 on the same binaries:
the programs of tests/test_linux_user.py (arguments and environment, exit statuses and
abort(), files in the shared directory, malloc/mmap/mremap, faults), stdout, stderr and exit
status identical. Skips without the cross compiler, qemu-aarch64 or the musl-dev .deb
(tests/linux_progs.py says where it is looked for)."""

from __future__ import annotations

import shutil

import pytest

from linux_progs import QEMU_USER, build_static, musl_specs, run_qemu
from test_linux_user import (ENV, EXIT, FAULT, FILES, HELLO, MALLOC, _file_shares, _same,
                             _spe)

pytestmark = pytest.mark.skipif(shutil.which(QEMU_USER) is None,
                                reason="qemu-aarch64 (Debian qemu-user) not installed")

SOURCES = {"hello": HELLO, "exit": EXIT, "files": FILES, "malloc": MALLOC, "fault": FAULT}


@pytest.fixture(scope="module")
def musl(tmp_path_factory):
    specs = musl_specs()
    if specs is None:
        pytest.skip("musl-dev:arm64 .deb not in ~/.cache/spe_emu (dpkg --add-architecture "
                    "arm64; apt-get update; apt-get download musl-dev:arm64 there)")
    d = tmp_path_factory.mktemp("musl")
    built = {name: build_static(src, d / name, "-specs", str(specs))
             for name, src in SOURCES.items()}
    if any(p is None for p in built.values()):
        pytest.skip("aarch64-linux-gnu-gcc cannot link against the extracted musl")
    return built


def test_they_are_musl_programs(musl):
    from elftools.elf.elffile import ELFFile
    with open(musl["hello"], "rb") as fh:
        names = {sym.name for sym in ELFFile(fh).get_section_by_name(".symtab").iter_symbols()}
    assert "__init_libc" in names                       # musl's start-up
    assert "__libc_start_call_main" not in names        # glibc's


@pytest.mark.parametrize("args", [[], ["one", "-x", "with space", ""]])
def test_hello_arguments_and_environment(musl, tmp_path, args):
    spe, _ = _spe(musl["hello"], args, None, tmp_path, env={"SPE_TEST": "a b=c"})
    qemu = run_qemu(musl["hello"], args, tmp_path, {"SPE_TEST": "a b=c"}, argv0="hello")
    _same(spe, qemu)
    assert spe.status == len(args)


@pytest.mark.parametrize("args", [["exit", "0"], ["exit", "3"], ["return", "255"],
                                  ["_exit", "42"], ["exit", "256"], ["abort"]])
def test_exit_statuses(musl, tmp_path, args):
    spe, _ = _spe(musl["exit"], args, None, tmp_path)
    qemu = run_qemu(musl["exit"], args, tmp_path, ENV, argv0="exit")
    if args == ["abort"]:   # (qemu-aarch64 adds its own line about the signal on stderr)
        assert spe.status == qemu.status == 134 and spe.stdout == qemu.stdout
        return
    _same(spe, qemu)


def test_files_in_the_shared_directory(musl, tmp_path):
    dirs = _file_shares(tmp_path)
    spe, summary = _spe(musl["files"], [], dirs[0], tmp_path)
    qemu = run_qemu(musl["files"], [], dirs[1], ENV, argv0="files")
    _same(spe, qemu)
    assert b"sub/out.txt: 1000 lines" in spe.stdout and spe.status == 0
    assert summary["linux"]["unsupported_syscalls"] == {}


def test_malloc_mmap_mremap(musl, tmp_path):
    spe, summary = _spe(musl["malloc"], [], None, tmp_path, interval=1024)
    qemu = run_qemu(musl["malloc"], [], tmp_path, ENV, argv0="malloc")
    _same(spe, qemu)
    assert summary["samples"] > 0
    assert summary["linux"]["unsupported_syscalls"] == {}


@pytest.mark.parametrize("how", ["store", "udf", "brk", "mrs"])
def test_faults(musl, tmp_path, how):
    spe, summary = _spe(musl["fault"], [how], None, tmp_path)
    qemu = run_qemu(musl["fault"], [how], tmp_path, ENV, argv0="fault")
    assert spe.status == qemu.status > 128 and spe.stdout == qemu.stdout == b"before\n"
