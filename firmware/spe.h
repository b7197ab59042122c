/* SPDX-License-Identifier: MIT */
/* Driver for the Statistical Profiling Extension (Linux arm_spe_pmu order). */
#ifndef SPE_FW_SPE_H
#define SPE_FW_SPE_H

#include <stdint.h>

#include "config.h"

/*
 * Validate cfg, probe the SPE and open spe.trace. Prints why profiling is off
 * if it is. Returns 1 if spe_start() may be called.
 */
int spe_init(const struct spe_fw_config *cfg);
/* one-line description of the SPE settings, for the banner */
void spe_describe(char *buf, uint64_t size);
/* program buffer and sampling controls, enable profiling last */
void spe_start(void);
/* PMBIRQ handler (GIC INTID 21) */
void spe_handle_pmbirq(void);
/*
 * Disable profiling and the buffer; with hand_over, service a pending
 * buffer management event first and append the rest of the buffer to the trace.
 */
void spe_stop_and_drain(int hand_over);
void spe_close_trace(void);

#endif /* SPE_FW_SPE_H */
