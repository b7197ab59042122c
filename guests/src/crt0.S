/*
 * EL0 start-up code for the spe_emu C guests (replaces picolibc's crt0,
 * which writes EL1 registers such as CPACR_EL1).
 *
 * Entered at EL0 at 0x4800_0000 (first thing in .text, see guest.ld) with
 * nothing set up. Steps:
 *   1. sp = 0x5000_0000 (top of the guest region), clear fp/lr;
 *   2. zero .bss (__bss_start .. __bss_end, both 16-byte aligned);
 *   3. initialise the main thread's TLS block from the .tdata/.tbss
 *      template and point TPIDR_EL0 at it (picolibc _init_tls/_set_tls);
 *   4. run constructors, call main(0, NULL), then exit(status), which
 *      flushes stdio and ends in _exit -> SVC exit (see syscalls.c).
 * Only EL0-accessible instructions are used (TPIDR_EL0 is EL0-writable).
 */

	/* name the STT_FILE symbol: otherwise gas uses a random temp name */
	.file   "crt0.S"

	.section .text.start, "ax", %progbits
	.balign 4
	.global _start
	.type   _start, %function
_start:
	/* 1. stack at the top of the guest region */
	movz    x0, #0x5000, lsl #16    /* 0x5000_0000 = __stack in guest.ld */
	mov     sp, x0
	mov     x29, #0
	mov     x30, #0

	/* 2. zero .bss, 16 bytes at a time */
	adrp    x0, __bss_start
	add     x0, x0, :lo12:__bss_start
	adrp    x1, __bss_end
	add     x1, x1, :lo12:__bss_end
1:	cmp     x0, x1
	b.hs    2f
	stp     xzr, xzr, [x0], #16
	b       1b
2:
	/* 3. TLS for the main thread */
	adrp    x0, __tls_block
	add     x0, x0, :lo12:__tls_block
	bl      _init_tls
	adrp    x0, __tls_block
	add     x0, x0, :lo12:__tls_block
	bl      _set_tls

	/* 4. constructors, main, exit */
	bl      __libc_init_array
	mov     x0, #0                  /* argc */
	mov     x1, #0                  /* argv */
	bl      main
	bl      exit                    /* never returns */
3:	b       3b
	.size   _start, . - _start
