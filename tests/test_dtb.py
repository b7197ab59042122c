"""The device tree blob of the virt board (spe_emu.platform.dtb): parsed back with the ``fdt``
library and with dtc, and compared node by node with the DTB QEMU builds for
``-M virt,gic-version=3 -cpu max`` (Devicetree Specification v0.4, Linux DT bindings, QEMU
hw/arm/virt.c)."""

from __future__ import annotations

import dataclasses
import shutil
import struct
import subprocess

import fdt
import pytest

from spe_emu.arch.smccc import OEN_STANDARD_SECURE, function_id, mpidr_affinity
from spe_emu.errors import ConfigError
from spe_emu.platform.board import VIRT, DeviceSpec, ppi, spi
from spe_emu.platform.dtb import build_dtb, gic_interrupt

RAM = 256 << 20
QEMU = "qemu-system-aarch64"
DTC = "dtc"


def parse(blob: bytes) -> fdt.FDT:
    return fdt.parse_dtb(blob)


def props(tree: fdt.FDT, path: str) -> dict[str, object]:
    """name -> list of cells / list of strings / True (empty) of the node at ``path``."""
    out: dict[str, object] = {}
    for p in tree.get_node(path).props:
        if isinstance(p, fdt.PropWords):
            out[p.name] = list(p.data)
        elif isinstance(p, fdt.PropStrings):
            out[p.name] = list(p.data)
        elif isinstance(p, fdt.PropBytes):
            out[p.name] = bytes(p.data)
        else:
            out[p.name] = True
    return out


def children(tree: fdt.FDT, path: str = "/") -> list[str]:
    return [n.name for n in tree.get_node(path).nodes]


def phandle_of(tree: fdt.FDT, path: str) -> int:
    return props(tree, path)["phandle"][0]


@pytest.fixture(scope="module")
def blob() -> bytes:
    return build_dtb(VIRT, ram_size=RAM, bootargs="console=ttyAMA0 earlycon",
                     initrd=(0x4800_0000, 0x4801_2345))


@pytest.fixture(scope="module")
def tree(blob) -> fdt.FDT:
    return parse(blob)


# -- the blob itself -------------------------------------------------------------------------
def test_header(blob):
    magic, total, off_struct, off_strings, off_rsv, version, last_comp, boot_cpu, \
        size_strings, size_struct = struct.unpack_from(">10I", blob)
    assert magic == 0xD00DFEED
    assert total == len(blob)
    assert (version, last_comp, boot_cpu) == (17, 16, 0)
    assert off_rsv == 40  # header (40 bytes, 8-aligned) then the reservation block
    assert blob[off_rsv:off_rsv + 16] == bytes(16)  # no reservations: the terminator only
    assert off_struct == off_rsv + 16
    assert off_strings == off_struct + size_struct
    assert off_strings + size_strings == total


def test_deterministic(blob):
    again = build_dtb(VIRT, ram_size=RAM, bootargs="console=ttyAMA0 earlycon",
                      initrd=(0x4800_0000, 0x4801_2345))
    assert again == blob


# -- every node, exactly ---------------------------------------------------------------------
def test_root(tree):
    assert children(tree) == ["chosen", "memory@40000000", "cpus", "psci", "timer", "pmu",
                              "spe", "intc@8000000", "pl011@9000000", "apb-pclk"]
    assert props(tree, "/") == {
        "interrupt-parent": [phandle_of(tree, "/intc@8000000")],
        "#address-cells": [2], "#size-cells": [2],
        "compatible": ["linux,dummy-virt"], "model": ["linux,dummy-virt"]}


def test_memory(tree):
    assert props(tree, "/memory@40000000") == {
        "device_type": ["memory"], "reg": [0, 0x4000_0000, 0, 0x1000_0000]}


def test_memory_above_4gib():
    t = parse(build_dtb(VIRT, ram_size=6 << 30))
    assert props(t, "/memory@40000000")["reg"] == [0, 0x4000_0000, 1, 0x8000_0000]


def test_cpus(tree):
    assert props(tree, "/cpus") == {"#address-cells": [1], "#size-cells": [0]}
    assert children(tree, "/cpus") == ["cpu@0"]
    assert props(tree, "/cpus/cpu@0") == {"device_type": ["cpu"], "compatible": ["arm,arm-v8"],
                                          "reg": [0], "enable-method": ["psci"]}


def test_psci(tree):
    assert props(tree, "/psci") == {
        "compatible": ["arm,psci-1.0", "arm,psci-0.2", "arm,psci"], "method": ["hvc"],
        "cpu_suspend": [0xC400_0001], "cpu_off": [0x8400_0002], "cpu_on": [0xC400_0003],
        "migrate": [0xC400_0005]}


def test_timer(tree):
    # secure phys PPI 13, non-secure phys 14, virtual 11, hyp phys 10; level-high (4), no
    # GICv2 CPU mask bits with a GICv3
    assert props(tree, "/timer") == {
        "compatible": ["arm,armv8-timer", "arm,armv7-timer"],
        "interrupts": [1, 13, 4, 1, 14, 4, 1, 11, 4, 1, 10, 4], "always-on": True}


def test_pmu_and_spe(tree):
    assert props(tree, "/pmu") == {"compatible": ["arm,armv8-pmuv3"], "interrupts": [1, 7, 4]}
    assert props(tree, "/spe") == {"compatible": ["arm,statistical-profiling-extension-v1"],
                                   "interrupts": [1, 5, 4]}


def test_intc(tree):
    p = props(tree, "/intc@8000000")
    assert p == {"compatible": ["arm,gic-v3"], "#interrupt-cells": [3],
                 "interrupt-controller": True, "#address-cells": [2], "#size-cells": [2],
                 "ranges": True,
                 "reg": [0, 0x0800_0000, 0, 0x1_0000, 0, 0x080A_0000, 0, 0x2_0000],
                 "#redistributor-regions": [1], "phandle": [p["phandle"][0]]}
    assert p["phandle"][0] not in (0, 0xFFFF_FFFF)


def test_pl011_and_clock(tree):
    clk = phandle_of(tree, "/apb-pclk")
    assert props(tree, "/pl011@9000000") == {
        "compatible": ["arm,pl011", "arm,primecell"], "reg": [0, 0x0900_0000, 0, 0x1000],
        "interrupts": [0, 1, 4], "clocks": [clk, clk],
        "clock-names": ["uartclk", "apb_pclk"]}
    assert props(tree, "/apb-pclk") == {
        "compatible": ["fixed-clock"], "#clock-cells": [0], "clock-frequency": [24_000_000],
        "clock-output-names": ["clk24mhz"], "phandle": [clk]}
    assert clk != phandle_of(tree, "/intc@8000000")


def test_chosen(tree):
    assert props(tree, "/chosen") == {
        "bootargs": ["console=ttyAMA0 earlycon"], "stdout-path": ["/pl011@9000000"],
        "linux,initrd-start": [0, 0x4800_0000], "linux,initrd-end": [0, 0x4801_2345]}


def test_chosen_minimal():
    t = parse(build_dtb(VIRT, ram_size=RAM, stdout_device=None))
    assert props(t, "/chosen") == {}  # no bootargs, no initrd, no random seeds


# -- options ---------------------------------------------------------------------------------
def test_no_psci_no_spe():
    t = parse(build_dtb(VIRT, ram_size=RAM, psci_method=None, spe=False))
    assert "psci" not in children(t) and "spe" not in children(t) and "pmu" not in children(t)
    assert "enable-method" not in props(t, "/cpus/cpu@0")


def test_psci_smc_and_pmu_alone():
    t = parse(build_dtb(VIRT, ram_size=RAM, psci_method="smc", spe=False, pmu=True))
    assert props(t, "/psci")["method"] == ["smc"]
    assert "pmu" in children(t) and "spe" not in children(t)


def test_hyp_virt_timer():
    t = parse(build_dtb(VIRT, ram_size=RAM, hyp_virt_timer=True))
    assert props(t, "/timer")["interrupts"][-3:] == [1, 12, 4]
    assert len(props(t, "/timer")["interrupts"]) == 15


def _with_redistributors(n: int):
    gic = VIRT.device("intc")
    bigger = dataclasses.replace(gic, regions=(gic.regions[0], (gic.regions[1][0], n * 0x2_0000)))
    return dataclasses.replace(VIRT, devices=tuple(bigger if d is gic else d
                                                   for d in VIRT.devices))


def test_several_cpus():
    board = _with_redistributors(4)
    # MPIDR_EL1 values as read: bit 31 RES1, MT (24) set; only Aff3..Aff0 reach the tree
    t = parse(build_dtb(board, ram_size=RAM,
                        cpu_mpidrs=(0x8100_0000, 0x8100_0001, 0x8100_0100)))
    assert children(t, "/cpus") == ["cpu@0", "cpu@1", "cpu@100"]
    assert [props(t, f"/cpus/{c}")["reg"] for c in children(t, "/cpus")] == [[0], [1], [0x100]]
    assert props(t, "/intc@8000000")["reg"][-1] == 4 * 0x2_0000


def test_aff3_needs_two_address_cells():
    t = parse(build_dtb(_with_redistributors(2), ram_size=RAM,
                        cpu_mpidrs=(0x1_0000_0000, 0x1_0000_0001)))
    assert props(t, "/cpus")["#address-cells"] == [2]
    assert props(t, "/cpus/cpu@100000001")["reg"] == [1, 1]


def test_addresses_and_intids_come_from_the_board():
    uart = dataclasses.replace(VIRT.device("pl011"), name="uart", base=0x0910_0000,
                               irqs=(("intr", spi(5)),), props=(("clock-hz", 100_000_000),))
    board = dataclasses.replace(
        VIRT, ram_base=0x8000_0000,
        devices=tuple(uart if d.name == "pl011" else d for d in VIRT.devices),
        ppis=tuple((n, ppi(6)) if n == "pmbirq" else (n, i) for n, i in VIRT.ppis))
    t = parse(build_dtb(board, ram_size=RAM, stdout_device="uart"))
    assert "memory@80000000" in children(t) and "uart@9100000" in children(t)
    assert props(t, "/memory@80000000")["reg"] == [0, 0x8000_0000, 0, RAM]
    assert props(t, "/uart@9100000")["reg"] == [0, 0x0910_0000, 0, 0x1000]
    assert props(t, "/uart@9100000")["interrupts"] == [0, 5, 4]
    assert props(t, "/spe")["interrupts"] == [1, 6, 4]
    assert props(t, "/apb-pclk")["clock-frequency"] == [100_000_000]
    assert props(t, "/apb-pclk")["clock-output-names"] == ["clk100mhz"]
    assert props(t, "/chosen")["stdout-path"] == ["/uart@9100000"]


def test_helpers():
    assert function_id(OEN_STANDARD_SECURE, 3, smc64=True) == 0xC400_0003
    assert function_id(OEN_STANDARD_SECURE, 2, smc64=False) == 0x8400_0002
    assert mpidr_affinity(0xFF_81FF_FFFF) == 0xFF_00FF_FFFF
    assert gic_interrupt(ppi(5)) == [1, 5, 4]
    assert gic_interrupt(spi(1)) == [0, 1, 4]
    assert gic_interrupt(1019) == [0, 987, 4]


@pytest.mark.parametrize("kwargs, message", [
    (dict(psci_method="smcc"), "psci_method must be one of"),
    (dict(cpu_mpidrs=()), "cpu_mpidrs is empty"),
    (dict(cpu_mpidrs=(0, 0x8000_0000)), "repeat an affinity"),
    (dict(cpu_mpidrs=(0, 1)), "2 PEs but intc's redistributor regions hold 1"),
    (dict(initrd=(0x3000_0000, 0x3000_1000)), "is not inside RAM"),
    (dict(initrd=(0x4FFF_F000, 0x5000_1000)), "is not inside RAM"),
    (dict(stdout_device="uart0"), "has no device 'uart0'"),
    (dict(ram_size=0), "ram_size must be positive"),
])
def test_errors(kwargs, message):
    args = dict(ram_size=RAM) | kwargs
    with pytest.raises(ConfigError, match=message):
        build_dtb(VIRT, **args)


def test_error_unknown_device_kind_and_sgi():
    board = dataclasses.replace(VIRT, devices=VIRT.devices + (
        DeviceSpec("pl031", "rtc", 0x0901_0000, 0x1000),))
    with pytest.raises(ConfigError, match="no device-tree node for kind 'pl031'"):
        build_dtb(board, ram_size=RAM)
    with pytest.raises(ConfigError, match="neither a PPI nor an SPI"):
        gic_interrupt(7)


# -- dtc --------------------------------------------------------------------------------------
needs_dtc = pytest.mark.skipif(shutil.which(DTC) is None,
                               reason="dtc not installed (Debian: device-tree-compiler)")


@needs_dtc
def test_dtc_reads_it_without_warnings(blob, tmp_path):
    path = tmp_path / "virt.dtb"
    path.write_bytes(blob)
    proc = subprocess.run([DTC, "-I", "dtb", "-O", "dts", str(path)], capture_output=True,
                          text=True, check=True)
    assert proc.stderr == ""
    dts = proc.stdout
    for line in ['compatible = "linux,dummy-virt";',
                 'reg = <0x00 0x40000000 0x00 0x10000000>;',
                 'reg = <0x00 0x8000000 0x00 0x10000 0x00 0x80a0000 0x00 0x20000>;',
                 'interrupts = <0x01 0x0d 0x04 0x01 0x0e 0x04 0x01 0x0b 0x04 0x01 0x0a 0x04>;',
                 'compatible = "arm,statistical-profiling-extension-v1";',
                 'interrupts = <0x01 0x05 0x04>;', 'interrupts = <0x00 0x01 0x04>;',
                 'clocks = <0x02 0x02>;', 'interrupt-parent = <0x01>;',
                 'stdout-path = "/pl011@9000000";',
                 'linux,initrd-start = <0x00 0x48000000>;']:
        assert line in dts, line
    for node in ["memory@40000000 {", "cpu@0 {", "psci {", "timer {", "intc@8000000 {",
                 "pl011@9000000 {", "apb-pclk {", "chosen {", "spe {", "pmu {"]:
        assert f"\t{node}\n" in dts, node
    # and back: dts -> dtb -> our parser sees the same tree
    again = subprocess.run([DTC, "-I", "dts", "-O", "dtb"], input=dts.encode(),
                           capture_output=True, check=True).stdout
    assert parse(again).to_dts() == parse(blob).to_dts()


# -- QEMU's own tree -------------------------------------------------------------------------
needs_qemu = pytest.mark.skipif(shutil.which(QEMU) is None,
                                reason=f"{QEMU} not installed (Debian: qemu-system-arm)")

QEMU_NODES = ["/memory@40000000", "/cpus", "/cpus/cpu@0", "/psci", "/timer", "/intc@8000000",
              "/pl011@9000000", "/chosen", "/apb-pclk", "/pmu"]


@pytest.fixture(scope="module")
def qemu_tree(tmp_path_factory) -> fdt.FDT:
    out = tmp_path_factory.mktemp("qemu") / "q.dtb"
    subprocess.run([QEMU, "-M", f"virt,gic-version=3,dumpdtb={out}", "-cpu", "max",
                    "-m", "256M", "-display", "none"], capture_output=True, timeout=60,
                   check=True)
    return parse(out.read_bytes())


def _resolve(tree: fdt.FDT, value: list[int]) -> list[str]:
    """Phandles -> node names (phandle values differ between the two trees)."""
    by_handle = {}
    for path, nodes, _ in tree.walk():
        for n in nodes:
            ph = n.get_property("phandle")
            if ph is not None:
                by_handle[ph.value] = n.name
    return [by_handle[v] for v in value]


@needs_qemu
def test_same_nodes_as_qemu(tree, qemu_tree):
    ours_root, theirs_root = props(tree, "/"), props(qemu_tree, "/")
    for key in ("#address-cells", "#size-cells", "compatible", "model"):
        assert ours_root[key] == theirs_root[key], key
    assert (_resolve(tree, ours_root["interrupt-parent"])
            == _resolve(qemu_tree, theirs_root["interrupt-parent"]) == ["intc@8000000"])
    for path in QEMU_NODES:
        ours, theirs = props(tree, path), props(qemu_tree, path)
        for key in ("compatible", "reg", "interrupts", "device_type", "method", "cpu_on",
                    "cpu_off", "cpu_suspend", "migrate", "#address-cells", "#size-cells",
                    "#interrupt-cells", "interrupt-controller", "always-on",
                    "#redistributor-regions", "clock-names", "clock-frequency",
                    "clock-output-names", "#clock-cells", "stdout-path"):
            if path == "/cpus/cpu@0" and key == "compatible":
                continue  # QEMU names the core it models (cortex-a57 for -cpu max on 7.2)
            if path == "/intc@8000000" and key == "reg":
                continue  # below
            assert ours.get(key) == theirs.get(key), (path, key)
        if "clocks" in theirs:
            assert _resolve(tree, ours["clocks"]) == _resolve(qemu_tree, theirs["clocks"])
    # GICD identical; the redistributor region starts at the same address; QEMU reserves
    # room for 123 PEs, ours for the PEs the board has (the GICR_TYPER.Last walk ends there)
    ours, theirs = props(tree, "/intc@8000000")["reg"], props(qemu_tree, "/intc@8000000")["reg"]
    assert ours[:6] == theirs[:6]
    assert 0 < ours[7] <= theirs[7] and ours[7] % 0x2_0000 == 0
