/* SPDX-License-Identifier: MIT */
/* Arm semihosting calls used by the firmware. */
#include "semihost.h"

#include "lib.h"

uint64_t semihost_call(uint32_t op, const void *param)
{
	register uint64_t x0 __asm__("x0") = op;
	register uint64_t x1 __asm__("x1") = (uint64_t)param;

	__asm__ volatile("hlt #0xf000" : "+r"(x0) : "r"(x1) : "memory");
	return x0;
}

int64_t semihost_open(const char *name, uint64_t mode)
{
	const uint64_t block[3] = { (uint64_t)name, mode, fw_strlen(name) };

	return (int64_t)semihost_call(SEMIHOST_SYS_OPEN, block);
}

int64_t semihost_close(int64_t handle)
{
	const uint64_t block[1] = { (uint64_t)handle };

	return (int64_t)semihost_call(SEMIHOST_SYS_CLOSE, block);
}

void semihost_write0(const char *s)
{
	semihost_call(SEMIHOST_SYS_WRITE0, s);
}

uint64_t semihost_write(int64_t handle, const void *buf, size_t len)
{
	const uint64_t block[3] = { (uint64_t)handle, (uint64_t)buf, len };

	return semihost_call(SEMIHOST_SYS_WRITE, block);
}

void semihost_exit(uint64_t status)
{
	const uint64_t block[2] = { ADP_STOPPED_APPLICATION_EXIT, status };

	for (;;)
		semihost_call(SEMIHOST_SYS_EXIT_EXTENDED, block);
}
