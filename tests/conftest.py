"""Suite-wide test settings.

Hypothesis checks behaviour here, not time (speed is checked by scripts/bench.py), so its
per-example deadline is off: on a shared host a loaded CPU makes an example merely slow, and
a deadline would turn that into a failure."""

from hypothesis import settings

settings.register_profile("spe_emu", deadline=None)
settings.load_profile("spe_emu")
