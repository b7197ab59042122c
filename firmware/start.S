/* SPDX-License-Identifier: MIT */
/*
 * Firmware entry (docs/design.md "Firmware (EL1) contract").
 *
 * _start is linked at 0x4000_0000. The emulator enters it at EL1h with the
 * MMU off; QEMU may enter it at EL3 or EL2, in which case we drop to
 * Non-secure EL1 with the Profiling Buffer owned by EL1:
 *   EL3: SCR_EL3.{NS,RW}, MDCR_EL3.NSPB = 0b11, no FP/SIMD traps,
 *        ICC_SRE_EL3 enabling the GIC system registers below EL3 and
 *        GICD_CTLR.DS = 1 so that Non-secure EL1 may configure PMBIRQ;
 *   EL2: HCR_EL2.RW, MDCR_EL2.E2PB = 0b11 (TPMS = 0), no FP/SIMD or timer
 *        traps, ICC_SRE_EL2 enabling the GIC system registers at EL1.
 * At EL1: stack, .bss, identity-mapped page tables (built here), MMU and
 * caches on, VBAR_EL1, CPACR_EL1.FPEN = 0b11, EL0 counter access, then
 * fw_main() (never returns).
 */
#include "bits.h"
#include "board.h"
#include "gic.h"
#include "sysreg.h"

/* block descriptors of the identity map */
#define PTE_BLOCK_DEVICE	(PTE_VALID | FIELD_VAL(PTE_ATTRINDX, MT_DEVICE_nGnRnE) | \
				 PTE_AP_EL1_RW | PTE_AF | PTE_PXN | PTE_UXN)
#define PTE_BLOCK_FW		(PTE_VALID | FIELD_VAL(PTE_ATTRINDX, MT_NORMAL) | \
				 PTE_AP_EL1_RW | PTE_SH_INNER | PTE_AF | PTE_UXN)
#define PTE_BLOCK_GUEST		(PTE_VALID | FIELD_VAL(PTE_ATTRINDX, MT_NORMAL) | \
				 PTE_AP_EL0_RW | PTE_SH_INNER | PTE_AF | PTE_PXN)
#define PTE_TABLE		(PTE_VALID | PTE_TYPE_TABLE)

#define MAIR_EL1_FW		((MAIR_ATTR_DEVICE_nGnRnE << MAIR_ATTR_SHIFT(MT_DEVICE_nGnRnE)) | \
				 (MAIR_ATTR_NORMAL_WB << MAIR_ATTR_SHIFT(MT_NORMAL)))

#define TCR_T0SZ_FW		25	/* 39-bit VA: translation starts at level 1 */
#define TCR_EL1_FW		(FIELD_VAL(TCR_EL1_T0SZ, TCR_T0SZ_FW) | \
				 FIELD_VAL(TCR_EL1_IRGN0, TCR_RGN_WBWA) | \
				 FIELD_VAL(TCR_EL1_ORGN0, TCR_RGN_WBWA) | \
				 FIELD_VAL(TCR_EL1_SH0, TCR_SH_INNER) | \
				 FIELD_VAL(TCR_EL1_TG0, TCR_TG0_4K) | \
				 TCR_EL1_EPD1 | \
				 FIELD_VAL(TCR_EL1_IPS, TCR_IPS_32BIT))

#define SCTLR_EL1_FW		(SCTLR_EL1_RES1 | SCTLR_EL1_M | SCTLR_EL1_C | SCTLR_EL1_I | \
				 SCTLR_EL1_SA | SCTLR_EL1_SA0 | SCTLR_EL1_DZE | SCTLR_EL1_UCT | \
				 SCTLR_EL1_UCI | SCTLR_EL1_NTWI | SCTLR_EL1_NTWE)

#define SCR_EL3_FW		(SCR_EL3_RES1 | SCR_EL3_NS | SCR_EL3_RW | SCR_EL3_SMD)
#define ICC_SRE_HIGHER_EL	(ICC_SRE_ELx_SRE | ICC_SRE_ELx_DFB | ICC_SRE_ELx_DIB | \
				 ICC_SRE_ELx_ENABLE)
#define SPSR_EL1H_MASKED	(SPSR_DAIF | SPSR_M_EL1H)
#define CNTKCTL_EL1_FW		(CNTKCTL_EL1_EL0PCTEN | CNTKCTL_EL1_EL0VCTEN)
#define CNTHCTL_EL2_FW		(CNTHCTL_EL2_EL1PCTEN | CNTHCTL_EL2_EL1PCEN)

	.section .text.boot, "ax", %progbits
	.balign	4
	.global	_start
	.type	_start, %function
_start:
	msr	daifset, #DAIFSET_ALL
	mrs	x0, CurrentEL
	cmp	x0, #CURRENTEL_EL3
	b.eq	el3_entry
	cmp	x0, #CURRENTEL_EL2
	b.eq	el2_entry
	b	el1_entry
	.size	_start, . - _start

/* ---- EL3: hand everything needed to Non-secure EL1 ------------------- */
	.type	el3_entry, %function
el3_entry:
	mrs	x0, id_aa64pfr0_el1
	ubfx	x0, x0, #ID_AA64PFR0_EL1_GIC_SHIFT, #ID_AA64PFR0_EL1_GIC_WIDTH
	cbz	x0, 1f
	mov	x0, #ICC_SRE_HIGHER_EL
	msr	SYS_ICC_SRE_EL3, x0
	isb
	/* one Security state: Non-secure EL1 owns the PMBIRQ configuration */
	ldr	x1, =(GICD_BASE + GICD_CTLR)
	ldr	w0, [x1]
	orr	w0, w0, #GICD_CTLR_DS
	str	w0, [x1]
	dsb	sy
1:
	mov	x0, #MDCR_EL3_NSPB_NS_EL1
	msr	mdcr_el3, x0
	msr	cptr_el3, xzr			/* CPTR_EL3.TFP = 0 */
	ldr	x0, =SCR_EL3_FW
	msr	scr_el3, x0
	isb

	mrs	x0, id_aa64pfr0_el1
	ubfx	x0, x0, #ID_AA64PFR0_EL1_EL2_SHIFT, #ID_AA64PFR0_EL1_EL2_WIDTH
	cbz	x0, 2f
	bl	setup_el2
2:
	mov	x0, #SPSR_EL1H_MASKED
	msr	spsr_el3, x0
	adr	x0, el1_entry
	msr	elr_el3, x0
	eret
	.size	el3_entry, . - el3_entry

/* ---- EL2: run the firmware at EL1 ------------------------------------ */
	.type	el2_entry, %function
el2_entry:
	bl	setup_el2
	mov	x0, #SPSR_EL1H_MASKED
	msr	spsr_el2, x0
	adr	x0, el1_entry
	msr	elr_el2, x0
	eret
	.size	el2_entry, . - el2_entry

/*
 * EL2 controls for a Non-secure EL1 that owns the Profiling Buffer.
 * Callable from EL3 or EL2, no stack; clobbers x0.
 */
	.type	setup_el2, %function
setup_el2:
	ldr	x0, =HCR_EL2_RW
	msr	hcr_el2, x0
	isb
	mrs	x0, mdcr_el2
	and	x0, x0, #MDCR_EL2_HPMN_MASK	/* keep HPMN, clear TPMS, TPM, ... */
	orr	x0, x0, #MDCR_EL2_E2PB_EL1
	msr	mdcr_el2, x0
	ldr	x0, =CPTR_EL2_RES1		/* CPTR_EL2.TFP = 0 */
	msr	cptr_el2, x0
	mov	x0, #CNTHCTL_EL2_FW
	msr	cnthctl_el2, x0
	msr	cntvoff_el2, xzr
	msr	hstr_el2, xzr
	msr	vttbr_el2, xzr
	mrs	x0, midr_el1
	msr	vpidr_el2, x0
	mrs	x0, mpidr_el1
	msr	vmpidr_el2, x0
	mrs	x0, id_aa64pfr0_el1
	ubfx	x0, x0, #ID_AA64PFR0_EL1_GIC_SHIFT, #ID_AA64PFR0_EL1_GIC_WIDTH
	cbz	x0, 1f
	mov	x0, #ICC_SRE_HIGHER_EL
	msr	SYS_ICC_SRE_EL2, x0
1:	isb
	ret
	.size	setup_el2, . - setup_el2

/* ---- EL1 ------------------------------------------------------------- */

	.type	el1_entry, %function
el1_entry:
	msr	daifset, #DAIFSET_ALL
	msr	spsel, #1
	adrp	x0, __stack_top
	add	x0, x0, :lo12:__stack_top
	mov	sp, x0

	/* zero .bss (16-byte aligned both ends, see fw.ld); MMU off: aligned stores only */
	adrp	x0, __bss_start
	add	x0, x0, :lo12:__bss_start
	adrp	x1, __bss_end
	add	x1, x1, :lo12:__bss_end
1:	cmp	x0, x1
	b.hs	2f
	stp	xzr, xzr, [x0], #16
	b	1b
2:
	/*
	 * Identity map, 4 KiB granule, T0SZ = 25 (level-1 table, 1 GiB entries):
	 *   L1[0]: devices -> pt_l2_dev (2 MiB blocks), Device-nGnRnE, EL1 only, XN
 *          (2 MiB blocks, not one 1 GiB block, so that the host may give a
 *          Linux process the slots no device uses: docs/design.md "Linux
 *          user mode")
	 *   L1[1]: RAM GiB -> pt_l2 (2 MiB blocks):
	 *          firmware region: Normal WB, EL1 RW, UXN
	 *          guest region:    Normal WB, EL0+EL1 RW, PXN
	 *          rest of the GiB: invalid
	 */
	adrp	x20, pt_l1
	adrp	x21, pt_l2_dev
	orr	x1, x21, #PTE_TABLE
	str	x1, [x20, #((DEVICE_BASE >> L1_BLOCK_SHIFT) << PT_ENTRY_SIZE_LOG2)]
	ldr	x2, =DEVICE_BASE
	ldr	x3, =(DEVICE_BASE + DEVICE_SIZE)
	ldr	x4, =PTE_BLOCK_DEVICE
	bl	map_l2_blocks
	adrp	x21, pt_l2
	orr	x1, x21, #PTE_TABLE
	str	x1, [x20, #((RAM_BASE >> L1_BLOCK_SHIFT) << PT_ENTRY_SIZE_LOG2)]

	ldr	x2, =FW_REGION_BASE
	ldr	x3, =(FW_REGION_BASE + FW_REGION_SIZE)
	ldr	x4, =PTE_BLOCK_FW
	bl	map_l2_blocks
	ldr	x2, =GUEST_REGION_BASE
	ldr	x3, =(GUEST_REGION_BASE + GUEST_REGION_SIZE)
	ldr	x4, =PTE_BLOCK_GUEST
	bl	map_l2_blocks

	ldr	x0, =MAIR_EL1_FW
	msr	mair_el1, x0
	ldr	x0, =TCR_EL1_FW
	msr	tcr_el1, x0
	msr	ttbr0_el1, x20
	msr	ttbr1_el1, xzr
	isb
	tlbi	vmalle1
	ic	iallu
	dsb	nsh
	isb
	ldr	x0, =SCTLR_EL1_FW
	msr	sctlr_el1, x0
	isb

	adr	x0, vectors
	msr	vbar_el1, x0
	mov	x0, #CPACR_EL1_FPEN_NOTRAP
	msr	cpacr_el1, x0
	mov	x0, #CNTKCTL_EL1_FW
	msr	cntkctl_el1, x0
	isb

	bl	fw_main
3:	wfi
	b	3b
	.size	el1_entry, . - el1_entry

/* x21 = level-2 table, [x2, x3) = range (2 MiB aligned), x4 = block attributes; clobbers x2, x5, x6 */
	.type	map_l2_blocks, %function
map_l2_blocks:
1:	ubfx	x5, x2, #L2_BLOCK_SHIFT, #(L1_BLOCK_SHIFT - L2_BLOCK_SHIFT)
	add	x5, x21, x5, lsl #PT_ENTRY_SIZE_LOG2
	orr	x6, x2, x4
	str	x6, [x5]
	add	x2, x2, #(1 << L2_BLOCK_SHIFT)
	cmp	x2, x3
	b.lo	1b
	ret
	.size	map_l2_blocks, . - map_l2_blocks

	.ltorg

/* translation tables: in .bss, zeroed above */
	.section .bss.pgtable, "aw", %nobits
	.balign	PAGE_SIZE
	.global	pt_l1, pt_l2, pt_l2_dev
pt_l1:	.space	PT_ENTRIES << PT_ENTRY_SIZE_LOG2
pt_l2:	.space	PT_ENTRIES << PT_ENTRY_SIZE_LOG2
pt_l2_dev:	.space	PT_ENTRIES << PT_ENTRY_SIZE_LOG2
