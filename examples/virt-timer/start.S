// Entry and exception vectors of a bare-metal program for QEMU's virt board (EL1, MMU off).
    .section .text.boot, "ax"
    .global _start
_start:
    ldr x1, =__stack_top
    mov sp, x1
    adr x1, vectors
    msr vbar_el1, x1
    isb
    bl main
    // main returned: PSCI SYSTEM_OFF through the hypervisor call conduit (DEN 0022 5.10)
    movz w0, #0x0008
    movk w0, #0x8400, lsl #16
    hvc #0
1:  wfi
    b 1b

    .macro ventry label
    .balign 0x80
    b \label
    .endm

    .balign 0x800
vectors:
    ventry unexpected       // current EL, SP_EL0: synchronous
    ventry unexpected       //   IRQ
    ventry unexpected       //   FIQ
    ventry unexpected       //   SError
    ventry unexpected       // current EL, SP_ELx: synchronous
    ventry irq_entry        //   IRQ
    ventry unexpected       //   FIQ
    ventry unexpected       //   SError
    .rept 8
    ventry unexpected       // lower EL
    .endr

irq_entry:
    stp x29, x30, [sp, #-176]!
    stp x0, x1, [sp, #16]
    stp x2, x3, [sp, #32]
    stp x4, x5, [sp, #48]
    stp x6, x7, [sp, #64]
    stp x8, x9, [sp, #80]
    stp x10, x11, [sp, #96]
    stp x12, x13, [sp, #112]
    stp x14, x15, [sp, #128]
    stp x16, x17, [sp, #144]
    str x18, [sp, #160]
    bl irq_handler
    ldr x18, [sp, #160]
    ldp x16, x17, [sp, #144]
    ldp x14, x15, [sp, #128]
    ldp x12, x13, [sp, #112]
    ldp x10, x11, [sp, #96]
    ldp x8, x9, [sp, #80]
    ldp x6, x7, [sp, #64]
    ldp x4, x5, [sp, #48]
    ldp x2, x3, [sp, #32]
    ldp x0, x1, [sp, #16]
    ldp x29, x30, [sp], #176
    eret

unexpected:
    mrs x0, esr_el1
    mrs x1, elr_el1
    bl unexpected_exception
    b .
