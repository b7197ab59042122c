/* Exception benchmark for QEMU's virt board: SVC_ROUNDS EL0 SVC -> EL1 -> ERET round trips,
 * then IRQ_ROUNDS software-generated interrupts (SGI 0 to this PE through ICC_SGI1R_EL1), each
 * taken, acknowledged (ICC_IAR1_EL1), ended (ICC_EOIR1_EL1) and returned from. Nothing in it
 * knows spe_emu: it runs unchanged on qemu-system-aarch64 -M virt,gic-version=3 -cpu max. */
#include <stdint.h>

#ifndef SVC_ROUNDS
#define SVC_ROUNDS 1000
#endif
#ifndef IRQ_ROUNDS
#define IRQ_ROUNDS 1000
#endif

#define UART0 0x09000000ul
#define UARTDR 0x000
#define UARTFR 0x018
#define UARTFR_TXFF (1u << 5)
#define GICD 0x08000000ul
#define GICR 0x080A0000ul
#define GICR_SGI (GICR + 0x10000)
#define GICD_CTLR 0x0000
#define GICR_WAKER 0x0014
#define GICR_IGROUPR0 0x0080
#define GICR_ISENABLER0 0x0100
#define GICR_IPRIORITYR 0x0400
#define SGI_INTID 0

volatile uint64_t sgi_count;
void run_el0(uint64_t rounds);

static inline void w32(uintptr_t a, uint32_t v) { *(volatile uint32_t *)a = v; }
static inline uint32_t r32(uintptr_t a) { return *(volatile uint32_t *)a; }
static inline void w8(uintptr_t a, uint8_t v) { *(volatile uint8_t *)a = v; }

#define MSR(reg, v) __asm__ volatile("msr " reg ", %0" : : "r"((uint64_t)(v)))
#define MRS(reg) ({ uint64_t _v; __asm__ volatile("mrs %0, " reg : "=r"(_v)); _v; })

static void puts_uart(const char *s)
{
    for (; *s; s++) {
        while (r32(UART0 + UARTFR) & UARTFR_TXFF)
            ;
        w32(UART0 + UARTDR, (uint8_t)*s);
    }
}

static void put_dec(uint64_t v)
{
    char buf[21];
    int i = 20;
    buf[i] = 0;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    puts_uart(&buf[i]);
}

static void put_hex(uint64_t v)
{
    puts_uart("0x");
    for (int shift = 60; shift >= 0; shift -= 4) {
        char c[2] = {"0123456789abcdef"[(v >> shift) & 0xf], 0};
        puts_uart(c);
    }
}

void unexpected_exception(uint64_t esr, uint64_t elr)
{
    puts_uart("unexpected exception ESR=");
    put_hex(esr);
    puts_uart(" ELR=");
    put_hex(elr);
    puts_uart("\n");
}

int main(void)
{
    run_el0(SVC_ROUNDS);
    puts_uart("svc round trips: ");
    put_dec(SVC_ROUNDS);
    puts_uart("\n");

    /* Distributor: affinity routing, Group 1 enabled (GICD_CTLR.ARE_NS | EnableGrp1NS). */
    w32(GICD + GICD_CTLR, (1u << 4) | (1u << 1));
    w32(GICR + GICR_WAKER, r32(GICR + GICR_WAKER) & ~(1u << 1));
    while (r32(GICR + GICR_WAKER) & (1u << 2))
        ;
    w32(GICR_SGI + GICR_IGROUPR0, r32(GICR_SGI + GICR_IGROUPR0) | (1u << SGI_INTID));
    w8(GICR_SGI + GICR_IPRIORITYR + SGI_INTID, 0x80);
    w32(GICR_SGI + GICR_ISENABLER0, 1u << SGI_INTID);
    MSR("S3_0_C12_C12_5", MRS("S3_0_C12_C12_5") | 1);     /* ICC_SRE_EL1.SRE */
    __asm__ volatile("isb");
    MSR("S3_0_C4_C6_0", 0xff);                            /* ICC_PMR_EL1 */
    MSR("S3_0_C12_C12_7", 1);                             /* ICC_IGRPEN1_EL1 */
    __asm__ volatile("isb; msr daifclr, #2; isb");
    for (uint64_t i = 0; i < IRQ_ROUNDS; i++) {
        /* ICC_SGI1R_EL1: INTID 0, TargetList bit 0 (Aff0 = 0), Aff1..3 = 0 */
        MSR("S3_0_C12_C11_5", (uint64_t)SGI_INTID << 24 | 1);
        __asm__ volatile("isb");
        while (sgi_count <= i)
            ;
    }
    __asm__ volatile("msr daifset, #2; isb");
    puts_uart("interrupts: ");
    put_dec(sgi_count);
    puts_uart("\nbye\n");
    return 0;
}
