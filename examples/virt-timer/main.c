/* A newcomer's bare-metal program for QEMU's virt board: PL011 output, the EL1 virtual timer
 * interrupting through a GICv3, PSCI SYSTEM_OFF at the end (from start.S). Nothing in it knows
 * spe_emu: it runs unchanged on qemu-system-aarch64 -M virt,gic-version=3 -cpu max. */
#include <stdint.h>

#ifndef TICKS
#define TICKS 10            /* timer interrupts to take */
#endif
#ifndef PERIOD_US
#define PERIOD_US 1000      /* timer period, microseconds of counter time */
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
#define CNTV_INTID 27

static inline void w32(uintptr_t a, uint32_t v) { *(volatile uint32_t *)a = v; }
static inline uint32_t r32(uintptr_t a) { return *(volatile uint32_t *)a; }
static inline void w8(uintptr_t a, uint8_t v) { *(volatile uint8_t *)a = v; }

#define MSR(reg, v) __asm__ volatile("msr " reg ", %0" : : "r"((uint64_t)(v)))
#define MRS(reg) ({ uint64_t _v; __asm__ volatile("mrs %0, " reg : "=r"(_v)); _v; })

static void putc_uart(char c)
{
    while (r32(UART0 + UARTFR) & UARTFR_TXFF)
        ;
    w32(UART0 + UARTDR, (uint8_t)c);
}

static void puts_uart(const char *s)
{
    while (*s)
        putc_uart(*s++);
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
    for (int shift = 60; shift >= 0; shift -= 4)
        putc_uart("0123456789abcdef"[(v >> shift) & 0xf]);
}

static volatile uint64_t ticks;
static uint64_t period;

void irq_handler(void)
{
    uint64_t intid = MRS("S3_0_C12_C12_0") & 0xffffff;   /* ICC_IAR1_EL1 */
    if (intid == CNTV_INTID) {
        ticks++;
        MSR("cntv_tval_el0", period);
    }
    if (intid < 1020)
        MSR("S3_0_C12_C12_1", intid);                     /* ICC_EOIR1_EL1 */
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
    puts_uart("hello from a virt board\n");
    /* Distributor: affinity routing, Group 1 enabled (GICD_CTLR.ARE_NS | EnableGrp1NS). */
    w32(GICD + GICD_CTLR, (1u << 4) | (1u << 1));
    /* Wake the redistributor (GICR_WAKER.ProcessorSleep = 0; wait for ChildrenAsleep = 0). */
    w32(GICR + GICR_WAKER, r32(GICR + GICR_WAKER) & ~(1u << 1));
    while (r32(GICR + GICR_WAKER) & (1u << 2))
        ;
    /* The virtual timer's PPI: Group 1, priority 0x80, enabled. */
    w32(GICR_SGI + GICR_IGROUPR0, r32(GICR_SGI + GICR_IGROUPR0) | (1u << CNTV_INTID));
    w8(GICR_SGI + GICR_IPRIORITYR + CNTV_INTID, 0x80);
    w32(GICR_SGI + GICR_ISENABLER0, 1u << CNTV_INTID);
    /* CPU interface: system registers, priority mask open, Group 1 enabled. */
    MSR("S3_0_C12_C12_5", MRS("S3_0_C12_C12_5") | 1);     /* ICC_SRE_EL1.SRE */
    __asm__ volatile("isb");
    MSR("S3_0_C4_C6_0", 0xff);                            /* ICC_PMR_EL1 */
    MSR("S3_0_C12_C12_7", 1);                             /* ICC_IGRPEN1_EL1 */
    __asm__ volatile("isb");

    uint64_t freq = MRS("cntfrq_el0");
    period = freq / 1000000 * PERIOD_US;
    uint64_t start = MRS("cntvct_el0");
    MSR("cntv_tval_el0", period);
    MSR("cntv_ctl_el0", 1);                               /* ENABLE, IMASK = 0 */
    __asm__ volatile("msr daifclr, #2; isb");
#ifdef BUSY_WAIT
    while (ticks < TICKS)
        ;                   /* spin: each interrupt arrives in running code, not in a WFI */
#else
    while (ticks < TICKS)
        __asm__ volatile("wfi");
#endif
    __asm__ volatile("msr daifset, #2; isb");
    MSR("cntv_ctl_el0", 0);
    uint64_t elapsed = MRS("cntvct_el0") - start;

    puts_uart("timer interrupts: ");
    put_dec(ticks);
    puts_uart("\n");
    /* At least TICKS periods passed (the counter ran on while the PE waited). */
    puts_uart(elapsed >= (uint64_t)TICKS * period ? "elapsed: ok\n" : "elapsed: short\n");
    puts_uart("bye\n");
    return 0;
}
