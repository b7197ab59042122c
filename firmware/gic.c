/* SPDX-License-Identifier: MIT */
/*
 * GICv3 subset: just enough to receive PMBIRQ (PPI 5 = INTID 21, level)
 * as a Non-secure Group 1 interrupt at EL1.
 */
#include "gic.h"

#include "board.h"
#include "fw.h"
#include "lib.h"
#include "spe.h"
#include "sysreg.h"

#define GICD(off)	((volatile uint32_t *)(GICD_BASE + (off)))
#define GICR_RD(off)	((volatile uint32_t *)(GICR_BASE + (off)))
#define GICR_SGI(off)	((volatile uint32_t *)(GICR_BASE + GICR_SGI_OFFSET + (off)))

static inline uint32_t mmio_read32(volatile uint32_t *addr)
{
	uint32_t v = *addr;

	dsb(ld);
	return v;
}

static inline void mmio_write32(volatile uint32_t *addr, uint32_t v)
{
	dsb(st);
	*addr = v;
}

static void gicd_wait_for_rwp(void)
{
	while (mmio_read32(GICD(GICD_CTLR)) & GICD_CTLR_RWP)
		;
}

static void gic_dist_init(void)
{
	mmio_write32(GICD(GICD_CTLR), GICD_CTLR_ARE_NS | GICD_CTLR_ENABLE_GRP1NS);
	gicd_wait_for_rwp();
}

static void gic_redist_init(void)
{
	uint32_t v;

	/* wake the redistributor up */
	v = mmio_read32(GICR_RD(GICR_WAKER));
	mmio_write32(GICR_RD(GICR_WAKER), v & ~(uint32_t)GICR_WAKER_PROCESSORSLEEP);
	while (mmio_read32(GICR_RD(GICR_WAKER)) & GICR_WAKER_CHILDRENASLEEP)
		;

	/* PMBIRQ: Non-secure Group 1 */
	v = mmio_read32(GICR_SGI(GICR_IGROUPR0));
	mmio_write32(GICR_SGI(GICR_IGROUPR0), v | (uint32_t)BIT(PMBIRQ_INTID));

	/* priority */
	v = mmio_read32(GICR_SGI(GICR_IPRIORITYR(PMBIRQ_INTID / GICR_IPRIORITYR_PER_REG)));
	v = FIELD_SET(GICR_IPRIORITYR_FIELD(PMBIRQ_INTID), v, GIC_PRIO_PMBIRQ);
	mmio_write32(GICR_SGI(GICR_IPRIORITYR(PMBIRQ_INTID / GICR_IPRIORITYR_PER_REG)), v);

	/* level-sensitive */
	v = mmio_read32(GICR_SGI(GICR_ICFGR1));
	v = FIELD_SET(GICR_ICFGR_FIELD(PMBIRQ_INTID), v, GICR_ICFGR_LEVEL);
	mmio_write32(GICR_SGI(GICR_ICFGR1), v);

	/* enable (write-1-to-set) */
	mmio_write32(GICR_SGI(GICR_ISENABLER0), (uint32_t)BIT(PMBIRQ_INTID));
}

static void gic_cpu_init(void)
{
	uint64_t sre;

	sre = read_sysreg_s(SYS_ICC_SRE_EL1);
	write_sysreg_s(SYS_ICC_SRE_EL1, sre | ICC_SRE_ELx_SRE);
	isb();
	sre = read_sysreg_s(SYS_ICC_SRE_EL1);
	if (!(sre & ICC_SRE_ELx_SRE))
		fw_fatal("GIC system register interface cannot be enabled (ICC_SRE_EL1=0x%lx)",
			 sre);

	write_sysreg_s(SYS_ICC_PMR_EL1, FIELD_PREP(ICC_PMR_EL1_PRIORITY, GIC_PMR_ALLOW_ALL));
	write_sysreg_s(SYS_ICC_BPR1_EL1, FIELD_PREP(ICC_BPR1_EL1_BINARYPOINT, 0));
	write_sysreg_s(SYS_ICC_IGRPEN1_EL1, ICC_IGRPEN1_EL1_ENABLE);
	isb();
}

void gic_init(void)
{
	gic_dist_init();
	gic_redist_init();
	gic_cpu_init();
}

void gic_handle_irq(void)
{
	uint64_t iar = read_sysreg_s(SYS_ICC_IAR1_EL1);
	uint32_t intid = (uint32_t)FIELD_GET(ICC_IAR1_EL1_INTID, iar);

	if (intid == GIC_INTID_SPURIOUS)
		return;

	if (intid == PMBIRQ_INTID)
		spe_handle_pmbirq();
	else
		fw_stats.other_irqs++;

	write_sysreg_s(SYS_ICC_EOIR1_EL1, iar);
	isb();
}
