// Runtime shared by the exception-routing programs (tests/test_exception_routing.py).
//
// _start runs at whatever EL the machine boots at (EL3, EL2 or EL1), sets up every EL at or
// below it explicitly (so QEMU and spe_emu start from the same state: their reset values
// differ), normalises PSTATE with an ERET to itself (ELxh, DAIF masked, NZCV/PAN/UAO/DIT
// zero) and branches to the program's `main` at the boot EL.
//
// Vector tables for EL1, EL2 and EL3: each of the 16 entries saves x0/x1, puts its offset
// in x0 and branches to handler_elN, which appends a record to `results` (at most MAX_RECS,
// so a runaway exception loop stays quiet):
//   [0] tag (x28 of the interrupted code)   [1] vector offset
//   [2] PSTATE on entry: CurrentEL | SPSel | DAIF | PAN | UAO (SPSR bit layout;
//       DIT is not read: spe_emu's CPU (Unicorn's "max") does not implement FEAT_DIT)
//   [3] ESR_ELx  [4] ELR_ELx  [5] SPSR_ELx  [6] FAR_ELx (Instruction/Data Aborts, PC alignment,
//       Watchpoints; else 0)
//   [7] SP on entry
// then returns: SVC/HVC, and SMC taken to EL3, return to ELR (the next instruction);
// Instruction Aborts and PC alignment faults return to the interrupted code's x30 (the test
// reaches the faulting address with BLR); an Illegal Execution state exception returns to
// ELR + 4 with SPSR.IL cleared (else the return would re-enter the illegal state); IRQ, FIQ
// and SError (vector offset 0x080/0x100/0x180; the handler ignores ESR.EC for them, and an
// IRQ or FIQ writes no ESR, so its record shows the previous one) return to ELR with
// SPSR.{A, I, F} set, so a level that stays asserted is not taken again; anything else
// returns to ELR + 4.
// Output (SYS_WRITE0): "BEGIN" at boot, each record as one line of 8 hex words as soon as it
// is made (so a run that dies half-way still shows every case before it), and "END" from
// `finish`, which then exits with SYS_EXIT_EXTENDED (ADP_Stopped_ApplicationExit, status 0).

    .include "macros.inc"

    .equ FRAME, 256
    .equ REC_BYTES, 64
    .equ MAX_RECS, 120
    .equ SCR_VALUE, 0x531          // RW, HCE, RES1 5:4, NS
    .equ HCR_VALUE, HCR_RW
    .equ SCTLR_EL1_VALUE, 0x30d00800   // RES1 bits, SPAN = 1, MMU/caches/alignment off
    .equ SCTLR_EL23_VALUE, 0x30c50830  // RES1 bits, MMU/caches/alignment off

    .section .text.boot, "ax"
    .global _start
_start:
    mrs     x0, CurrentEL
    lsr     x0, x0, #2
    cmp     x0, #3
    b.eq    init_el3
    cmp     x0, #2
    b.eq    init_el2
    b       init_el1

init_el3:
    SETREG  vbar_el3, vectors_el3
    SETREG  scr_el3, SCR_VALUE
    SETREG  sctlr_el3, SCTLR_EL23_VALUE
    msr     cptr_el3, xzr
    ldr     x1, =stack_el3_top
    mov     sp, x1
    SETREG  sp_el2, stack_el2_top
    SETREG  sp_el1, stack_el1_top
    bl      init_common2
    bl      init_common1
    adr     x1, s_begin
    bl      semi_write0
    SETREG  elr_el3, main
    SETREG  spsr_el3, 0x3cd
    eret

init_el2:
    ldr     x1, =stack_el2_top
    mov     sp, x1
    SETREG  sp_el1, stack_el1_top
    bl      init_common2
    bl      init_common1
    adr     x1, s_begin
    bl      semi_write0
    SETREG  elr_el2, main
    SETREG  spsr_el2, 0x3c9
    eret

init_el1:
    ldr     x1, =stack_el1_top
    mov     sp, x1
    bl      init_common1
    adr     x1, s_begin
    bl      semi_write0
    SETREG  elr_el1, main
    SETREG  spsr_el1, 0x3c5
    eret

init_common2:                       // EL2 state, from EL2 or EL3
    SETREG  vbar_el2, vectors_el2
    SETREG  hcr_el2, HCR_VALUE
    SETREG  sctlr_el2, SCTLR_EL23_VALUE
    SETREG  cptr_el2, 0x33ff        // RES1 bits, no traps
    SETREG  cnthctl_el2, 3          // EL1PCTEN, EL1PCEN
    msr     cntvoff_el2, xzr
    ret

init_common1:                       // EL1/EL0 state, from EL1, EL2 or EL3
    SETREG  vbar_el1, vectors_el1
    SETREG  sctlr_el1, SCTLR_EL1_VALUE
    msr     cntkctl_el1, xzr
    SETREG  cpacr_el1, (3 << 20)
    SETREG  sp_el0, stack_el0_top
    ret

// ---------------------------------------------------------------- vectors and handlers ----
    .macro VENTRY el, off
    .balign 0x80
    sub     sp, sp, #FRAME
    stp     x0, x1, [sp]
    mov     x0, #\off
    b       handler_el\el
    .endm

    .macro VECTORS el
    .balign 0x800
    .global vectors_el\el
vectors_el\el:
    .irp off, 0x000, 0x080, 0x100, 0x180, 0x200, 0x280, 0x300, 0x380
    VENTRY  \el, \off
    .endr
    .irp off, 0x400, 0x480, 0x500, 0x580, 0x600, 0x680, 0x700, 0x780
    VENTRY  \el, \off
    .endr
    .endm

    .macro HANDLER el
handler_el\el:
    stp     x2, x3, [sp, #16]
    stp     x4, x5, [sp, #32]
    stp     x6, x7, [sp, #48]
    stp     x8, x9, [sp, #64]
    stp     x10, x11, [sp, #80]
    stp     x12, x13, [sp, #96]
    stp     x14, x15, [sp, #112]
    stp     x16, x17, [sp, #128]
    stp     x18, x19, [sp, #144]
    stp     x20, x21, [sp, #160]
    stp     x22, x23, [sp, #176]
    stp     x24, x25, [sp, #192]
    stp     x26, x27, [sp, #208]
    stp     x28, x29, [sp, #224]
    str     x30, [sp, #240]
    mrs     x1, esr_el\el
    mrs     x2, elr_el\el
    mrs     x3, spsr_el\el
    ubfx    x4, x1, #26, #6         // EC
    tst     x0, #0x180              // IRQ, FIQ, SError: ESR is not this exception's
    csinv   x4, x4, xzr, eq         // EC := -1 (no FAR, no special immediate)
    and     x6, x1, #0xffff         // imm16 of SVC/HVC/SMC
    mov     x5, #0
    cmp     x4, #0x34               // FAR for Watchpoints (0x34-0x35) ...
    b.eq    0f
    cmp     x4, #0x35
    b.eq    0f
    cmp     x4, #0x20               // ... and Instruction/Data Aborts, PC alignment (0x20-0x25)
    b.lt    1f
    cmp     x4, #0x25
    b.gt    1f
0:  mrs     x5, far_el\el
1:  cmp     x4, #0x15
    b.lt    3f
    cmp     x4, #0x17
    b.gt    3f
    cmp     x6, #ELEVATE
    b.eq    elevate_el\el
    movz    x7, #FINISH
    cmp     x6, x7
    b.eq    finish
3:  mrs     x7, CurrentEL
    mrs     x8, SPSel
    orr     x7, x7, x8
    mrs     x8, DAIF
    orr     x7, x7, x8
    mrs     x8, s3_0_c4_c2_3        // PAN
    orr     x7, x7, x8
    mrs     x8, s3_0_c4_c2_4        // UAO
    orr     x7, x7, x8
    add     x8, sp, #FRAME          // SP on entry
    adrp    x9, nrec
    add     x9, x9, :lo12:nrec
    ldr     x10, [x9]
    cmp     x10, #MAX_RECS
    b.ge    4f
    adrp    x11, results
    add     x11, x11, :lo12:results
    add     x11, x11, x10, lsl #6
    stp     x28, x0, [x11]
    stp     x7, x1, [x11, #16]
    stp     x2, x3, [x11, #32]
    stp     x5, x8, [x11, #48]
    add     x10, x10, #1
    str     x10, [x9]
    bl      print_record
4:
    .if \el == 1
    cmp     x4, #0x15               // nested: SVC #0x1234 -> HVC #0x5678 from the handler
    b.ne    5f
    movz    x7, #0x1234
    cmp     x6, x7
    b.ne    5f
    .global nested_hvc
nested_hvc:
    hvc     #0x5678
    .global nested_hvc_return
nested_hvc_return:
5:
    .endif
    cmn     x4, #1                  // IRQ, FIQ, SError (EC -1): back to ELR, masked
    b.eq    8f
    cmp     x4, #0x15               // SVC, HVC: ELR is already the next instruction
    b.eq    9f
    cmp     x4, #0x16
    b.eq    9f
    .if \el == 3
    cmp     x4, #0x17               // SMC taken to EL3: likewise (trapped SMC: ELR + 4)
    b.eq    9f
    .endif
    cmp     x4, #0x20               // Instruction Abort, PC alignment: back to the
    b.eq    6f                      // caller of the BLR
    cmp     x4, #0x21
    b.eq    6f
    cmp     x4, #0x22
    b.eq    6f
    cmp     x4, #0x32               // Software Step (lower / same EL): stop stepping
    b.eq    3f                      // (MDSCR_EL1.SS = 0), back to ELR
    cmp     x4, #0x33
    b.eq    3f
    cmp     x4, #0x0e               // Illegal Execution state: clear SPSR.IL
    b.ne    2f
    bic     x3, x3, #(1 << 20)
    msr     spsr_el\el, x3
2:  add     x2, x2, #4
    b       7f
3:  mrs     x9, mdscr_el1
    bic     x9, x9, #1
    msr     mdscr_el1, x9
    b       9f
6:  ldr     x2, [sp, #240]
7:  msr     elr_el\el, x2
9:  b       restore_el\el
8:  orr     x3, x3, #0x1c0          // A, I, F
    msr     spsr_el\el, x3
    b       restore_el\el

elevate_el\el:
    mov     x9, #(0x3c1 | (\el << 2))
    msr     spsr_el\el, x9
restore_el\el:
    ldp     x0, x1, [sp]
    ldp     x2, x3, [sp, #16]
    ldp     x4, x5, [sp, #32]
    ldp     x6, x7, [sp, #48]
    ldp     x8, x9, [sp, #64]
    ldp     x10, x11, [sp, #80]
    ldp     x12, x13, [sp, #96]
    ldp     x14, x15, [sp, #112]
    ldp     x16, x17, [sp, #128]
    ldp     x18, x19, [sp, #144]
    ldp     x20, x21, [sp, #160]
    ldp     x22, x23, [sp, #176]
    ldp     x24, x25, [sp, #192]
    ldp     x26, x27, [sp, #208]
    ldp     x28, x29, [sp, #224]
    ldr     x30, [sp, #240]
    add     sp, sp, #FRAME
    eret
    .endm

    .text
    VECTORS 1
    VECTORS 2
    VECTORS 3
    HANDLER 1
    HANDLER 2
    HANDLER 3

// put_value(x0 = tag, x1 = value): append and print [tag, 0xFFFF, value, 0, 0, 0, 0, 0].
// EL1 or higher only (semihosting). Clobbers x0, x1, x9-x11, x30; leaves NZCV = 0 so that
// the SPSR of a later exception does not depend on the flags of this code.
    .global put_value
put_value:
    stp     x12, x13, [sp, #-48]!
    stp     x14, x15, [sp, #16]
    stp     x16, x30, [sp, #32]
    adrp    x9, nrec
    add     x9, x9, :lo12:nrec
    ldr     x10, [x9]
    cmp     x10, #MAX_RECS
    b.ge    1f
    adrp    x11, results
    add     x11, x11, :lo12:results
    add     x11, x11, x10, lsl #6
    movz    x12, #0xFFFF
    stp     x0, x12, [x11]
    stp     x1, xzr, [x11, #16]
    stp     xzr, xzr, [x11, #32]
    stp     xzr, xzr, [x11, #48]
    add     x10, x10, #1
    str     x10, [x9]
    bl      print_record
1:  ldp     x14, x15, [sp, #16]
    ldp     x16, x30, [sp, #32]
    ldp     x12, x13, [sp], #48
    msr     nzcv, xzr
    ret

// ---------------------------------------------------------------- output and exit ---------
semi_write0:                        // x1 = NUL-terminated string; clobbers x0
    mov     x0, #0x04
    hlt     #0xf000
    ret

// print_record(x11 = record): one line of 8 hex words. Clobbers x0, x1, x12-x16.
print_record:
    mov     x13, x30
    adrp    x1, linebuf
    add     x1, x1, :lo12:linebuf
    mov     x12, #0
1:  ldr     x0, [x11, x12, lsl #3]
    bl      put_hex
    add     x12, x12, #1
    cmp     x12, #8
    mov     w14, #' '
    mov     w15, #'\n'
    csel    w14, w14, w15, lt
    strb    w14, [x1], #1
    b.lt    1b
    strb    wzr, [x1]
    adrp    x1, linebuf
    add     x1, x1, :lo12:linebuf
    bl      semi_write0
    mov     x30, x13
    ret

finish:                             // at the handler's EL; never returns
    adr     x1, s_end
    bl      semi_write0
    mov     x0, #0x20
    adr     x1, exit_block
    hlt     #0xf000
    b       .

put_hex:                            // x0 = value, x1 = destination (advanced by 16);
    mov     x14, #60                // clobbers x14-x16
1:  lsr     x15, x0, x14
    and     x15, x15, #0xf
    add     x16, x15, #'0'
    add     x15, x15, #('a' - 10)
    cmp     x16, #'9'
    csel    x15, x16, x15, le
    strb    w15, [x1], #1
    subs    x14, x14, #4
    b.ge    1b
    ret

    .section .rodata
    .balign 8
exit_block:
    .quad   0x20026, 0
s_begin:
    .asciz  "BEGIN\n"
s_end:
    .asciz  "END\n"

    .bss
    .balign 4096
stack_el0:  .skip 4096
stack_el0_top:
stack_el1:  .skip 4096
stack_el1_top:
stack_el2:  .skip 4096
stack_el2_top:
stack_el3:  .skip 4096
stack_el3_top:
    .balign 64
results:    .skip REC_BYTES * MAX_RECS
nrec:       .quad 0
linebuf:    .skip 160
