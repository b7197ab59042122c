"""Device models and board services. Importing this package registers every device kind in
:data:`spe_emu.platform.device.DEVICE_TYPES` (each module registers its classes with
``class X(Device, kind="...")``); :mod:`.psci` is the firmware service PSCI."""

from . import generic_timer  # noqa: F401  (registers kind "generic_timer")
from . import gicv3  # noqa: F401  (registers kind "gicv3")
from . import pl011  # noqa: F401  (registers kind "pl011")
from . import pmu  # noqa: F401  (registers kind "pmuv3")
