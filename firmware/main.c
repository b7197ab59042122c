/* SPDX-License-Identifier: MIT */
/*
 * spe_fw main: configuration block, EL0 guest hand-off, SVC ABI, exception
 * dispatch and the exit path (docs/design.md "Firmware (EL1) contract").
 */
#include <stdarg.h>

#include "board.h"
#include "config.h"
#include "exceptions.h"
#include "fw.h"
#include "gic.h"
#include "lib.h"
#include "semihost.h"
#include "spe.h"
#include "sysreg.h"

/* SVC ABI: svc #0, number in x8, arguments in x0.., result in x0 (Linux-like) */
#define SVC_NR_WRITE	64
#define SVC_NR_EXIT	93
#define SVC_FD_STDOUT	1
#define SVC_FD_STDERR	2
#define ERRNO_EBADF	9
#define ERRNO_EFAULT	14
#define ERRNO_ENOSYS	38
#define EXIT_STATUS_MASK	UL(0xff)	/* exit(status): status & 0xff, as on Linux */

#define BANNER_MAX	384

/* defaults: run unchanged under QEMU; the emulator overwrites the block before reset */
struct spe_fw_config spe_fw_config __attribute__((aligned(8), section(".data"))) = {
	.magic = SPE_FW_CONFIG_MAGIC,
	.guest_entry = SPE_FW_DEF_GUEST_ENTRY,
	.pmscr = SPE_FW_DEF_PMSCR,
	.pmsirr = SPE_FW_DEF_PMSIRR,
	.pmsfcr = SPE_FW_DEF_PMSFCR,
	.pmsevfr = SPE_FW_DEF_PMSEVFR,
	.pmslatfr = SPE_FW_DEF_PMSLATFR,
	.buffer_base = SPE_FW_DEF_BUFFER_BASE,
	.buffer_size = SPE_FW_DEF_BUFFER_SIZE,
	.flags = SPE_FW_DEF_FLAGS,
};

struct fw_stats fw_stats;

extern char __stack_top[];	/* fw.ld */

static int64_t console = -1;	/* semihosting handle of ":tt" */
static int linux_process;	/* SPE_FW_FLAG_LINUX: the host answers exec and system calls */

extern uint64_t pt_l1[];	/* start.S: the level-1 table of TTBR0_EL1 */

/* the host changed translation table entries: forget every cached translation */
static void tlb_flush_all(void)
{
	dsb(ishst);
	__asm__ volatile("tlbi vmalle1" : : : "memory");
	dsb(ish);
	isb();
}

/* the LINUX_EXEC block: pt_l1 in, entry and sp out (semihost.h) */
struct linux_exec_block {
	uint64_t pt_l1;
	uint64_t entry;
	uint64_t sp;
};

void fw_exit(uint64_t status, int drain)
{
	static int exiting;

	if (exiting)		/* fault on the exit path itself */
		semihost_exit(status);
	exiting = 1;

	spe_stop_and_drain(drain);
	fw_printf("spe_fw: exit status=%lu pmbirq=%lu bytes=%lu\n", status, fw_stats.pmbirq,
		  fw_stats.trace_bytes);
#ifdef SPE_FW_SELFTEST
	fw_printf("spe_fw: selftest spurious_pmbirq=%lu other_irqs=%lu\n", fw_stats.spurious_pmbirq,
		  fw_stats.other_irqs);
#endif
	spe_close_trace();
	if (console >= 0)
		semihost_close(console);
	semihost_exit(status);
}

void fw_fatal(const char *fmt, ...)
{
	char msg[FW_FATAL_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	fw_vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fw_printf("spe_fw: fatal: %s\n", msg);
	fw_exit(FW_EXIT_FATAL, 0);
}

static int guest_range_ok(uint64_t addr, uint64_t len)
{
	return addr >= GUEST_REGION_BASE && len <= GUEST_REGION_SIZE &&
	       addr - GUEST_REGION_BASE <= GUEST_REGION_SIZE - len;
}

static int64_t sys_write(uint64_t fd, uint64_t buf, uint64_t len)
{
	if (fd != SVC_FD_STDOUT && fd != SVC_FD_STDERR)
		return -ERRNO_EBADF;
	if (len == 0)
		return 0;
	if (!guest_range_ok(buf, len))
		return -ERRNO_EFAULT;
	return (int64_t)(len - semihost_write(console, (const void *)buf, len));
}

static void linux_syscall(struct trap_frame *tf)
{
	uint64_t action = semihost_call(SEMIHOST_SPE_LINUX_SYSCALL, tf);

	if (action & LINUX_ACTION_TLBI)
		tlb_flush_all();
	if (action & LINUX_ACTION_EXIT)
		fw_exit(tf->x[0] & EXIT_STATUS_MASK, 1);
}

static void handle_svc(struct trap_frame *tf)
{
	if (linux_process) {
		linux_syscall(tf);
		return;
	}
	switch (tf->x[8]) {
	case SVC_NR_WRITE:
		tf->x[0] = (uint64_t)sys_write(tf->x[0], tf->x[1], tf->x[2]);
		break;
	case SVC_NR_EXIT:
		fw_exit(tf->x[0] & EXIT_STATUS_MASK, 1);
	default:
		tf->x[0] = (uint64_t)-ERRNO_ENOSYS;
		break;
	}
}

static void __attribute__((noreturn)) guest_exception(const struct trap_frame *tf, uint64_t esr)
{
	uint64_t far = read_sysreg(far_el1);

	fw_printf("spe_fw: guest exception ESR=0x%lx ELR=0x%lx FAR=0x%lx\n", esr, tf->elr, far);
	if (linux_process) {
		/* the host names the signal Linux would send; the process dies of it */
		const uint64_t fault[3] = { esr, far, tf->elr };
		uint64_t sig = semihost_call(SEMIHOST_SPE_LINUX_FAULT, fault);

		fw_exit(LINUX_SIGNAL_EXIT_BASE + (sig & 0x7f), 1);
	}
	fw_exit(FW_EXIT_GUEST_EXCEPTION, 1);
}

void exception_dispatch(struct trap_frame *tf, uint64_t vector)
{
	uint64_t esr = read_sysreg(esr_el1);

	switch (vector) {
	case VEC_LOW64_SYNC:
		if (FIELD_GET(ESR_ELx_EC, esr) == ESR_ELx_EC_SVC64) {
			handle_svc(tf);
			return;
		}
		guest_exception(tf, esr);
	case VEC_LOW64_IRQ:
	case VEC_CUR_SPX_IRQ:
		gic_handle_irq();
		return;
	default:
		if (vector >= VEC_FROM_LOWER_EL)
			guest_exception(tf, esr);
		fw_fatal("firmware exception vector=%lu ESR=0x%lx ELR=0x%lx FAR=0x%lx SPSR=0x%lx",
			 vector, esr, tf->elr, read_sysreg(far_el1), tf->spsr);
	}
}

#ifdef SPE_FW_SELFTEST
/* make INTID 21 pending by software so that QEMU exercises the IRQ path from EL0 */
#define GICR_ISPENDR0	0x0200
static void selftest_pend_pmbirq(void)
{
	dsb(st);
	*(volatile uint32_t *)(GICR_BASE + GICR_SGI_OFFSET + GICR_ISPENDR0) =
		(uint32_t)BIT(PMBIRQ_INTID);
	dsb(st);
}
#endif

void fw_main(void)
{
	struct spe_fw_config cfg = spe_fw_config;
	char banner[BANNER_MAX];

	if (cfg.magic != SPE_FW_CONFIG_MAGIC)
		fw_fatal("invalid config: magic=0x%lx (expected 0x%lx)", cfg.magic,
			 SPE_FW_CONFIG_MAGIC);
	linux_process = (cfg.flags & SPE_FW_FLAG_LINUX) != 0;
	if (!linux_process && !guest_range_ok(cfg.guest_entry, sizeof(uint32_t)))
		fw_fatal("invalid config: guest_entry=0x%lx outside the guest region",
			 cfg.guest_entry);

	console = semihost_open(SEMIHOST_CONSOLE, SEMIHOST_OPEN_W);
	if (console < 0)
		fw_fatal("cannot open the semihosting console %s", SEMIHOST_CONSOLE);

	gic_init();
	spe_init(&cfg);
	spe_describe(banner, sizeof(banner));
	fw_printf("spe_fw: guest_entry=0x%lx %s\n", cfg.guest_entry, banner);

	spe_start();
#ifdef SPE_FW_SELFTEST
	selftest_pend_pmbirq();
#endif
	if (linux_process) {
		struct linux_exec_block exec = { .pt_l1 = (uint64_t)pt_l1 };

		if (semihost_call(SEMIHOST_SPE_LINUX_EXEC, &exec) != 0)
			fw_fatal("the host refused to load the Linux process");
		tlb_flush_all();
		enter_el0(exec.entry, exec.sp, (uint64_t)__stack_top);
	}
	enter_el0(cfg.guest_entry, GUEST_STACK_TOP, (uint64_t)__stack_top);
}
