/* SPDX-License-Identifier: MIT */
/*
 * The firmware configuration block (docs/design.md "Config block").
 *
 * The firmware defines the global `struct spe_fw_config spe_fw_config` in
 * .data, 8-byte aligned, initialised with the defaults below so that it runs
 * unchanged under QEMU. The emulator finds the symbol in the ELF and
 * overwrites it before reset. All fields are u64, in this order.
 */
#ifndef SPE_FW_CONFIG_H
#define SPE_FW_CONFIG_H

#include <stdint.h>

#include "bits.h"
#include "board.h"
#include "sysreg.h"

#define SPE_FW_CONFIG_MAGIC	UL(0x5350455F46570001)	/* "SPE_FW" v1 */

/* flags */
#define SPE_FW_FLAG_SPE_ENABLE	BIT(0)	/* enable SPE at all */
#define SPE_FW_FLAG_LINUX	BIT(1)	/* EL0 runs a Linux process: exec and syscalls by the host */

/* defaults */
#define SPE_FW_DEF_GUEST_ENTRY	GUEST_REGION_BASE
#define SPE_FW_DEF_PMSCR	(PMSCR_EL1_E0SPE | PMSCR_EL1_E1SPE)	/* 0x3 */
#define SPE_FW_DEF_PMSIRR	FIELD_PREP(PMSIRR_EL1_INTERVAL, 4096 >> 8)	/* 0x1000 */
#define SPE_FW_DEF_PMSFCR	UL(0)
#define SPE_FW_DEF_PMSEVFR	UL(0)
#define SPE_FW_DEF_PMSLATFR	UL(0)
#define SPE_FW_DEF_BUFFER_BASE	SPE_BUF_REGION_BASE
#define SPE_FW_DEF_BUFFER_SIZE	UL(0x10000)
#define SPE_FW_DEF_FLAGS	SPE_FW_FLAG_SPE_ENABLE

struct spe_fw_config {
	uint64_t magic;		/* SPE_FW_CONFIG_MAGIC */
	uint64_t guest_entry;	/* EL0 entry point of the guest */
	uint64_t pmscr;		/* value written to PMSCR_EL1 */
	uint64_t pmsirr;	/* value written to PMSIRR_EL1 */
	uint64_t pmsfcr;	/* value written to PMSFCR_EL1 */
	uint64_t pmsevfr;	/* value written to PMSEVFR_EL1 */
	uint64_t pmslatfr;	/* value written to PMSLATFR_EL1 */
	uint64_t buffer_base;	/* Profiling Buffer base (VA == PA) */
	uint64_t buffer_size;	/* bytes, multiple of 4 KiB, at most 64 MiB */
	uint64_t flags;		/* SPE_FW_FLAG_* */
};

_Static_assert(sizeof(struct spe_fw_config) == 10 * 8, "spe_fw_config layout");

extern struct spe_fw_config spe_fw_config;

#endif /* SPE_FW_CONFIG_H */
