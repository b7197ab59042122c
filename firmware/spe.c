/* SPDX-License-Identifier: MIT */
/*
 * Statistical Profiling Extension driver, following the Linux arm_spe_pmu
 * driver's order of operations (shared/notes/linux-spe-contract.md):
 *
 *  probe:  ID_AA64DFR0_EL1.PMSVer != 0; PMBIDR_EL1.P == 0 and Align <= 2 KiB;
 *          PMSIDR_EL1.MaxSize in [16 B, 2 KiB]
 *  start:  PMBPTR_EL1, PMBLIMITR_EL1 | E; PMSFCR_EL1, PMSEVFR_EL1,
 *          (PMSNEVFR_EL1 if FnE), PMSLATFR_EL1; PMSIRR_EL1, ISB, PMSICR_EL1;
 *          ISB, PMSCR_EL1 last
 *  PMBIRQ: PSB CSYNC, DSB NSH, ISB, read PMBSR_EL1; S == 0: spurious;
 *          EC must be "other buffer management event" and BSC "buffer
 *          filled", else fatal; hand over [base, PMBPTR_EL1); new region
 *          (PMBPTR_EL1 = base), ISB, PMBSR_EL1 = 0 last
 *  stop:   PMSCR_EL1 = 0, ISB, PSB CSYNC, DSB NSH, PMBLIMITR_EL1 = 0, ISB;
 *          pending event serviced as the IRQ would; hand over [base, PMBPTR_EL1)
 *
 * The Profiling Buffer is the identity-mapped [buffer_base, buffer_base +
 * buffer_size) of the firmware-private region; its contents go to the host
 * file spe.trace with semihosting SYS_WRITE.
 */
#include "spe.h"

#include "board.h"
#include "fw.h"
#include "lib.h"
#include "semihost.h"
#include "sysreg.h"

#define SPE_TRACE_FILE		"spe.trace"
#define SPE_DEFAULT_MIN_INTERVAL	4096	/* for unknown PMSIDR_EL1.Interval encodings */

struct spe_state {
	int usable;		/* probe passed, config valid */
	int active;		/* started and not yet stopped */
	uint64_t pmsver;
	uint64_t pmbidr;
	uint64_t pmsidr;
	uint64_t pmscr, pmsirr, pmsfcr, pmsevfr, pmslatfr;
	uint64_t base;		/* buffer start */
	uint64_t limit;		/* buffer end (exclusive) */
	int64_t trace;		/* semihosting handle of spe.trace, or -1 */
};

static struct spe_state spe = { .trace = -1 };

/* PMSIDR_EL1.Interval -> recommended minimum interval */
static uint64_t spe_min_interval(uint64_t pmsidr)
{
	static const uint16_t intervals[] = {
		[0] = 256, [2] = 512, [3] = 768, [4] = 1024,
		[5] = 1536, [6] = 2048, [7] = 3072, [8] = 4096,
	};
	uint64_t enc = FIELD_GET(PMSIDR_EL1_INTERVAL, pmsidr);

	if (enc < ARRAY_SIZE(intervals) && intervals[enc] != 0)
		return intervals[enc];
	return SPE_DEFAULT_MIN_INTERVAL;
}

static void spe_check_buffer_config(const struct spe_fw_config *cfg)
{
	uint64_t base = cfg->buffer_base, size = cfg->buffer_size;

	if (size == 0 || size % PAGE_SIZE != 0 || size > SPE_BUF_REGION_SIZE)
		fw_fatal("invalid config: buffer_size=0x%lx (multiple of 0x%lx, at most 0x%lx)",
			 size, PAGE_SIZE, SPE_BUF_REGION_SIZE);
	if (base % PAGE_SIZE != 0 || base < SPE_BUF_REGION_BASE ||
	    base - SPE_BUF_REGION_BASE > SPE_BUF_REGION_SIZE - size)
		fw_fatal("invalid config: buffer 0x%lx+0x%lx outside [0x%lx, 0x%lx) or not page aligned",
			 base, size, SPE_BUF_REGION_BASE, SPE_BUF_REGION_BASE + SPE_BUF_REGION_SIZE);
}

/* returns 1 if the hardware can be driven, printing why not otherwise */
static int spe_probe(void)
{
	uint64_t align, maxsize;

	spe.pmsver = FIELD_GET(ID_AA64DFR0_EL1_PMSVER, read_sysreg(id_aa64dfr0_el1));
	if (spe.pmsver == ID_AA64DFR0_EL1_PMSVER_NI) {
		fw_printf("spe_fw: SPE not implemented\n");
		return 0;
	}

	spe.pmbidr = read_sysreg_s(SYS_PMBIDR_EL1);
	if (spe.pmbidr & PMBIDR_EL1_P) {
		fw_printf("spe_fw: SPE unusable: Profiling Buffer owned by a higher Exception level"
			  " (PMBIDR_EL1=0x%lx)\n", spe.pmbidr);
		return 0;
	}
	align = FIELD_GET(PMBIDR_EL1_ALIGN, spe.pmbidr);
	if (align > PMBIDR_EL1_ALIGN_MAX) {
		fw_printf("spe_fw: SPE unusable: unsupported buffer alignment (PMBIDR_EL1=0x%lx)\n",
			  spe.pmbidr);
		return 0;
	}

	spe.pmsidr = read_sysreg_s(SYS_PMSIDR_EL1);
	maxsize = FIELD_GET(PMSIDR_EL1_MAXSIZE, spe.pmsidr);
	if (maxsize < PMSIDR_EL1_MAXSIZE_MIN || maxsize > PMSIDR_EL1_MAXSIZE_MAX) {
		fw_printf("spe_fw: SPE unusable: unsupported record size (PMSIDR_EL1=0x%lx)\n",
			  spe.pmsidr);
		return 0;
	}
	return 1;
}

int spe_init(const struct spe_fw_config *cfg)
{
	int hw_ok = 0;

	if (!(cfg->flags & SPE_FW_FLAG_SPE_ENABLE)) {
		fw_printf("spe_fw: SPE disabled by config (flags=0x%lx)\n", cfg->flags);
	} else {
		spe_check_buffer_config(cfg);
		hw_ok = spe_probe();
	}

	spe.base = cfg->buffer_base;
	spe.limit = cfg->buffer_base + cfg->buffer_size;
	spe.pmscr = cfg->pmscr;
	spe.pmsirr = cfg->pmsirr;
	spe.pmsfcr = cfg->pmsfcr;
	spe.pmsevfr = cfg->pmsevfr;
	spe.pmslatfr = cfg->pmslatfr;

	spe.trace = semihost_open(SPE_TRACE_FILE, SEMIHOST_OPEN_WB);
	if (spe.trace < 0 && hw_ok)
		fw_fatal("cannot open %s", SPE_TRACE_FILE);

	spe.usable = hw_ok;
	return spe.usable;
}

void spe_describe(char *buf, uint64_t size)
{
	if (!spe.usable) {
		fw_snprintf(buf, size, "spe=off");
		return;
	}
	fw_snprintf(buf, size,
		    "spe=on pmsver=%lu pmscr=0x%lx pmsirr=0x%lx (interval %lu%s) pmsfcr=0x%lx"
		    " pmsevfr=0x%lx pmslatfr=0x%lx buffer=0x%lx+0x%lx"
		    " pmbidr=0x%lx pmsidr=0x%lx (align %lu B, max record %lu B, min interval %lu)",
		    spe.pmsver, spe.pmscr, spe.pmsirr,
		    spe.pmsirr & PMSIRR_EL1_INTERVAL,	/* INTERVAL holds bits [31:8] */
		    (spe.pmsirr & PMSIRR_EL1_RND) ? " random" : "",
		    spe.pmsfcr, spe.pmsevfr, spe.pmslatfr, spe.base, spe.limit - spe.base,
		    spe.pmbidr, spe.pmsidr,
		    UL(1) << FIELD_GET(PMBIDR_EL1_ALIGN, spe.pmbidr),
		    UL(1) << FIELD_GET(PMSIDR_EL1_MAXSIZE, spe.pmsidr),
		    spe_min_interval(spe.pmsidr));
}

void spe_start(void)
{
	if (!spe.usable)
		return;

	/* 1. the buffer: write pointer, then limit with E */
	write_sysreg_s(SYS_PMBPTR_EL1, spe.base);
	write_sysreg_s(SYS_PMBLIMITR_EL1, (spe.limit & PMBLIMITR_EL1_LIMIT) |
			FIELD_PREP(PMBLIMITR_EL1_FM, PMBLIMITR_EL1_FM_FILL) | PMBLIMITR_EL1_E);

	/* 2. filters */
	write_sysreg_s(SYS_PMSFCR_EL1, spe.pmsfcr);
	write_sysreg_s(SYS_PMSEVFR_EL1, spe.pmsevfr);
	if (spe.pmsidr & PMSIDR_EL1_FNE)
		write_sysreg_s(SYS_PMSNEVFR_EL1, 0);
	write_sysreg_s(SYS_PMSLATFR_EL1, spe.pmslatfr);

	/* 3. interval: reload value, then a fresh counter */
	write_sysreg_s(SYS_PMSIRR_EL1, spe.pmsirr);
	isb();
	write_sysreg_s(SYS_PMSICR_EL1, 0);

	/* 4. enable last */
	spe.active = 1;
	isb();
	write_sysreg_s(SYS_PMSCR_EL1, spe.pmscr);
}

/* append [base, end) of the buffer to spe.trace */
static void spe_hand_over(uint64_t end)
{
	uint64_t len;

	if (end < spe.base || end > spe.limit)
		fw_fatal("PMBPTR_EL1=0x%lx outside the buffer [0x%lx, 0x%lx)", end, spe.base,
			 spe.limit);
	len = end - spe.base;
	if (len == 0)
		return;
	if (semihost_write(spe.trace, (const void *)spe.base, len) != 0)
		fw_fatal("short write to %s", SPE_TRACE_FILE);
	fw_stats.trace_bytes += len;
}

/* service a Profiling Buffer management event; 0 if there was none (spurious) */
static int spe_service_buffer_event(void)
{
	uint64_t pmbsr, ec;

	psb_csync();
	dsb(nsh);
	isb();
	pmbsr = read_sysreg_s(SYS_PMBSR_EL1);
	if (!(pmbsr & PMBSR_EL1_S))
		return 0;

	ec = FIELD_GET(PMBSR_EL1_EC, pmbsr);
	if (ec == PMBSR_EL1_EC_FAULT_S1 || ec == PMBSR_EL1_EC_FAULT_S2)
		fw_fatal("buffer fault PMBSR_EL1=0x%lx (EC=0x%lx FSC=0x%lx) PMBPTR_EL1=0x%lx",
			 pmbsr, ec, FIELD_GET(PMBSR_EL1_FAULT_FSC, pmbsr),
			 read_sysreg_s(SYS_PMBPTR_EL1));
	if (ec != PMBSR_EL1_EC_BUF)
		fw_fatal("unknown buffer management event PMBSR_EL1=0x%lx (EC=0x%lx)", pmbsr, ec);
	if (FIELD_GET(PMBSR_EL1_BUF_BSC, pmbsr) != PMBSR_EL1_BUF_BSC_FULL)
		fw_fatal("buffer management event PMBSR_EL1=0x%lx (BSC=0x%lx, not buffer filled)",
			 pmbsr, FIELD_GET(PMBSR_EL1_BUF_BSC, pmbsr));

	spe_hand_over(read_sysreg_s(SYS_PMBPTR_EL1));

	/* new region: the whole buffer again (PMBLIMITR_EL1 unchanged) */
	write_sysreg_s(SYS_PMBPTR_EL1, spe.base);
	isb();
	/* resume profiling */
	write_sysreg_s(SYS_PMBSR_EL1, 0);
	fw_stats.pmbirq++;
	return 1;
}

void spe_handle_pmbirq(void)
{
	/* without an active session there are no SPE registers to look at (maybe none at all) */
	if (!spe.active || !spe_service_buffer_event())
		fw_stats.spurious_pmbirq++;
}

void spe_stop_and_drain(int hand_over)
{
	if (!spe.active)
		return;
	spe.active = 0;

	write_sysreg_s(SYS_PMSCR_EL1, 0);
	isb();
	psb_csync();
	dsb(nsh);
	write_sysreg_s(SYS_PMBLIMITR_EL1, 0);
	isb();
	if (!hand_over)
		return;

	if (read_sysreg_s(SYS_PMBSR_EL1) & PMBSR_EL1_S)
		spe_service_buffer_event();
	spe_hand_over(read_sysreg_s(SYS_PMBPTR_EL1));
}

void spe_close_trace(void)
{
	if (spe.trace >= 0) {
		semihost_close(spe.trace);
		spe.trace = -1;
	}
}
