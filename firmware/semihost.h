/* SPDX-License-Identifier: MIT */
/*
 * Arm semihosting (HLT #0xF000 at EL1): operation number in W0, parameter
 * (block address) in X1, result in X0.
 */
#ifndef SPE_FW_SEMIHOST_H
#define SPE_FW_SEMIHOST_H

#include <stddef.h>
#include <stdint.h>

#define SEMIHOST_SYS_OPEN		0x01
#define SEMIHOST_SYS_CLOSE		0x02
#define SEMIHOST_SYS_WRITE0		0x04
#define SEMIHOST_SYS_WRITE		0x05
#define SEMIHOST_SYS_EXIT_EXTENDED	0x20

/*
 * Operations 0x100-0x1FF are reserved for user applications by the
 * semihosting specification; spe_emu answers these two (docs/design.md
 * "Linux user mode"):
 *   LINUX_EXEC    [pt_l1, entry, sp] -> 0 or -1: the host maps the Linux
 *                 process into the tables at pt_l1 (EL0 pages) and fills in
 *                 entry and sp;
 *   LINUX_SYSCALL trap frame -> LINUX_ACTION_* mask: the host performs the
 *                 system call of the frame (number in x8, arguments in
 *                 x0-x5) and writes the result into the frame's x0;
 *   LINUX_FAULT   [esr, far, elr] -> the signal Linux would send the process
 *                 for this exception from EL0 (it ends with 128 + signal).
 */
#define SEMIHOST_SPE_LINUX_EXEC		0x100
#define SEMIHOST_SPE_LINUX_SYSCALL	0x101
#define SEMIHOST_SPE_LINUX_FAULT	0x102
#define LINUX_SIGNAL_EXIT_BASE		128	/* exit status = 128 + signal, as a shell reports */
#define LINUX_ACTION_TLBI		0x1	/* mappings changed or went away */
#define LINUX_ACTION_EXIT		0x2	/* the process ended: status in x0 */

/* SYS_OPEN modes (ISO C fopen() mode index) */
#define SEMIHOST_OPEN_W			4	/* "w" */
#define SEMIHOST_OPEN_WB		5	/* "wb" */

/* SYS_EXIT_EXTENDED reason */
#define ADP_STOPPED_APPLICATION_EXIT	0x20026

/* name of the console "file" */
#define SEMIHOST_CONSOLE		":tt"

/* handle, or -1 */
int64_t semihost_open(const char *name, uint64_t mode);
int64_t semihost_close(int64_t handle);
/* NUL-terminated string to the console */
void semihost_write0(const char *s);
/* number of bytes NOT written (0 on success) */
uint64_t semihost_write(int64_t handle, const void *buf, size_t len);
void semihost_exit(uint64_t status) __attribute__((noreturn));
/* any operation with a parameter block; returns X0 */
uint64_t semihost_call(uint32_t op, const void *param);

#endif /* SPE_FW_SEMIHOST_H */
