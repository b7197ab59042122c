/* SPDX-License-Identifier: MIT */
/*
 * AArch64 system registers used by the firmware: encodings and fields.
 *
 * Generated from spe_emu's register tables by
 * `python -m spe_emu.tools.generate --write`: do not edit (a test fails
 * when this file is stale). Each section names the tables it comes from.
 *
 * Registers that old assemblers may not know are accessed through their
 * generic S<op0>_<op1>_C<n>_C<m>_<op2> names (SYS_*). A field is a mask
 * <REG>_<FIELD> (C: FIELD_PREP/FIELD_GET), FIELD being its architectural
 * name upper-cased; where assembly needs them, also <REG>_<FIELD>_SHIFT
 * for FIELD_VAL() and _WIDTH for ubfx.
 */
#ifndef SPE_FW_SYSREG_H
#define SPE_FW_SYSREG_H

#include "bits.h"
#include "sysreg_access.h"

/* ---- SPE (DDI0586A Table 7) -------------------------------------------- */
/* from spe_emu: spe.registers, arch.firmware_regs (FEAT_SPEv1p2) */
#define SYS_PMSCR_EL1		S3_0_C9_C9_0
/* FEAT_SPEv1p2, only if PMSIDR_EL1.FnE */
#define SYS_PMSNEVFR_EL1	S3_0_C9_C9_1
#define SYS_PMSICR_EL1		S3_0_C9_C9_2
#define SYS_PMSIRR_EL1		S3_0_C9_C9_3
#define SYS_PMSFCR_EL1		S3_0_C9_C9_4
#define SYS_PMSEVFR_EL1		S3_0_C9_C9_5
#define SYS_PMSLATFR_EL1	S3_0_C9_C9_6
#define SYS_PMSIDR_EL1		S3_0_C9_C9_7
#define SYS_PMBLIMITR_EL1	S3_0_C9_C10_0
#define SYS_PMBPTR_EL1		S3_0_C9_C10_1
#define SYS_PMBSR_EL1		S3_0_C9_C10_3
#define SYS_PMBIDR_EL1		S3_0_C9_C10_7

/* PMSCR_EL1 */
#define PMSCR_EL1_E0SPE		BIT(0)
#define PMSCR_EL1_E1SPE		BIT(1)
#define PMSCR_EL1_CX		BIT(3)
#define PMSCR_EL1_PA		BIT(4)
#define PMSCR_EL1_TS		BIT(5)
#define PMSCR_EL1_PCT		BIT(6)

/* PMSIRR_EL1 */
#define PMSIRR_EL1_RND		BIT(0)
#define PMSIRR_EL1_INTERVAL	GENMASK(31, 8)

/* PMSICR_EL1 */
#define PMSICR_EL1_COUNT	GENMASK(31, 0)
#define PMSICR_EL1_ECOUNT	GENMASK(63, 56)

/* PMSFCR_EL1 */
#define PMSFCR_EL1_FE		BIT(0)
#define PMSFCR_EL1_FT		BIT(1)
#define PMSFCR_EL1_FL		BIT(2)
#define PMSFCR_EL1_B		BIT(16)
#define PMSFCR_EL1_LD		BIT(17)
#define PMSFCR_EL1_ST		BIT(18)

/* PMSLATFR_EL1 */
#define PMSLATFR_EL1_MINLAT	GENMASK(11, 0)

/* PMSIDR_EL1 */
#define PMSIDR_EL1_FE		BIT(0)
#define PMSIDR_EL1_FT		BIT(1)
#define PMSIDR_EL1_FL		BIT(2)
#define PMSIDR_EL1_ARCHINST	BIT(3)
#define PMSIDR_EL1_LDS		BIT(4)
#define PMSIDR_EL1_ERND		BIT(5)
#define PMSIDR_EL1_FNE		BIT(6)
#define PMSIDR_EL1_FDS		BIT(7)
#define PMSIDR_EL1_INTERVAL	GENMASK(11, 8)
#define PMSIDR_EL1_MAXSIZE	GENMASK(15, 12)
#define PMSIDR_EL1_COUNTSIZE	GENMASK(19, 16)
#define PMSIDR_EL1_FORMAT	GENMASK(23, 20)
#define PMSIDR_EL1_PBT		BIT(24)
#define PMSIDR_EL1_CRR		BIT(25)
#define PMSIDR_EL1_EFT		BIT(26)
#define PMSIDR_EL1_FPF		BIT(27)
#define PMSIDR_EL1_ALTCLK	GENMASK(31, 28)
#define PMSIDR_EL1_COUNTSIZE_12_BIT_SAT	UL(0x2)
#define PMSIDR_EL1_MAXSIZE_MIN	UL(0x4)	/* 16 bytes */
#define PMSIDR_EL1_MAXSIZE_MAX	UL(0xB)	/* 2 KiB */

/* PMBLIMITR_EL1 */
#define PMBLIMITR_EL1_E		BIT(0)
#define PMBLIMITR_EL1_FM	GENMASK(2, 1)
#define PMBLIMITR_EL1_LIMIT	GENMASK(63, 12)
#define PMBLIMITR_EL1_FM_FILL	UL(0x0)

/* PMBSR_EL1 */
#define PMBSR_EL1_MSS		GENMASK(15, 0)
#define PMBSR_EL1_COLL		BIT(16)
#define PMBSR_EL1_S		BIT(17)
#define PMBSR_EL1_EA		BIT(18)
#define PMBSR_EL1_DL		BIT(19)
#define PMBSR_EL1_EC		GENMASK(31, 26)
#define PMBSR_EL1_EC_BUF	UL(0x0)	/* other buffer management event */
/* stage 1 data abort on buffer write */
#define PMBSR_EL1_EC_FAULT_S1	UL(0x24)
/* stage 2 data abort on buffer write */
#define PMBSR_EL1_EC_FAULT_S2	UL(0x25)

/* MSS when EC == PMBSR_EL1_EC_BUF */
#define PMBSR_EL1_BUF_BSC	GENMASK(5, 0)
#define PMBSR_EL1_BUF_BSC_FULL	UL(0x1)

/* MSS when EC is a data abort */
#define PMBSR_EL1_FAULT_FSC	GENMASK(5, 0)

/* PMBIDR_EL1 */
#define PMBIDR_EL1_ALIGN	GENMASK(3, 0)
#define PMBIDR_EL1_P		BIT(4)
#define PMBIDR_EL1_F		BIT(5)
#define PMBIDR_EL1_EA		GENMASK(11, 8)
#define PMBIDR_EL1_ALIGN_MAX	UL(0xB)	/* 2 KiB */

/* ---- ID registers ------------------------------------------------------ */
/* from spe_emu: arch.id_regs, arch.firmware_regs (ID_AA64PFR0_EL1.EL2) */
/* ID_AA64DFR0_EL1 */
#define ID_AA64DFR0_EL1_PMUVER	GENMASK(11, 8)
#define ID_AA64DFR0_EL1_BRPS	GENMASK(15, 12)
#define ID_AA64DFR0_EL1_PMSVER	GENMASK(35, 32)
#define ID_AA64DFR0_EL1_PMSVER_NI	UL(0x0)

/* ID_AA64PFR0_EL1 */
#define ID_AA64PFR0_EL1_EL2	GENMASK(11, 8)
#define ID_AA64PFR0_EL1_EL2_SHIFT	8
#define ID_AA64PFR0_EL1_EL2_WIDTH	4
#define ID_AA64PFR0_EL1_FP	GENMASK(19, 16)
#define ID_AA64PFR0_EL1_ADVSIMD	GENMASK(23, 20)
#define ID_AA64PFR0_EL1_GIC	GENMASK(27, 24)
#define ID_AA64PFR0_EL1_GIC_SHIFT	24
#define ID_AA64PFR0_EL1_GIC_WIDTH	4
#define ID_AA64PFR0_EL1_RAS	GENMASK(31, 28)
#define ID_AA64PFR0_EL1_DIT	GENMASK(51, 48)
#define ID_AA64PFR0_EL1_CSV3	GENMASK(63, 60)

/* ---- PSTATE / exception state ------------------------------------------ */
/* from spe_emu: cpu.exceptions, arch.firmware_regs */
/* CurrentEL */
#define CURRENTEL_EL		GENMASK(3, 2)
#define CURRENTEL_EL_SHIFT	2
#define CURRENTEL_EL1		FIELD_VAL(CURRENTEL_EL, 1)
#define CURRENTEL_EL2		FIELD_VAL(CURRENTEL_EL, 2)
#define CURRENTEL_EL3		FIELD_VAL(CURRENTEL_EL, 3)

/* SPSR_ELx (PSTATE) */
#define SPSR_M_EL0T		UL(0x0)	/* M[3:0]: EL0t */
#define SPSR_M_EL1H		UL(0x5)	/* M[3:0]: EL1h */
#define SPSR_F			BIT(6)
#define SPSR_I			BIT(7)
#define SPSR_A			BIT(8)
#define SPSR_D			BIT(9)
#define SPSR_DAIF		(SPSR_D | SPSR_A | SPSR_I | SPSR_F)
#define DAIFSET_ALL		0xf	/* msr daifset immediate: D, A, I, F */

/* ESR_ELx */
#define ESR_ELx_ISS		GENMASK(24, 0)
#define ESR_ELx_IL		BIT(25)
#define ESR_ELx_EC		GENMASK(31, 26)
#define ESR_ELx_EC_UNKNOWN	UL(0x0)
#define ESR_ELx_EC_SVC64	UL(0x15)
#define ESR_ELx_SVC_IMM16	GENMASK(15, 0)

/* ---- EL3 --------------------------------------------------------------- */
/* from spe_emu: arch.context, arch.firmware_regs */
/* SCR_EL3 */
#define SCR_EL3_NS		BIT(0)
#define SCR_EL3_IRQ		BIT(1)
#define SCR_EL3_FIQ		BIT(2)
#define SCR_EL3_EA		BIT(3)
#define SCR_EL3_SMD		BIT(7)
#define SCR_EL3_HCE		BIT(8)
#define SCR_EL3_RW		BIT(10)
#define SCR_EL3_APK		BIT(16)
#define SCR_EL3_API		BIT(17)
#define SCR_EL3_GPF		BIT(48)
#define SCR_EL3_RES1		GENMASK(5, 4)

/* MDCR_EL3 */
#define MDCR_EL3_TPM		BIT(6)
#define MDCR_EL3_TDA		BIT(9)
#define MDCR_EL3_TDOSA		BIT(10)
#define MDCR_EL3_NSPB		GENMASK(13, 12)
#define MDCR_EL3_SDD		BIT(16)
#define MDCR_EL3_SPME		BIT(17)
#define MDCR_EL3_SCCD		BIT(23)
#define MDCR_EL3_PMSEE		GENMASK(52, 51)
#define MDCR_EL3_NSPB_SHIFT	12
/* Profiling Buffer owned by Non-secure EL1 (or EL2, see MDCR_EL2.E2PB) */
#define MDCR_EL3_NSPB_NS_EL1	FIELD_VAL(MDCR_EL3_NSPB, 3)

/* CPTR_EL3 */
#define CPTR_EL3_EZ		BIT(8)
#define CPTR_EL3_TFP		BIT(10)
#define CPTR_EL3_TTA		BIT(20)
#define CPTR_EL3_TCPAC		BIT(31)

/* ---- EL2 --------------------------------------------------------------- */
/* from spe_emu: arch.context, devices.generic_timer, arch.firmware_regs */
/* HCR_EL2 */
#define HCR_EL2_VM		BIT(0)
#define HCR_EL2_FMO		BIT(3)
#define HCR_EL2_IMO		BIT(4)
#define HCR_EL2_AMO		BIT(5)
#define HCR_EL2_VF		BIT(6)
#define HCR_EL2_VI		BIT(7)
#define HCR_EL2_VSE		BIT(8)
#define HCR_EL2_FB		BIT(9)
#define HCR_EL2_DC		BIT(12)
#define HCR_EL2_TID3		BIT(18)
#define HCR_EL2_TGE		BIT(27)
#define HCR_EL2_RW		BIT(31)
#define HCR_EL2_E2H		BIT(34)
#define HCR_EL2_TEA		BIT(37)
#define HCR_EL2_GPF		BIT(38)
#define HCR_EL2_APK		BIT(40)
#define HCR_EL2_API		BIT(41)

/* MDCR_EL2 */
#define MDCR_EL2_HPMN		GENMASK(4, 0)
#define MDCR_EL2_TPMCR		BIT(5)
#define MDCR_EL2_TPM		BIT(6)
#define MDCR_EL2_HPME		BIT(7)
#define MDCR_EL2_TDE		BIT(8)
#define MDCR_EL2_TDA		BIT(9)
#define MDCR_EL2_TDOSA		BIT(10)
#define MDCR_EL2_E2PB		GENMASK(13, 12)
#define MDCR_EL2_TPMS		BIT(14)
#define MDCR_EL2_HPMD		BIT(17)
#define MDCR_EL2_HCCD		BIT(23)
#define MDCR_EL2_HLP		BIT(26)
#define MDCR_EL2_HPMN_MASK	MDCR_EL2_HPMN	/* reset value PMCR_EL0.N */
#define MDCR_EL2_E2PB_SHIFT	12
/* Profiling Buffer owned by EL1, its accesses from EL1 not trapped */
#define MDCR_EL2_E2PB_EL1	FIELD_VAL(MDCR_EL2_E2PB, 3)

/* CPTR_EL2 */
#define CPTR_EL2_TZ		BIT(8)
#define CPTR_EL2_TFP		BIT(10)
#define CPTR_EL2_TTA		BIT(20)
#define CPTR_EL2_TCPAC		BIT(31)
/* with HCR_EL2.E2H == 0 */
#define CPTR_EL2_RES1		(GENMASK(7, 0) | BIT(9) | GENMASK(13, 12))

/* CNTHCTL_EL2 */
#define CNTHCTL_EL2_EL1PCTEN	BIT(0)
#define CNTHCTL_EL2_EL1PCEN	BIT(1)
#define CNTHCTL_EL2_EVNTEN	BIT(2)
#define CNTHCTL_EL2_EVNTDIR	BIT(3)
#define CNTHCTL_EL2_EVNTI	GENMASK(7, 4)

/* ---- EL1 --------------------------------------------------------------- */
/* from spe_emu: arch.context, arch.mmu, devices.generic_timer, arch.firmware_regs */
/* SCTLR_EL1 */
#define SCTLR_EL1_M		BIT(0)
#define SCTLR_EL1_A		BIT(1)
#define SCTLR_EL1_C		BIT(2)
#define SCTLR_EL1_SA		BIT(3)
#define SCTLR_EL1_SA0		BIT(4)
#define SCTLR_EL1_EOS		BIT(11)
#define SCTLR_EL1_I		BIT(12)
#define SCTLR_EL1_DZE		BIT(14)
#define SCTLR_EL1_UCT		BIT(15)
#define SCTLR_EL1_NTWI		BIT(16)
#define SCTLR_EL1_NTWE		BIT(18)
#define SCTLR_EL1_WXN		BIT(19)
#define SCTLR_EL1_TSCXT		BIT(20)
#define SCTLR_EL1_EIS		BIT(22)
#define SCTLR_EL1_SPAN		BIT(23)
#define SCTLR_EL1_UCI		BIT(26)
#define SCTLR_EL1_NTLSMD	BIT(28)
#define SCTLR_EL1_LSMAOE	BIT(29)
/* RES1 in Armv8.0: keep its behaviour */
#define SCTLR_EL1_RES1		(SCTLR_EL1_EOS | SCTLR_EL1_TSCXT | \
				 SCTLR_EL1_EIS | SCTLR_EL1_SPAN | \
				 SCTLR_EL1_NTLSMD | SCTLR_EL1_LSMAOE)

/* CPACR_EL1 */
#define CPACR_EL1_FPEN		GENMASK(21, 20)
#define CPACR_EL1_FPEN_SHIFT	20
#define CPACR_EL1_FPEN_NOTRAP	FIELD_VAL(CPACR_EL1_FPEN, 3)

/* CNTKCTL_EL1 */
#define CNTKCTL_EL1_EL0PCTEN	BIT(0)
#define CNTKCTL_EL1_EL0VCTEN	BIT(1)
#define CNTKCTL_EL1_EVNTEN	BIT(2)
#define CNTKCTL_EL1_EVNTDIR	BIT(3)
#define CNTKCTL_EL1_EVNTI	GENMASK(7, 4)
#define CNTKCTL_EL1_EL0VTEN	BIT(8)
#define CNTKCTL_EL1_EL0PTEN	BIT(9)

/* MAIR_EL1: the firmware's attribute indices */
#define MAIR_ATTR_DEVICE_nGnRnE	UL(0x00)
#define MAIR_ATTR_NORMAL_WB	UL(0xFF)	/* Normal WB RW-allocate */
#define MAIR_ATTR_SHIFT(idx)	((idx) * 8)
#define MT_DEVICE_nGnRnE	0
#define MT_NORMAL		1

/* TCR_EL1 */
#define TCR_EL1_T0SZ		GENMASK(5, 0)
#define TCR_EL1_T0SZ_SHIFT	0
#define TCR_EL1_EPD0		BIT(7)
#define TCR_EL1_IRGN0		GENMASK(9, 8)
#define TCR_EL1_IRGN0_SHIFT	8
#define TCR_EL1_ORGN0		GENMASK(11, 10)
#define TCR_EL1_ORGN0_SHIFT	10
#define TCR_EL1_SH0		GENMASK(13, 12)
#define TCR_EL1_SH0_SHIFT	12
#define TCR_EL1_TG0		GENMASK(15, 14)
#define TCR_EL1_TG0_SHIFT	14
#define TCR_EL1_T1SZ		GENMASK(21, 16)
#define TCR_EL1_EPD1		BIT(23)
#define TCR_EL1_TG1		GENMASK(31, 30)
#define TCR_EL1_IPS		GENMASK(34, 32)
#define TCR_EL1_IPS_SHIFT	32
#define TCR_EL1_TBI0		BIT(37)
#define TCR_EL1_TBI1		BIT(38)
#define TCR_EL1_HA		BIT(39)
#define TCR_EL1_HD		BIT(40)
#define TCR_EL1_E0PD0		BIT(55)
#define TCR_EL1_E0PD1		BIT(56)
/* 4 GiB of physical address space covers the board */
#define TCR_IPS_32BIT		0
#define TCR_RGN_WBWA		1
#define TCR_SH_INNER		3
#define TCR_TG0_4K		0

/* ---- stage 1 translation table descriptors (4 KiB granule) ------------- */
/* from spe_emu: arch.mmu */
#define PTE_VALID		BIT(0)
#define PTE_TYPE		BIT(1)
#define PTE_ATTRINDX		GENMASK(4, 2)
#define PTE_ATTRINDX_SHIFT	2
#define PTE_AP1			BIT(6)
#define PTE_AP2			BIT(7)
#define PTE_SH			GENMASK(9, 8)
#define PTE_SH_SHIFT		8
#define PTE_AF			BIT(10)
#define PTE_OA			GENMASK(47, 12)
#define PTE_DBM			BIT(51)
#define PTE_PXN			BIT(53)
#define PTE_UXN			BIT(54)
#define PTE_TYPE_SHIFT		1
/* level 0-2: next-level table (else block) */
#define PTE_TYPE_TABLE		FIELD_VAL(PTE_TYPE, 1)
#define PTE_AP_EL1_RW		UL(0x0)	/* AP[2:1] = 0b00: EL1 RW, EL0 none */
/* AP[2:1] = 0b01: EL1 RW, EL0 RW */
#define PTE_AP_EL0_RW		UL(0x40)
#define PTE_SH_INNER		FIELD_VAL(PTE_SH, 3)
#define PT_ENTRIES		512
#define PT_ENTRY_SIZE_LOG2	3
#define L1_BLOCK_SHIFT		30	/* 1 GiB per level-1 entry */
#define L2_BLOCK_SHIFT		21	/* 2 MiB per level-2 entry */

/* ---- GICv3 CPU interface (system registers) ---------------------------- */
/* from spe_emu: devices.gicv3.ICC_REGISTERS */
#define SYS_ICC_PMR_EL1		S3_0_C4_C6_0
#define SYS_ICC_IAR1_EL1	S3_0_C12_C12_0
#define SYS_ICC_EOIR1_EL1	S3_0_C12_C12_1
#define SYS_ICC_BPR1_EL1	S3_0_C12_C12_3
#define SYS_ICC_SRE_EL1		S3_0_C12_C12_5
#define SYS_ICC_IGRPEN1_EL1	S3_0_C12_C12_7
#define SYS_ICC_SRE_EL2		S3_4_C12_C9_5
#define SYS_ICC_SRE_EL3		S3_6_C12_C12_5

/* ICC_SRE_EL1/EL2/EL3 (Enable: EL2/EL3 only, lower EL may use ICC_SRE_ELx) */
#define ICC_SRE_ELx_SRE		BIT(0)
#define ICC_SRE_ELx_DFB		BIT(1)
#define ICC_SRE_ELx_DIB		BIT(2)
#define ICC_SRE_ELx_ENABLE	BIT(3)

/* ICC_IAR1_EL1 */
#define ICC_IAR1_EL1_INTID	GENMASK(23, 0)

/* ICC_IGRPEN1_EL1 */
#define ICC_IGRPEN1_EL1_ENABLE	BIT(0)

/* ICC_PMR_EL1 */
#define ICC_PMR_EL1_PRIORITY	GENMASK(7, 0)

/* ICC_BPR1_EL1 */
#define ICC_BPR1_EL1_BINARYPOINT	GENMASK(2, 0)

#endif /* SPE_FW_SYSREG_H */
