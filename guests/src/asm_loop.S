/*
 * asm_loop: a pure-assembly EL0 guest (no libc) exercising the
 * instruction classes SPE cares about, ITERATIONS times:
 *   loads/stores (register-offset), TBZ/B.cond/B, CSEL/CSINV, BL/RET, BR,
 *   SIMD&FP LDR q / STR q / STR d, exclusive LDXR/STXR, LDAR/STLR and the
 *   LSE atomic LDADD (so this file is assembled with -march=armv8.2-a).
 *
 * Model of one iteration (M = 2^64; tests/test_images.py has the Python
 * version used to check guests/expected.json):
 *   idx = (h >> 7) & 511;  v = buf[idx] + (h ^ i);  buf[(idx+1) & 511] = v
 *   h = (v odd) ? h + v : h ^ (v << 1)
 *   h = (i & 2) ? h + 0x123000 : ror(h, 13)          (through BR)
 *   vec[0] += v; vec[1] += h; vec[2] = v              (SIMD&FP)
 *   excl += i  (LDXR/STXR);  rel = excl  (LDAR/STLR)
 *   old = atom; atom += v   (LDADD)
 *   h = mix(h, (i & 4) ? old : ~excl)                  (CSINV, BL mix)
 * then h is folded with mix() over vec[0], vec[1], vec[2], excl, rel,
 * atom, printed as "checksum: 0x<16 hex digits>\n" with SVC write, and the
 * guest exits with status 0 through SVC exit.
 *   mix(h, x) = ((h ^ x) * 0x9E3779B97F4A7C15) ^ (that >> 29)
 */

	/* name the STT_FILE symbol: otherwise gas uses a random temp name */
	.file   "asm_loop.S"

#define ITERATIONS 50000
#define SYS_WRITE  64
#define SYS_EXIT   93

	.section .text.start, "ax", %progbits
	.balign 4
	.global _start
	.type   _start, %function
_start:
	movz    x0, #0x5000, lsl #16            /* stack top 0x5000_0000 */
	mov     sp, x0

	/* zero .bss (16-byte aligned, see guest.ld) */
	adrp    x0, __bss_start
	add     x0, x0, :lo12:__bss_start
	adrp    x1, __bss_end
	add     x1, x1, :lo12:__bss_end
1:	cmp     x0, x1
	b.hs    2f
	stp     xzr, xzr, [x0], #16
	b       1b
2:
	ldr     x19, =0x5350455f41534d4c        /* h = "SPE_ASML" */
	mov     x20, #0                         /* i */
	adrp    x21, buf
	add     x21, x21, :lo12:buf
	adrp    x22, vec
	add     x22, x22, :lo12:vec
	adrp    x23, excl
	add     x23, x23, :lo12:excl            /* excl at +0 */
	add     x28, x23, #8                    /* rel at +8 (STLR takes no offset) */
	adrp    x24, atom
	add     x24, x24, :lo12:atom
	ldr     x25, =ITERATIONS
	ldr     x26, =0x9E3779B97F4A7C15        /* mix() multiplier */

.Lloop:
	/* load, combine, store to the neighbouring slot */
	lsr     x0, x19, #7
	and     x0, x0, #511                    /* idx */
	ldr     x1, [x21, x0, lsl #3]           /* v = buf[idx] */
	eor     x2, x19, x20
	add     x1, x1, x2                      /* v += h ^ i */
	add     x3, x0, #1
	and     x3, x3, #511
	str     x1, [x21, x3, lsl #3]           /* buf[(idx+1) & 511] = v */

	/* data-dependent conditional branch */
	tbz     x1, #0, .Leven
	add     x19, x19, x1                    /* odd: h += v */
	b       .Ljoin
.Leven:
	eor     x19, x19, x1, lsl #1            /* even: h ^= v << 1 */
.Ljoin:

	/* indirect branch to one of two targets */
	adr     x9, .Ltarget_a
	adr     x10, .Ltarget_b
	tst     x20, #2
	csel    x11, x9, x10, ne
	br      x11
.Ltarget_a:
	add     x19, x19, #0x123, lsl #12       /* h += 0x123000 */
	b       .Ltarget_done
.Ltarget_b:
	ror     x19, x19, #13
.Ltarget_done:

	/* SIMD&FP: vec[0..1] += {v, h} (one 128-bit access), vec[2] = v */
	ldr     q0, [x22]
	fmov    d1, x1                          /* v1 = {v, 0} */
	mov     v1.d[1], x19                    /* v1 = {v, h} */
	add     v0.2d, v0.2d, v1.2d
	str     q0, [x22]
	str     d1, [x22, #16]

	/* exclusive pair: excl += i */
.Lretry:
	ldxr    x4, [x23]
	add     x4, x4, x20
	stxr    w5, x4, [x23]
	cbnz    w5, .Lretry

	/* load-acquire / store-release: rel = excl */
	ldar    x6, [x23]
	stlr    x6, [x28]

	/* LSE atomic: old = atom, atom += v */
	ldadd   x1, x7, [x24]

	/* conditional select, then a call */
	tst     x20, #4
	csinv   x0, x7, x6, ne                  /* (i & 4) ? old : ~excl */
	bl      mix

	add     x20, x20, #1
	cmp     x20, x25
	b.lo    .Lloop

	/* fold the final state into h */
	ldp     x0, x27, [x22]                  /* vec[0], vec[1] */
	bl      mix
	mov     x0, x27
	bl      mix
	ldr     x0, [x22, #16]                  /* vec[2] */
	bl      mix
	ldp     x0, x27, [x23]                  /* excl, rel */
	bl      mix
	mov     x0, x27
	bl      mix
	ldr     x0, [x24]                       /* atom */
	bl      mix

	/* format h as 16 lowercase hex digits into the message */
	adrp    x1, message
	add     x1, x1, :lo12:message
	add     x1, x1, #12                     /* after "checksum: 0x" */
	mov     x2, #60
3:	lsr     x3, x19, x2
	and     x3, x3, #15
	add     x4, x3, #'0'
	add     x5, x3, #('a' - 10)
	cmp     x3, #10
	csel    x4, x4, x5, lo
	strb    w4, [x1], #1
	subs    x2, x2, #4
	b.pl    3b

	/* write(1, message, length) */
	mov     x0, #1
	adrp    x1, message
	add     x1, x1, :lo12:message
	mov     x2, #(message_end - message)
	mov     x8, #SYS_WRITE
	svc     #0

	/* exit(0) */
	mov     x0, #0
	mov     x8, #SYS_EXIT
	svc     #0
4:	b       4b
	.size   _start, . - _start

/* h = mix(h, x0): clobbers x0 */
	.text
	.balign 4
	.type   mix, %function
mix:
	eor     x0, x19, x0
	mul     x0, x0, x26
	eor     x19, x0, x0, lsr #29
	ret
	.size   mix, . - mix

	.data
message:
	.ascii  "checksum: 0x0000000000000000\n"
message_end:

	.bss
	.balign 16
buf:	.skip   512 * 8
vec:	.skip   32                              /* q slot + d slot + pad */
excl:	.skip   16                              /* excl, rel */
atom:	.skip   16
