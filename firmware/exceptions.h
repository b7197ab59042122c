/* SPDX-License-Identifier: MIT */
/* Exception entry: vector indices and the saved-register frame (vectors.S). */
#ifndef SPE_FW_EXCEPTIONS_H
#define SPE_FW_EXCEPTIONS_H

#include "sysreg.h"

/* index of the vector entry (VBAR_EL1 + 0x80 * index) */
#define VEC_CUR_SP0_SYNC	0
#define VEC_CUR_SP0_IRQ		1
#define VEC_CUR_SP0_FIQ		2
#define VEC_CUR_SP0_SERROR	3
#define VEC_CUR_SPX_SYNC	4
#define VEC_CUR_SPX_IRQ		5
#define VEC_CUR_SPX_FIQ		6
#define VEC_CUR_SPX_SERROR	7
#define VEC_LOW64_SYNC		8
#define VEC_LOW64_IRQ		9
#define VEC_LOW64_FIQ		10
#define VEC_LOW64_SERROR	11
#define VEC_LOW32_SYNC		12
#define VEC_LOW32_IRQ		13
#define VEC_LOW32_FIQ		14
#define VEC_LOW32_SERROR	15
#define VEC_FROM_LOWER_EL	8	/* indices >= this: taken from EL0 */

/* struct trap_frame layout */
#define TF_X(n)			((n) * 8)
#define TF_SP_EL0		TF_X(31)
#define TF_ELR			TF_X(32)
#define TF_SPSR			TF_X(33)
#define TRAP_FRAME_SIZE		TF_X(34)	/* multiple of 16 */

/* guest PSTATE: EL0 with SP_EL0, D/A/I/F all clear (IRQs unmasked) */
#define SPSR_EL0T_IRQ_ON	SPSR_M_EL0T

#ifndef __ASSEMBLER__
#include <stdint.h>

struct trap_frame {
	uint64_t x[31];
	uint64_t sp_el0;
	uint64_t elr;
	uint64_t spsr;
};

_Static_assert(sizeof(struct trap_frame) == TRAP_FRAME_SIZE, "trap_frame layout");
_Static_assert(__builtin_offsetof(struct trap_frame, elr) == TF_ELR, "trap_frame layout");
_Static_assert(TRAP_FRAME_SIZE % 16 == 0, "SP alignment");

void exception_dispatch(struct trap_frame *tf, uint64_t vector);
void enter_el0(uint64_t entry, uint64_t sp_el0, uint64_t sp_el1) __attribute__((noreturn));
#endif

#endif /* SPE_FW_EXCEPTIONS_H */
