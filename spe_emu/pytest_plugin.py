"""pytest plugin (entry point ``pytest11``: loaded wherever spe_emu is installed): the
``spe_machine`` fixture for your own regression tests on AArch64 programs.

::

    def test_sort_hot_loop(spe_machine):
        result = spe_machine.run("build/sort", ["1000"], interval=1024, random=True)
        assert result.status == 0 and result.console.startswith(b"sorted")
        assert result.report().hot_functions[0][0] == "quick_sort"

    @pytest.mark.spe_options(interval=256, max_insns=10_000_000)
    def test_with_defaults(spe_machine):
        assert spe_machine.run("build/loop").samples > 100

``spe_machine.run(program, args, **options)`` is :func:`spe_emu.run` with each run's output
directory under the test's ``tmp_path`` (kept: ``result.outdir``), the keyword defaults of
the test's ``spe_options`` marker, and the ``--spe-seed`` command-line seed. Errors are those
of :func:`spe_emu.run`; a run the guest stopped is returned (``result.exit_reason``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

import pytest

MARKER = "spe_options"


class SpeMachine:
    """What the ``spe_machine`` fixture gives a test: :meth:`run` and the results so far.

    Attributes:
        defaults: keyword arguments of :func:`spe_emu.run` every :meth:`run` starts from
            (the ``spe_options`` marker's, and ``seed`` from ``--spe-seed``).
        results: every :class:`spe_emu.Result` of the test, in order.
    """

    def __init__(self, tmp_path: Path, defaults: dict[str, Any]):
        self._tmp = tmp_path
        self.defaults = dict(defaults)
        self.results: list = []

    def run(self, program: Optional[str] = None, args: Sequence[str] = (), **options: Any):
        """:func:`spe_emu.run` of ``program`` with ``args``; ``options`` override the
        defaults. Output in ``tmp_path/spe-run-N`` unless ``outdir`` is given. Returns the
        :class:`spe_emu.Result`; raises ConfigError / ImageError as :func:`spe_emu.run`."""
        from .api import run

        kwargs = {**self.defaults, **options}
        kwargs.setdefault("outdir", self._tmp / f"spe-run-{len(self.results)}")
        result = run(program, args, **kwargs)
        self.results.append(result)
        return result


def pytest_addoption(parser) -> None:
    group = parser.getgroup("spe_emu")
    group.addoption("--spe-seed", type=int, default=None, metavar="SEED",
                    help="spe_emu: the seed every spe_machine run uses unless the test "
                         "gives one (default: spe_emu.run's, 0).")


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(**kwargs): default keyword arguments of spe_emu.run for the "
                   f"test's spe_machine runs")


@pytest.fixture
def spe_machine(request, tmp_path) -> SpeMachine:
    """Runs AArch64 programs with SPE for this test (:class:`SpeMachine`)."""
    defaults: dict[str, Any] = {}
    seed = request.config.getoption("--spe-seed")
    if seed is not None:
        defaults["seed"] = seed
    for mark in reversed(list(request.node.iter_markers(MARKER))):  # (closest mark wins)
        if mark.args:
            raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keyword arguments only")
        defaults.update(mark.kwargs)
    return SpeMachine(tmp_path, defaults)
