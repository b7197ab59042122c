"""Pure architecture: the access context, translation regimes and faults -- no Unicorn
engine, no devices, no SPE model. Every other layer (spe/, devices/, platform/, cpu/) builds
on it; it imports nothing of theirs (the register-table machinery it uses is
:mod:`spe_emu.sysreg`)."""

# The size of an A64 instruction in bytes (Arm ARM C1.1): a PC with bits[1:0] != 0 is misaligned
INSN_BYTES = 4
