"""Linux user mode (``spe-emu run PROGRAM [-- ARGS]``) against qemu-aarch64 on the same
binaries and arguments: programs built here with Debian's aarch64-linux-gnu-gcc -static, and
Debian's busybox-static (arm64). stdout, stderr and the exit status must be identical. Plus
what only spe-emu has: the SPE trace of the program, the shared-directory jail, the list of
unanswered system calls, determinism.

Skips where the cross compiler, qemu-aarch64 or the busybox .deb is absent
(tests/linux_progs.py says where the .deb is looked for)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from spe_emu.errors import ImageError
from spe_emu.linux.elf import ET_DYN_BASE, load_linux_program
from spe_emu.linux.hwcap import hwcaps
from spe_emu.linux.memory import VA_LIMIT
from spe_emu.linux.process import LinuxOptions
from spe_emu.linux.run import run_program
from spe_emu.session import RunOptions
from spe_emu.spe.packets import iter_records

from linux_progs import QEMU_USER, Outcome, build_static, busybox, run_qemu, run_spe_cli

needs_qemu = pytest.mark.skipif(shutil.which(QEMU_USER) is None,
                                reason="qemu-aarch64 (Debian qemu-user) not installed")
ENV = {"LANG": "C", "HOME": "/", "SPE_TEST": "a b=c"}

HELLO = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv, char **envp) {
    printf("hello, world\n");
    for (int i = 0; i < argc; i++) printf("argv[%d]=<%s>\n", i, argv[i]);
    for (char **e = envp; *e; e++) printf("env <%s>\n", *e);
    fprintf(stderr, "stderr: %d arguments\n", argc);
    return argc - 1;
}
"""

EXIT = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    printf("buffered output before the end\n");
    if (!strcmp(argv[1], "abort")) abort();
    if (!strcmp(argv[1], "_exit")) _exit(atoi(argv[2]));
    if (!strcmp(argv[1], "return")) return atoi(argv[2]);
    exit(atoi(argv[2]));
}
"""

FILES = r"""
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static int cmp(const void *a, const void *b) { return strcmp(*(char **)a, *(char **)b); }
int main(void) {
    char buf[256];
    int fd = open("in.txt", O_RDONLY);
    struct stat st;
    fstat(fd, &st);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n] = 0;
    printf("in.txt: %ld bytes, fstat size %ld, regular %d: %s", (long)n, (long)st.st_size,
           S_ISREG(st.st_mode), buf);
    printf("lseek end %ld\n", (long)lseek(fd, 0, SEEK_END));
    n = pread(fd, buf, 5, 3);
    buf[n] = 0;
    printf("pread(5 @ 3) = %s\n", buf);
    close(fd);
    FILE *f = fopen("sub/out.txt", "w");
    for (int i = 0; i < 1000; i++) fprintf(f, "line %d\n", i);
    fclose(f);
    f = fopen("sub/out.txt", "r");
    long lines = 0;
    while (fgets(buf, sizeof buf, f)) lines++;
    fclose(f);
    printf("sub/out.txt: %ld lines\n", lines);
    if (stat("sub/out.txt", &st) == 0) printf("stat size %ld\n", (long)st.st_size);
    printf("missing: %d %s\n", open("nope.txt", O_RDONLY), strerror(errno));
    printf("mkdir twice: %d %s\n", mkdir("sub", 0755), strerror(errno));
    DIR *d = opendir(".");
    char *names[64]; int k = 0;
    struct dirent *e;
    while ((e = readdir(d)) && k < 64) names[k++] = strdup(e->d_name);
    closedir(d);
    qsort(names, k, sizeof *names, cmp);
    for (int i = 0; i < k; i++) printf("entry %s\n", names[i]);
    rename("sub/out.txt", "sub/renamed.txt");
    unlink("sub/renamed.txt");
    printf("after unlink: %d\n", access("sub/renamed.txt", F_OK));
    return 0;
}
"""

MALLOC = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
int main(void) {
    unsigned long sum = 0;
    char *keep[2000];
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 2000; i++) {
            size_t n = 16 + (i * 7919u + round) % 3000;
            keep[i] = malloc(n);
            memset(keep[i], i & 0xff, n);
        }
        for (int i = 0; i < 2000; i += 2) { sum += (unsigned char)keep[i][5]; free(keep[i]); }
        for (int i = 1; i < 2000; i += 2) {
            keep[i] = realloc(keep[i], 5000);
            sum += (unsigned char)keep[i][1];
            free(keep[i]);
        }
    }
    char *big = malloc(8 << 20);            /* mmap'd by malloc */
    memset(big, 7, 8 << 20);
    big = realloc(big, 24 << 20);           /* mremap */
    for (long i = 0; i < (24 << 20); i += 4096) big[i] = (char)i;
    for (long i = 0; i < (24 << 20); i += 4096 * 17) sum += (unsigned char)big[i];
    free(big);
    char *m = mmap(0, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    m[12345] = 9;
    mprotect(m, 1 << 20, PROT_READ);
    sum += m[12345];
    munmap(m, 1 << 20);
    printf("sum %lu\n", sum);
    return 0;
}
"""


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    d = tmp_path_factory.mktemp("progs")
    built = {name: build_static(src, d / name)
             for name, src in (("hello", HELLO), ("exit", EXIT), ("files", FILES),
                               ("malloc", MALLOC))}
    if any(p is None for p in built.values()):
        pytest.skip("aarch64-linux-gnu-gcc with a static glibc (Debian gcc-aarch64-linux-gnu, "
                    "libc6-dev-arm64-cross) not available")
    return built


def _spe(program: Path, args: list[str], share: Path | None, tmp: Path, stdin: bytes = b"",
         env: dict[str, str] = ENV, **kw) -> tuple[Outcome, dict]:
    """The program on spe-emu, in this process (stdio through files)."""
    out, err, inp = tmp / "stdout", tmp / "stderr", tmp / "stdin"
    inp.write_bytes(stdin)
    with open(out, "wb") as o, open(err, "wb") as e, open(inp, "rb") as i:
        lopts = LinuxOptions(argv=[program.name, *args], env=[f"{k}={v}" for k, v in env.items()],
                             share=share, stdin_fd=i.fileno(), stdout_fd=o.fileno(),
                             stderr_fd=e.fileno(), seed=kw.pop("seed", 0))
        session = run_program(program, lopts, RunOptions(outdir=tmp / "spe-out", **kw))
    return Outcome(out.read_bytes(), err.read_bytes(), session.result.exit_status), \
        session.summary


def _same(a: Outcome, b: Outcome) -> None:
    assert (a.status, a.stdout, a.stderr) == (b.status, b.stdout, b.stderr)


def _file_shares(tmp: Path) -> list[Path]:
    """Two identical shared directories for FILES (spe-emu's, then qemu-aarch64's): ``in.txt``
    and an empty ``sub/``."""
    dirs = []
    for name in ("spe", "qemu"):
        share = tmp / name
        (share / "sub").mkdir(parents=True)
        (share / "in.txt").write_text("0123456789 abcdef\n")
        dirs.append(share)
    return dirs


# ---- programs built here ----------------------------------------------------------------

@needs_qemu
def test_hello_arguments_environment_and_status_through_the_cli(progs, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    shutil.copy(progs["hello"], share / "hello")
    args = ["one", "-x", "--two", "with space", ""]
    # (one variable: qemu-aarch64 hands the environment over in reverse order, Linux and
    # spe-emu in the order given)
    env = {"SPE_TEST": "a b=c"}
    spe = run_spe_cli("./hello", args, share, env, tmp_path / "out")
    qemu = run_qemu("./hello", args, share, env)
    _same(spe, qemu)
    assert spe.status == 5 and b"argv[0]=<./hello>" in spe.stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["linux"]["exit_status"] == 5 and summary["exit_status"] == 5


@needs_qemu
@pytest.mark.parametrize("args", [["exit", "0"], ["exit", "3"], ["return", "255"],
                                  ["_exit", "42"], ["exit", "256"], ["abort"]])
def test_exit_statuses_match_qemu(progs, tmp_path, args):
    spe, _ = _spe(progs["exit"], args, None, tmp_path)
    qemu = run_qemu(progs["exit"], args, tmp_path, ENV, argv0="exit")
    if args == ["abort"]:
        # qemu-aarch64 dies of the signal itself and prints its own line; the guest's part
        # (status 128 + SIGABRT, the stdio buffer not flushed) must agree
        assert spe.status == qemu.status == 134 and spe.stdout == qemu.stdout == b""
        return
    _same(spe, qemu)


FAULT = r"""
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    printf("before\n");
    fflush(stdout);
    if (!strcmp(argv[1], "udf")) __asm__ volatile("udf #0");
    if (!strcmp(argv[1], "brk")) __asm__ volatile("brk #1");
    if (!strcmp(argv[1], "mrs")) { unsigned long v; __asm__ volatile("mrs %0, sctlr_el1" : "=r"(v)); }
    volatile int *p = (volatile int *)(unsigned long)(argc * 8); *p = 1;   /* near NULL */
    return 0;
}
"""


@needs_qemu
@pytest.mark.parametrize("how,signal", [("store", "SIGSEGV"), ("udf", "SIGILL"),
                                        ("brk", "SIGTRAP"), ("mrs", "SIGILL")])
def test_a_fault_kills_the_program_with_qemus_signal_status(tmp_path, how, signal):
    prog = build_static(FAULT, tmp_path / "fault")
    if prog is None:
        pytest.skip("no cross compiler")
    spe, summary = _spe(prog, [how], None, tmp_path)
    qemu = run_qemu(prog, [how], tmp_path, ENV, argv0="fault")
    assert spe.status == qemu.status and spe.stdout == qemu.stdout == b"before\n"
    assert summary["linux"]["fault"]["signal"] == signal
    assert summary["linux"]["exit_status"] is None


@needs_qemu
def test_file_io_in_the_shared_directory_matches_qemu(progs, tmp_path):
    dirs = _file_shares(tmp_path)
    spe, _ = _spe(progs["files"], [], dirs[0], tmp_path)
    qemu = run_qemu(progs["files"], [], dirs[1], ENV, argv0="files")
    _same(spe, qemu)
    assert b"sub/out.txt: 1000 lines" in spe.stdout and spe.status == 0
    assert sorted(p.name for p in dirs[0].rglob("*")) == sorted(p.name for p in
                                                               dirs[1].rglob("*"))


@needs_qemu
def test_malloc_heavy_program_matches_qemu(progs, tmp_path):
    spe, summary = _spe(progs["malloc"], [], None, tmp_path)
    qemu = run_qemu(progs["malloc"], [], tmp_path, ENV, argv0="malloc")
    _same(spe, qemu)
    calls = summary["linux"]["syscalls"]
    assert calls.get("mremap", 0) >= 1 and calls.get("munmap", 0) >= 1 and calls["brk"] > 1


def test_stdin_passes_through(progs, tmp_path):
    src = r"""
#include <stdio.h>
int main(void) { int c; long n = 0; while ((c = getchar()) != EOF) { n++; putchar(c ^ 1); }
                 fprintf(stderr, "%ld\n", n); return 0; }
"""
    prog = build_static(src, tmp_path / "cat1")
    data = bytes(range(256)) * 100
    spe, _ = _spe(prog, [], None, tmp_path, stdin=data)
    assert spe.stdout == bytes(b ^ 1 for b in data) and spe.stderr == b"25600\n"


# ---- busybox-static (Debian, arm64) ------------------------------------------------------

@pytest.fixture(scope="module")
def bb():
    path = busybox()
    if path is None:
        pytest.skip("busybox-static:arm64 .deb not in ~/.cache/spe_emu (dpkg --add-architecture "
                    "arm64; apt-get update; apt-get download busybox-static:arm64 there)")
    return path


def _shared_files(share: Path) -> None:
    share.mkdir()
    lines = [f"{(i * 7919) % 1000:04d} item-{i % 37} {'xyz' * (i % 5)}" for i in range(3000)]
    (share / "data.txt").write_text("\n".join(lines) + "\n")
    (share / "data.gz").write_bytes(gzip.compress((share / "data.txt").read_bytes(), mtime=0))
    for f in share.iterdir():
        os.utime(f, (0, 0))  # (spe-emu reports file times as 0: qemu sees the same then)


BUSYBOX_CASES = {
    "sha256sum": ["sha256sum", "data.txt"],
    "sort": ["sort", "-k2,2", "-n", "data.txt"],
    "gzip": ["gzip", "-c", "data.txt"],
    "gunzip": ["gunzip", "-c", "data.gz"],
    "awk": ["awk", "{n[$2]++} END {for (k in n) s += n[k] * length(k); print s, NR}",
            "data.txt"],
    "sed": ["sed", "-n", "s/item-\\(1[0-9]\\)/X\\1/p", "data.txt"],
    "grep": ["grep", "-c", "-E", "item-(3|5) xyz", "data.txt"],
    "grep-missing": ["grep", "x", "missing.txt"],
    "sort-stdin": ["sort", "-r"],
}


@needs_qemu
@pytest.mark.parametrize("case", sorted(BUSYBOX_CASES))
def test_busybox_applet_matches_qemu(bb, tmp_path, case):
    share = tmp_path / "share"
    _shared_files(share)
    args = BUSYBOX_CASES[case]
    stdin = b"b\nc\na\n" if case == "sort-stdin" else b""
    spe, summary = _spe(bb, args, share, tmp_path, stdin=stdin)
    qemu = run_qemu(bb, args, share, ENV, stdin=stdin, argv0="busybox")
    _same(spe, qemu)
    assert spe.stdout or spe.stderr
    assert summary["linux"]["unsupported_syscalls"].keys() <= {"prctl", "rseq", "statx"}


# ---- what only spe-emu gives --------------------------------------------------------------

def test_samples_are_taken_in_the_program(progs, tmp_path):
    _, summary = _spe(progs["malloc"], [], None, tmp_path, interval=1024)
    trace = (tmp_path / "spe-out" / "spe.trace").read_bytes()
    records = list(iter_records(trace))
    program = load_linux_program(progs["malloc"], VA_LIMIT)
    text = [s for s in program.segments if s.flags & 1]
    el0 = [r for r in records if r.el == 0]
    assert summary["samples"] > 100 and len(records) == summary["records_written"]
    assert len(el0) > 0.9 * len(records)
    assert all(any(s.contains(r.pc) for s in text) for r in el0)


def test_same_seed_same_everything(progs, tmp_path):
    src = r"""
#include <stdio.h>
#include <sys/random.h>
#include <time.h>
int main(void) { unsigned char b[8]; getrandom(b, 8, 0); struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t); struct timespec d = {0, 5000000}; nanosleep(&d, 0);
    struct timespec u; clock_gettime(CLOCK_MONOTONIC, &u);
    long slept = (u.tv_sec - t.tv_sec) * 1000000000L + u.tv_nsec - t.tv_nsec;
    printf("%02x%02x%02x%02x %ld.%09ld slept>=5ms:%d\n", b[0], b[1], b[2], b[3],
           (long)t.tv_sec, t.tv_nsec, slept >= 5000000); return 0; }
"""
    prog = build_static(src, tmp_path / "rnd")
    runs = []
    for i, seed in enumerate((7, 7, 8)):
        d = tmp_path / str(i)
        d.mkdir()
        out, _ = _spe(prog, [], None, d, seed=seed)
        runs.append((out.stdout, (d / "spe-out" / "spe.trace").read_bytes()))
    assert runs[0] == runs[1] and runs[0][0] != runs[2][0]
    assert runs[0][0].endswith(b" slept>=5ms:1\n")


def test_ids_do_not_depend_on_the_host_user(progs, tmp_path, monkeypatch):
    """getuid/geteuid/getgid/getegid, AT_UID/AT_GID and a file's owner in the shared directory
    read the fixed guest ids (0), whoever runs spe-emu (process.GUEST_UID/GUEST_GID): here the
    host's ids are made 1234 and the file is given to 1234 where the host allows it."""
    src = r"""
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>
int main(void) { struct stat st; stat("f", &st);
    printf("%d %d %d %d %lu %lu %d %d\n", (int)getuid(), (int)geteuid(), (int)getgid(),
           (int)getegid(), getauxval(AT_UID), getauxval(AT_GID), (int)st.st_uid,
           (int)st.st_gid); return 0; }
"""
    prog = build_static(src, tmp_path / "ids")
    share = tmp_path / "share"
    share.mkdir()
    (share / "f").write_bytes(b"x")
    try:
        os.chown(share / "f", 1234, 1234)
    except (PermissionError, AttributeError):
        pass   # (not root: the file keeps the host user's ids, which must not show either)
    for name in ("getuid", "geteuid", "getgid", "getegid"):
        monkeypatch.setattr(os, name, lambda: 1234)
    out, _ = _spe(prog, [], share, tmp_path)
    assert out.stdout == b"0 0 0 0 0 0 0 0\n"


def test_shared_directory_cannot_be_left(progs, tmp_path):
    src = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    const char *p[] = {"/etc/passwd", "../outside.txt", "/../../outside.txt", "link/x",
                       "inside.txt", "/inside.txt", "sub/../inside.txt"};
    for (int i = 0; i < 7; i++) { int fd = open(p[i], O_RDONLY);
        printf("%s %s\n", p[i], fd >= 0 ? "open" : strerror(errno)); }
    return 0; }
"""
    prog = build_static(src, tmp_path / "jail")
    share = tmp_path / "share"
    (share / "sub").mkdir(parents=True)
    (share / "inside.txt").write_text("x")
    (tmp_path / "outside.txt").write_text("secret")
    (share / "link").symlink_to(tmp_path)
    out, _ = _spe(prog, [], share, tmp_path)
    assert out.stdout.decode().splitlines() == [
        "/etc/passwd No such file or directory", "../outside.txt No such file or directory",
        "/../../outside.txt No such file or directory", "link/x Permission denied",
        "inside.txt open", "/inside.txt open", "sub/../inside.txt open"]


def test_unanswered_system_calls_are_listed_once(progs, tmp_path):
    src = r"""
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) { long r1 = syscall(400), r2 = syscall(400); int e = errno;
    printf("%ld %ld %d\n", r1, r2, e == ENOSYS); return 0; }
"""
    prog = build_static(src, tmp_path / "nosys")
    out, summary = _spe(prog, [], None, tmp_path)
    assert out.stdout == b"-1 -1 1\n"
    assert summary["linux"]["unsupported_syscalls"]["syscall_400"] == 2


def test_static_pie_is_placed_at_the_et_dyn_base(tmp_path):
    prog = build_static(HELLO, tmp_path / "pie", "-fPIE", link="-static-pie")
    if prog is None:
        pytest.skip("no static-pie support in the cross toolchain")
    program = load_linux_program(prog, VA_LIMIT)
    assert min(s.vaddr for s in program.segments) == ET_DYN_BASE
    out, _ = _spe(prog, ["a"], None, tmp_path)
    assert out.status == 1 and out.stdout.startswith(b"hello, world\nargv[0]=<pie>\n")


def test_a_bare_metal_image_is_refused_with_a_hint(tmp_path):
    # an ELF whose entry is outside the guest region is taken for a Linux program; one placed
    # in the firmware's RAM cannot be one
    src = tmp_path / "bm.S"
    src.write_text(".global _start\n_start: b _start\n")
    prog = tmp_path / "bm.elf"
    if shutil.which("aarch64-linux-gnu-gcc") is None:
        pytest.skip("no cross compiler")
    import subprocess
    subprocess.run(["aarch64-linux-gnu-gcc", "-static", "-nostdlib", "-Wl,-Ttext=0x40080000",
                    "-o", str(prog), str(src)], check=True)
    with pytest.raises(ImageError, match="overlaps the firmware's memory.*--no-firmware"):
        _spe(prog, [], None, tmp_path)


def test_hwcaps_follow_the_id_registers():
    ids = {(3, 0, 0, 6, 0): 0x1021111110212120, (3, 0, 0, 6, 1): 0x11101211012,
           (3, 0, 0, 4, 0): 0x100112222, (3, 0, 0, 4, 1): 0x1, (3, 0, 0, 7, 2): 0x0}
    hwcap, hwcap2 = hwcaps(lambda enc: ids[enc])
    # FP FPHP ASIMD ASIMDHP AES PMULL SHA1 SHA2 CRC32 ATOMICS RDM JSCVT FCMA LRCPC DCPOP SHA3
    # SM3 SM4 DP SHA512 FHM ILRCPC FLAGM SB PACA PACG; not SVE (bit 22) nor CPUID (bit 11)
    bits = [0, 9, 1, 10, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 23, 26, 27,
            29, 30, 31]
    assert hwcap == sum(1 << b for b in bits)
    assert hwcap2 == (1 << 0) | (1 << 7) | (1 << 8) | (1 << 16) | (1 << 17)
    no_fp = dict(ids)
    no_fp[(3, 0, 0, 4, 0)] = 0xFF0000
    assert hwcaps(lambda enc: no_fp[enc])[0] & 0b11 == 0


@pytest.mark.parametrize("patch,message", [
    (lambda b: b[:0x20] + struct.pack("<Q", 1 << 63) + b[0x28:], "program headers outside"),
    (lambda b: b[:16] + struct.pack("<H", 1) + b[18:], "not an executable"),
    (lambda b: b"\x7fELF" + bytes(60), "not a little-endian ELF64"),
])
def test_malformed_programs_are_one_line_errors(progs, tmp_path, patch, message):
    bad = tmp_path / "bad"
    bad.write_bytes(patch(progs["hello"].read_bytes()))
    with pytest.raises(ImageError, match=message):
        load_linux_program(bad, VA_LIMIT)


def test_not_a_regular_file_is_refused_before_reading():
    with pytest.raises(ImageError, match="not a regular file"):
        load_linux_program(Path("/dev/zero"), VA_LIMIT)


def test_the_firmware_header_and_the_host_agree_on_the_linux_operations():
    """The Linux semihosting operations and action bits are written twice, in
    firmware/semihost.h (the EL1 side) and spe_emu/linux/process.py (the host side): the
    same names carry the same numbers in both."""
    import re
    from spe_emu.linux import process
    header = Path(__file__).resolve().parents[1] / "firmware" / "semihost.h"
    defines = dict(re.findall(r"^#define\s+((?:SEMIHOST_SPE_)?LINUX_[A-Z_]+)\s+(\w+)",
                              header.read_text(), re.M))
    names = ("SEMIHOST_SPE_LINUX_EXEC", "SEMIHOST_SPE_LINUX_SYSCALL", "SEMIHOST_SPE_LINUX_FAULT",
             "LINUX_ACTION_TLBI", "LINUX_ACTION_EXIT")
    assert {n: int(defines[n], 0) for n in names} == {n: getattr(process, n) for n in names}
    assert {n: getattr(process, n) for n in names} == {
        "SEMIHOST_SPE_LINUX_EXEC": 0x100, "SEMIHOST_SPE_LINUX_SYSCALL": 0x101,
        "SEMIHOST_SPE_LINUX_FAULT": 0x102, "LINUX_ACTION_TLBI": 0x1, "LINUX_ACTION_EXIT": 0x2}
