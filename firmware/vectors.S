/* SPDX-License-Identifier: MIT */
/*
 * EL1 exception vector table (VBAR_EL1).
 *
 * Every one of the 16 entries saves the complete general-purpose state
 * (x0-x30, SP_EL0, ELR_EL1, SPSR_EL1) in a struct trap_frame on SP_EL1 and
 * calls exception_dispatch(frame, vector index); on return the (possibly
 * modified) frame is restored and the exception returns with ERET.
 * The vectors that are used: synchronous/IRQ from the current EL with SPx
 * and from a lower EL in AArch64; the others report an unexpected exception.
 */
#include "exceptions.h"

	.macro	ventry kind
	.balign	0x80
	sub	sp, sp, #TRAP_FRAME_SIZE
	stp	x0, x1, [sp, #TF_X(0)]
	mov	x0, #\kind
	b	exception_common
	.endm

	.section .text.vectors, "ax", %progbits
	.balign	0x800
	.global	vectors
vectors:
	ventry	VEC_CUR_SP0_SYNC
	ventry	VEC_CUR_SP0_IRQ
	ventry	VEC_CUR_SP0_FIQ
	ventry	VEC_CUR_SP0_SERROR
	ventry	VEC_CUR_SPX_SYNC
	ventry	VEC_CUR_SPX_IRQ
	ventry	VEC_CUR_SPX_FIQ
	ventry	VEC_CUR_SPX_SERROR
	ventry	VEC_LOW64_SYNC
	ventry	VEC_LOW64_IRQ
	ventry	VEC_LOW64_FIQ
	ventry	VEC_LOW64_SERROR
	ventry	VEC_LOW32_SYNC
	ventry	VEC_LOW32_IRQ
	ventry	VEC_LOW32_FIQ
	ventry	VEC_LOW32_SERROR

/* x0 = vector index; x0/x1 of the interrupted context already saved */
	.type	exception_common, %function
exception_common:
	stp	x2, x3, [sp, #TF_X(2)]
	stp	x4, x5, [sp, #TF_X(4)]
	stp	x6, x7, [sp, #TF_X(6)]
	stp	x8, x9, [sp, #TF_X(8)]
	stp	x10, x11, [sp, #TF_X(10)]
	stp	x12, x13, [sp, #TF_X(12)]
	stp	x14, x15, [sp, #TF_X(14)]
	stp	x16, x17, [sp, #TF_X(16)]
	stp	x18, x19, [sp, #TF_X(18)]
	stp	x20, x21, [sp, #TF_X(20)]
	stp	x22, x23, [sp, #TF_X(22)]
	stp	x24, x25, [sp, #TF_X(24)]
	stp	x26, x27, [sp, #TF_X(26)]
	stp	x28, x29, [sp, #TF_X(28)]
	mrs	x21, sp_el0
	stp	x30, x21, [sp, #TF_X(30)]	/* x30, sp_el0 */
	mrs	x22, elr_el1
	mrs	x23, spsr_el1
	stp	x22, x23, [sp, #TF_ELR]		/* elr, spsr */

	mov	x1, x0
	mov	x0, sp
	bl	exception_dispatch

	ldp	x22, x23, [sp, #TF_ELR]
	msr	elr_el1, x22
	msr	spsr_el1, x23
	ldp	x30, x21, [sp, #TF_X(30)]
	msr	sp_el0, x21
	ldp	x0, x1, [sp, #TF_X(0)]
	ldp	x2, x3, [sp, #TF_X(2)]
	ldp	x4, x5, [sp, #TF_X(4)]
	ldp	x6, x7, [sp, #TF_X(6)]
	ldp	x8, x9, [sp, #TF_X(8)]
	ldp	x10, x11, [sp, #TF_X(10)]
	ldp	x12, x13, [sp, #TF_X(12)]
	ldp	x14, x15, [sp, #TF_X(14)]
	ldp	x16, x17, [sp, #TF_X(16)]
	ldp	x18, x19, [sp, #TF_X(18)]
	ldp	x20, x21, [sp, #TF_X(20)]
	ldp	x22, x23, [sp, #TF_X(22)]
	ldp	x24, x25, [sp, #TF_X(24)]
	ldp	x26, x27, [sp, #TF_X(26)]
	ldp	x28, x29, [sp, #TF_X(28)]
	add	sp, sp, #TRAP_FRAME_SIZE
	eret
	.size	exception_common, . - exception_common

/*
 * void enter_el0(uint64_t entry, uint64_t sp_el0, uint64_t sp_el1)
 * First entry into the guest: EL0t, DAIF clear (IRQs unmasked), all
 * general-purpose registers zero, SP_EL1 reset to sp_el1 (the firmware
 * stack is empty from then on). Does not return.
 */
	.text
	.global	enter_el0
	.type	enter_el0, %function
enter_el0:
	msr	elr_el1, x0
	mov	x0, #SPSR_EL0T_IRQ_ON
	msr	spsr_el1, x0
	msr	sp_el0, x1
	mov	sp, x2
	mov	x0, #0
	mov	x1, #0
	mov	x2, #0
	mov	x3, #0
	mov	x4, #0
	mov	x5, #0
	mov	x6, #0
	mov	x7, #0
	mov	x8, #0
	mov	x9, #0
	mov	x10, #0
	mov	x11, #0
	mov	x12, #0
	mov	x13, #0
	mov	x14, #0
	mov	x15, #0
	mov	x16, #0
	mov	x17, #0
	mov	x18, #0
	mov	x19, #0
	mov	x20, #0
	mov	x21, #0
	mov	x22, #0
	mov	x23, #0
	mov	x24, #0
	mov	x25, #0
	mov	x26, #0
	mov	x27, #0
	mov	x28, #0
	mov	x29, #0
	mov	x30, #0
	eret
	.size	enter_el0, . - enter_el0
