/* SPDX-License-Identifier: MIT */
/*
 * GICv3 subset used by the firmware (memory-mapped part; the CPU interface
 * system registers are in sysreg.h). Shared by C and assembly.
 */
#ifndef SPE_FW_GIC_H
#define SPE_FW_GIC_H

#include "bits.h"

/* Distributor (GICD_BASE) */
#define GICD_CTLR		0x0000
/*
 * GICD_CTLR bit layout as seen by Non-secure software (GICD_CTLR.DS == 0,
 * Non-secure view) and by any software when GICD_CTLR.DS == 1; both views
 * put the affinity-routing enable at bit 4 and the Non-secure Group 1
 * enable at bit 1 (named EnableGrp1A resp. EnableGrp1 in IHI0069).
 */
#define GICD_CTLR_ENABLE_GRP1NS	BIT(1)
#define GICD_CTLR_ARE_NS	BIT(4)
/* Secure view only: disable security (single Security state); set by start.S at EL3 */
#define GICD_CTLR_DS		BIT(6)
#define GICD_CTLR_RWP		BIT(31)

/* Redistributor, RD_base frame (GICR_BASE) */
#define GICR_WAKER			0x0014
#define GICR_WAKER_PROCESSORSLEEP	BIT(1)
#define GICR_WAKER_CHILDRENASLEEP	BIT(2)

/* Redistributor, SGI_base frame (GICR_BASE + GICR_SGI_OFFSET) */
#define GICR_IGROUPR0		0x0080	/* 1 bit per INTID 0..31, 1 = Group 1 (NS) */
#define GICR_ISENABLER0		0x0100	/* 1 bit per INTID 0..31, write 1 to enable */
#define GICR_IPRIORITYR(n)	(0x0400 + 4 * (n))	/* 4 INTIDs per register */
#define GICR_IPRIORITYR_PER_REG	4
#define GICR_IPRIORITYR_FIELD(intid) \
	GENMASK(8 * ((intid) % GICR_IPRIORITYR_PER_REG) + 7, 8 * ((intid) % GICR_IPRIORITYR_PER_REG))
#define GICR_ICFGR1		0x0C04	/* 2 bits per PPI (INTID 16..31) */
#define GICR_ICFGR1_FIRST_INTID	16
#define GICR_ICFGR_FIELD(intid) \
	GENMASK(2 * ((intid) % 16) + 1, 2 * ((intid) % 16))
#define GICR_ICFGR_LEVEL	UL(0)	/* Int_config[1] == 0: level-sensitive */
#define GICR_ICFGR_EDGE		UL(2)

/* ICC_IAR1_EL1 special INTIDs */
#define GIC_INTID_SPURIOUS	1023

/* priority given to PMBIRQ (Linux's GICD_INT_DEF_PRI) */
#define GIC_PRIO_PMBIRQ		0xa0
/* priority mask: let everything through */
#define GIC_PMR_ALLOW_ALL	0xff

#ifndef __ASSEMBLER__
#include <stdint.h>

void gic_init(void);
/* handle one IRQ exception (acknowledge, dispatch, end of interrupt) */
void gic_handle_irq(void);
#endif

#endif /* SPE_FW_GIC_H */
