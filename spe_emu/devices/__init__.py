"""Device models. Importing this package registers every device kind in
:data:`spe_emu.platform.device.DEVICE_TYPES` (each module registers its classes with
``class X(Device, kind="...")``)."""

from . import generic_timer  # noqa: F401  (registers kind "generic_timer")
