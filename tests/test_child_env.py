"""Children the tests start run the spe_emu the test process runs (tests/child.py).

CI tests a clean checkout after ``pip install .``: a child pointed at the checkout ran on
the unicorn binding's stock library, without patches/unicorn, and the Linux guest's perf
saw no PMU (stop 35)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import child

import spe_emu
from spe_emu import native

ROOT = Path(__file__).resolve().parents[1]
PROBE = ("import json, spe_emu; from spe_emu import native; "
         "print(json.dumps([spe_emu.__file__, native.unicorn_patches()]))")


def test_a_child_in_the_checkout_imports_this_package():
    """Started in the checkout (the working directory CI's pytest has, first on a child's
    sys.path without PYTHONSAFEPATH), the child imports this process's spe_emu and runs on
    the same libunicorn patches."""
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=child.env(),
                          capture_output=True, text=True, timeout=120, check=True)
    path, patches = json.loads(done.stdout)
    assert (Path(path).resolve(), patches) == (Path(spe_emu.__file__).resolve(),
                                               native.unicorn_patches())


def test_without_the_patches_a_machine_run_says_so(tmp_path, monkeypatch):
    """On the unicorn binding's own library (no patches/unicorn), ``spe-emu run --machine``
    says so in one stderr line and summary.json's ``unicorn_patches`` is ``[]``; with the
    patches, no line and the list of them."""
    from click.testing import CliRunner

    from spe_emu.asm import assemble
    from spe_emu.tools.cli import main
    kernel = tmp_path / "off.bin"   # PSCI SYSTEM_OFF through the DTB's conduit (hvc)
    kernel.write_bytes(assemble("movz x0, #0x8400, lsl #16\nmovk x0, #8\nhvc #0\nb .",
                                0x4008_0000))

    def run(outdir: Path):
        result = CliRunner().invoke(main, ["run", "--machine", "virt", "--kernel", str(kernel),
                                           "-o", str(outdir)])
        assert result.exit_code == 0, result.output
        return result.stderr, json.loads((outdir / "summary.json").read_text())

    stderr, summary = run(tmp_path / "patched")
    assert "without patches/unicorn" not in stderr
    assert summary["unicorn_patches"] == native.unicorn_patches()
    monkeypatch.setattr(native, "unicorn_patches", lambda: [])
    stderr, summary = run(tmp_path / "stock")
    assert stderr.count("without patches/unicorn") == 1 and summary["unicorn_patches"] == []
