"""The package layers import downwards only (issue: no import cycles between layers).

Layers, lowest first: ``errors``/``sysreg`` (the register-table machinery), ``native`` (the C
helpers and their ctypes mirrors, on ``errors`` only), ``arch`` (pure architecture), ``spe``
(the SPE model) and ``platform`` (board, bus, clock, loaders), then ``devices`` (the GIC keeps
its state in ``native``), then ``cpu`` (the machine and its run loops), then ``session``,
``linux`` (Linux user mode, built on a session's machine) and ``tools``, then ``api`` (the
Python API, spe_emu.run) and ``pytest_plugin`` (on the API). A module may import
its own layer and the layers listed as below it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "spe_emu"

BELOW = {
    "errors": set(),
    "sysreg": {"errors"},
    "arch": {"errors", "sysreg"},
    "spe": {"errors", "sysreg", "arch", "native"},   # (the records model is native)
    "platform": {"errors", "sysreg", "arch"},
    "devices": {"errors", "sysreg", "arch", "platform", "native"},
    "native": {"errors"},
    "asm": {"errors", "devices", "spe", "sysreg", "arch", "platform"},
    "cpu": {"errors", "sysreg", "arch", "spe", "platform", "devices", "native"},
    "session": {"errors", "sysreg", "arch", "spe", "platform", "devices", "native", "cpu"},
    "linux": {"errors", "sysreg", "arch", "spe", "platform", "devices", "native", "cpu",
              "session"},
    "tools": {"errors", "sysreg", "arch", "spe", "platform", "devices", "native", "cpu",
              "session", "linux"},
    "api": {"errors", "sysreg", "arch", "spe", "platform", "devices", "native", "cpu",
            "session", "linux", "tools"},
    "pytest_plugin": {"api"},
}


def _layer(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_layers(path: Path) -> set[str]:
    """Layers of spe_emu that ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    here = path.relative_to(PKG).parent.parts
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(here[:len(here) - (node.level - 1)]) if node.level > 1 else list(here)
                parts = base + (node.module.split(".") if node.module else [])
                if not parts:  # "from .. import x": x are top-level modules or packages
                    out.update(alias.name for alias in node.names)
                    continue
                out.add(parts[0])
            elif node.module and node.module.startswith("spe_emu."):
                out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("spe_emu."):
                    out.add(alias.name.split(".")[1])
    return out


def test_every_layer_imports_only_layers_below_it():
    violations = []
    seen = set()
    for path in sorted(PKG.rglob("*.py")):
        layer = _layer(path)
        if layer == "__init__":
            continue
        seen.add(layer)
        assert layer in BELOW, f"{path}: layer {layer!r} is not in the layer table"
        for other in _imported_layers(path) - {layer}:
            if other not in BELOW[layer]:
                violations.append(f"{path.relative_to(PKG)} ({layer}) imports {other}")
    assert not violations, "\n".join(violations)
    assert {"arch", "spe", "platform", "devices", "cpu"} <= seen


def test_the_checker_sees_relative_and_absolute_imports(tmp_path):
    # (the checker itself: a violation of each form is found)
    bad = PKG / "arch" / "_layer_probe.py"
    bad.write_text("from ..cpu import machine\nimport spe_emu.devices.pl011\n")
    try:
        assert _imported_layers(bad) == {"cpu", "devices"}
    finally:
        bad.unlink()
