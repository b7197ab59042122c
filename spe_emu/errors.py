"""The exception tree of spe_emu.

Every error the library raises on purpose derives from :class:`SpeEmuError`, so a caller (and
the CLI) can catch one class and print one line. Guest mistakes are *not* host exceptions: a
guest that misprograms SPE gets the architected behaviour and the machine logs a guest error
(see :class:`spe_emu.cpu.machine.GuestLog`); only problems that stop the run are raised.
"""

import signal


class SpeEmuError(Exception):
    """Base of every error spe_emu raises."""


class ConfigError(SpeEmuError, ValueError):
    """A configuration value is out of range or inconsistent (names the option and the value)."""


class ImageError(SpeEmuError):
    """An image file is missing, unreadable, not an ELF, or not an AArch64 executable."""


class TraceDecodeError(SpeEmuError):
    """SPE trace bytes could not be decoded."""


class RegisterTableError(SpeEmuError):
    """A system-register declaration is inconsistent (overlapping fields, bad masks, ...)."""


class SemihostingError(SpeEmuError):
    """A semihosting request was refused (for example a path escaping the output directory)."""


class GuestError(SpeEmuError):
    """The guest did something the emulator cannot continue from (unmapped fetch, deadlock...)."""


class DebuggerKill(SpeEmuError):
    """GDB ended the run (``kill``: its ``k`` or ``vKill`` packet; ``spe-emu run --gdb``)."""


class GuestRunaway(GuestError):
    """The guest did not exit within the instruction budget (``--max-insns``)."""


class DriverRuleBroken(GuestError):
    """Under ``--strict`` (``SpeConfig.strict``): the guest broke an SPE programming rule
    (spe_emu.spe.driver_rules); the run stops at the instruction that broke it. The message is
    the rule's guest_error line. The CLI exits with status 123."""


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15: the name of a signal number (``signal N`` for one without)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class RunInterrupted(SpeEmuError):
    """The run was stopped from outside, at a block boundary: ``spe-emu run`` got SIGINT or
    SIGTERM (:func:`spe_emu.cpu.runloop.interrupt_running`). summary.json names it
    ``exit_reason`` "interrupted", with what was collected; ``spe-emu run`` exits with 128 +
    ``signum`` (130, 143), as a shell reports a process the signal ended. The message is
    "interrupted by SIGNAME ``where``"."""

    def __init__(self, signum: int, where: str):
        super().__init__(f"interrupted by {signal_name(signum)} {where}")
        self.signum = signum


class EmulatorError(SpeEmuError):
    """The run stopped on a host-side failure of the emulator itself (not the guest's
    mistake): summary.json names it ``exit_reason`` "emulator-error"; ``spe-emu run`` exits
    with 126. The original exception is the ``__cause__``."""


class DeviceError(SpeEmuError):
    """A device model was driven incorrectly by the host (an address outside the device, an
    access size it cannot take, an unknown register name, an INTID without an input line).
    Guest mistakes are logged by the device instead."""
