"""Pure architecture: the access context, translation regimes and faults -- no Unicorn
engine, no devices, no SPE model. Every other layer (spe/, devices/, platform/, cpu/) builds
on it; it imports nothing of theirs (the register-table machinery it uses is
:mod:`spe_emu.sysreg`)."""
