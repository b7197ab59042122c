/* SPDX-License-Identifier: MIT */
/*
 * Board memory map (docs/design.md "Board memory map", QEMU virt compatible)
 * and the firmware's use of it. Shared by C and assembly.
 *
 * Generated from spe_emu.platform.board.VIRT by
 * `python -m spe_emu.tools.generate --write`: do not edit (a test fails
 * when this file is stale).
 */
#ifndef SPE_FW_BOARD_H
#define SPE_FW_BOARD_H

#include "bits.h"

/* devices: everything below RAM (1 GiB), mapped Device-nGnRnE, EL1 only, XN */
#define DEVICE_BASE		UL(0x00000000)
#define DEVICE_SIZE		UL(0x40000000)

/* GICv3 (intc) */
#define GICD_BASE		UL(0x08000000)
#define GICR_BASE		UL(0x080A0000)	/* RD_base of CPU 0 */
#define GICR_SGI_OFFSET		UL(0x10000)	/* SGI_base = RD_base + 64 KiB */

/* PL011 UART (pl011) */
#define PL011_BASE		UL(0x09000000)
#define PL011_INTID		33	/* SPI 1 */

/* RAM */
#define RAM_BASE		UL(0x40000000)
#define RAM_SIZE		UL(0x10000000)	/* 256 MiB */

/* firmware-private region: EL1 only */
#define FW_REGION_BASE		UL(0x40000000)
#define FW_REGION_SIZE		UL(0x08000000)

/* where the SPE buffer may live (inside the firmware region) */
#define SPE_BUF_REGION_BASE	UL(0x44000000)
#define SPE_BUF_REGION_SIZE	UL(0x04000000)	/* at most 64 MiB */

/* guest region: EL0 RWX, PXN */
#define GUEST_REGION_BASE	UL(0x48000000)
#define GUEST_REGION_SIZE	UL(0x08000000)
#define GUEST_STACK_TOP		(GUEST_REGION_BASE + GUEST_REGION_SIZE)

/* private peripheral interrupts of the PE (INTIDs), level-sensitive */
#define PMBIRQ_INTID		21	/* PPI 5 */
#define PMU_INTID		23	/* PPI 7 */
#define CNTHP_INTID		26	/* PPI 10 */
#define CNTV_INTID		27	/* PPI 11 */
#define CNTHV_INTID		28	/* PPI 12 */
#define CNTPS_INTID		29	/* PPI 13 */
#define CNTP_INTID		30	/* PPI 14 */

#define PAGE_SIZE		UL(0x1000)

#endif /* SPE_FW_BOARD_H */
