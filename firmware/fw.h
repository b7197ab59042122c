/* SPDX-License-Identifier: MIT */
/* Firmware-wide state, exit paths and exit statuses. */
#ifndef SPE_FW_FW_H
#define SPE_FW_FW_H

#include <stdint.h>

/* exit statuses of the firmware itself (docs/design.md) */
#define FW_EXIT_FATAL			70	/* fatal buffer event, bad config, firmware fault */
#define FW_EXIT_GUEST_EXCEPTION		71	/* unexpected exception from EL0 */

#define FW_FATAL_MSG_MAX		200

struct fw_stats {
	uint64_t pmbirq;		/* Profiling Buffer management events serviced */
	uint64_t trace_bytes;		/* bytes handed over to spe.trace */
	uint64_t spurious_pmbirq;	/* INTID 21 without a buffer event to service */
	uint64_t other_irqs;		/* IRQs with another INTID */
};

extern struct fw_stats fw_stats;

/* EL1 C entry point, called by start.S with the MMU on */
void fw_main(void) __attribute__((noreturn));

/*
 * Stop (and, with drain, drain and hand over) SPE, print the final line,
 * close the trace and leave with SYS_EXIT_EXTENDED(status).
 */
void fw_exit(uint64_t status, int drain) __attribute__((noreturn));

/* "spe_fw: fatal: <message>" and exit FW_EXIT_FATAL without handing over more trace */
void fw_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

#endif /* SPE_FW_FW_H */
