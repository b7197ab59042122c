"""Linux user mode: static AArch64 Linux programs at EL0 under the firmware, the host answering
their exec and system calls (docs/design.md "Linux user mode")."""
