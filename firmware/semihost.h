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

#endif /* SPE_FW_SEMIHOST_H */
