// Entry and exception vectors of the exception benchmark (QEMU virt board, EL1, MMU off).
// EL0 code calls SVC #0 in a loop (each one an EL0 -> EL1 -> ERET round trip) and SVC #1
// when done; EL1 takes SGIs through the GICv3 CPU interface (acknowledge, end, return).
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
    ventry svc_entry        // lower EL, AArch64: synchronous
    .rept 7
    ventry unexpected
    .endr

// EL0's SVC: #0 returns at once; #1 ends the EL0 phase (back into run_el0's caller).
svc_entry:
    mrs x9, esr_el1
    and x9, x9, #0xffff
    cbnz x9, 1f
    eret
1:  ldp x29, x30, [sp], #16     // the frame run_el0 pushed
    ret

// run_el0(rounds): runs el0_loop at EL0 (SP_EL0 = the EL0 stack) with x0 = rounds.
    .global run_el0
run_el0:
    stp x29, x30, [sp, #-16]!
    ldr x1, =__el0_stack_top
    msr sp_el0, x1
    adr x1, el0_loop
    msr elr_el1, x1
    msr spsr_el1, xzr           // EL0t, DAIF clear
    eret
el0_loop:
    cbz x0, 2f
1:  svc #0
    subs x0, x0, #1
    b.ne 1b
2:  svc #1
    b .

irq_entry:
    mrs x9, S3_0_C12_C12_0      // ICC_IAR1_EL1
    ldr x10, =sgi_count
    ldr x11, [x10]
    add x11, x11, #1
    str x11, [x10]
    msr S3_0_C12_C12_1, x9      // ICC_EOIR1_EL1
    eret

unexpected:
    mrs x0, esr_el1
    mrs x1, elr_el1
    bl unexpected_exception
    b .
