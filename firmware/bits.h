/* SPDX-License-Identifier: MIT */
/*
 * Bit-field helpers shared by C and assembly (Linux <linux/bits.h> and
 * <linux/bitfield.h> style).
 *
 * In assembly only BIT(), GENMASK() and the plain constants built from them
 * are usable; C additionally gets FIELD_PREP()/FIELD_GET()/FIELD_MAX().
 */
#ifndef SPE_FW_BITS_H
#define SPE_FW_BITS_H

#ifdef __ASSEMBLER__
#define UL(x)		(x)
#else
#define UL(x)		(x##UL)
#endif

#define BIT(n)		(UL(1) << (n))
/* bits h..l inclusive, h >= l */
#define GENMASK(h, l)	((~UL(0) >> (63 - (h))) & (~UL(0) << (l)))

/*
 * Field with explicit shift, usable from assembly:
 *   FIELD_VAL(NAME, v) == (v << NAME_SHIFT), for NAME_SHIFT defined next to NAME.
 */
#define FIELD_VAL(name, v)	(UL(v) << name##_SHIFT)

#ifndef __ASSEMBLER__
#include <stdint.h>

#define __bf_shf(mask)		((unsigned)__builtin_ctzll(mask))
/* value placed into the field described by mask */
#define FIELD_PREP(mask, val)	((((uint64_t)(val)) << __bf_shf(mask)) & (uint64_t)(mask))
/* value of the field described by mask */
#define FIELD_GET(mask, reg)	((((uint64_t)(reg)) & (uint64_t)(mask)) >> __bf_shf(mask))
/* largest value the field can hold */
#define FIELD_MAX(mask)		((uint64_t)(mask) >> __bf_shf(mask))
/* reg with the field replaced */
#define FIELD_SET(mask, reg, val) \
	((((uint64_t)(reg)) & ~(uint64_t)(mask)) | FIELD_PREP(mask, val))
#endif

#endif /* SPE_FW_BITS_H */
