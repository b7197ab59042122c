/* SPDX-License-Identifier: MIT */
/*
 * System register and barrier accessors (C only), used with the encodings and
 * fields of the generated sysreg.h, which includes this file.
 */
#ifndef SPE_FW_SYSREG_ACCESS_H
#define SPE_FW_SYSREG_ACCESS_H

#ifndef __ASSEMBLER__
#include <stdint.h>

#define __stringify_1(x)	#x
#define __stringify(x)		__stringify_1(x)

/* by generic encoding (SYS_* in sysreg.h) */
#define read_sysreg_s(r) ({						\
	uint64_t __val;							\
	__asm__ volatile("mrs %0, " __stringify(r) : "=r"(__val));	\
	__val;								\
})
#define write_sysreg_s(r, v) do {					\
	uint64_t __val = (uint64_t)(v);					\
	__asm__ volatile("msr " __stringify(r) ", %x0" : : "rZ"(__val));	\
} while (0)

/* by architectural name, for registers every assembler knows */
#define read_sysreg(r) ({						\
	uint64_t __val;							\
	__asm__ volatile("mrs %0, " #r : "=r"(__val));			\
	__val;								\
})
#define write_sysreg(r, v) do {						\
	uint64_t __val = (uint64_t)(v);					\
	__asm__ volatile("msr " #r ", %x0" : : "rZ"(__val));		\
} while (0)

#define isb()		__asm__ volatile("isb" : : : "memory")
#define dsb(opt)	__asm__ volatile("dsb " #opt : : : "memory")
#define psb_csync()	__asm__ volatile("psb csync" : : : "memory")
#endif

#endif /* SPE_FW_SYSREG_ACCESS_H */
