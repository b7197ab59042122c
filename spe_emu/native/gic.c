/*
 * The GICv3 model's prioritisation and CPU-interface actions (IHI 0069 chapter 4), in C so
 * that the Python model (spe_emu.devices.gicv3.GicV3, which keeps its interrupts' state in a
 * struct spe_gic and calls these functions) and the native INTR hook's path for
 * ICC_IAR1_EL1, ICC_EOIR1_EL1 and ICC_SGI1R_EL1 (exception.c) share one implementation.
 * See the Python module's docstring for the model (one PE, DS == 1, 5 priority bits).
 */
#include "spe_native.h"

const uint64_t spe_gic_size = sizeof(struct spe_gic);

static int pending(const struct spe_gic *g, const struct spe_gic_irq *irq)
{
    /* level-sensitive: pending while the input is high or the latch is set; edge: the latch */
    return irq->latch || (irq->level && !(irq->config >> g->edge_bit & 1));
}

/* Highest-priority pending interrupt the redistributor forwards (§4.8): pending, enabled,
 * not active, its group enabled in GICD_CTLR, an SPI routed to this PE; lowest INTID first
 * among equal priorities. 1 and (priority, INTID, group), or 0 (none, or asleep). */
int spe_gic_hppi(const struct spe_gic *g, uint32_t *prio, uint32_t *intid, uint32_t *group)
{
    if (!g->awake)
        return 0;
    int found = 0;
    uint32_t best = 0x100;
    for (uint32_t i = 0; i < g->num_intids; i++) {
        const struct spe_gic_irq *irq = &g->irqs[i];
        if (!irq->enabled || irq->active || !pending(g, irq))
            continue;
        if (!(g->grp_enabled >> (irq->group & 1) & 1))
            continue;
        if (i >= 32 && !g->routed[i])
            continue;
        if (irq->priority < best) {
            best = irq->priority;
            *prio = irq->priority;
            *intid = i;
            *group = irq->group & 1;
            found = 1;
        }
    }
    return found;
}

/* GroupBits(): the group-priority bits of a priority value. Group 1 uses BPR1 (field
 * [7:BPR1]) unless ICC_CTLR_EL1.CBPR, then BPR0 (field [7:BPR0+1]). */
uint32_t spe_gic_group_mask(const struct spe_gic *g, uint32_t group)
{
    unsigned shift = group == 1 && !(g->icc_ctlr >> g->cbpr_bit & 1)
                     ? (unsigned)g->icc_bpr1 : (unsigned)g->icc_bpr0 + 1;
    return (0xFFu << shift) & 0xFF;
}

/* The running priority: that of the highest active priority bit of the AP registers, or
 * 0xFF (idle). */
uint32_t spe_gic_running_priority(const struct spe_gic *g)
{
    uint64_t aprs = (g->icc_ap0r0 | g->icc_ap1r0) & 0xFFFFFFFFull;
    if (!aprs)
        return 0xFF;
    return (uint32_t)__builtin_ctzll(aprs) << (8 - g->pri_bits);
}

/* The CPU interface signals an interrupt of `prio` and `group` when its group is enabled
 * (ICC_IGRPENn_EL1), its priority is below ICC_PMR_EL1 and its group priority beats the
 * running priority. */
int spe_gic_can_signal(const struct spe_gic *g, uint32_t prio, uint32_t group)
{
    uint64_t en = group ? g->icc_igrpen1 : g->icc_igrpen0;
    if (!(en >> g->enable_bit & 1) || prio >= g->icc_pmr)
        return 0;
    uint32_t running = spe_gic_running_priority(g);
    if (running == 0xFF)
        return 1;
    uint32_t mask = spe_gic_group_mask(g, group);
    return (prio & mask) < (running & mask);
}

/* The outputs to the PE: bit 0 IRQ (a Group 1 interrupt can be signalled), bit 1 FIQ (Group
 * 0; with DS == 1 every Group 0 interrupt is an FIQ, §4.6.2). */
uint32_t spe_gic_lines(const struct spe_gic *g)
{
    uint32_t prio, intid, group;
    if (!spe_gic_hppi(g, &prio, &intid, &group) || !spe_gic_can_signal(g, prio, group))
        return 0;
    return group ? 1 : 2;
}

/* ICC_IAR<group>_EL1: acknowledge the highest-priority pending interrupt of `group` if it can
 * be signalled: it becomes active, its pending latch clears (a level interrupt stays pending
 * while its input is high) and its group priority is recorded in the AP register (raising
 * the running priority). Its INTID, or 1023 with no side effect. */
uint32_t spe_gic_acknowledge(struct spe_gic *g, uint32_t group)
{
    uint32_t prio, intid, hgroup;
    if (!spe_gic_hppi(g, &prio, &intid, &hgroup) || hgroup != group
            || !spe_gic_can_signal(g, prio, hgroup))
        return SPE_GIC_SPURIOUS;
    struct spe_gic_irq *irq = &g->irqs[intid];
    irq->active = 1;
    irq->latch = 0;
    uint32_t bit = (prio & spe_gic_group_mask(g, group)) >> (8 - g->pri_bits);
    if (group)
        g->icc_ap1r0 |= 1ull << bit;
    else
        g->icc_ap0r0 |= 1ull << bit;
    return intid;
}

/* ICC_EOIR<group>_EL1 = intid: priority drop (clear the highest active priority bit of this
 * group), then deactivate the INTID unless ICC_CTLR_EL1.EOImode == 1. Returns SPE_EOI_* bits
 * (0: clean); with commit == 0 nothing changes (what it would do). Special INTIDs and
 * mismatches change nothing (UNPREDICTABLE in the architecture; Python logs them). */
uint32_t spe_gic_eoi(struct spe_gic *g, uint32_t group, uint32_t intid, int commit)
{
    if (intid >= g->num_intids)
        return intid >= 1020 && intid <= 1023 ? SPE_EOI_SPECIAL : SPE_EOI_NO_SUCH;
    uint64_t ap0 = g->icc_ap0r0 & 0xFFFFFFFFull, ap1 = g->icc_ap1r0 & 0xFFFFFFFFull;
    if (!(ap0 | ap1))
        return SPE_EOI_NO_ACTIVE;
    unsigned low0 = ap0 ? (unsigned)__builtin_ctzll(ap0) : 64;
    unsigned low1 = ap1 ? (unsigned)__builtin_ctzll(ap1) : 64;
    uint32_t active_group = low0 <= low1 ? 0 : 1;
    if (active_group != group)
        return SPE_EOI_WRONG_GROUP;
    int deactivate = !(g->icc_ctlr >> g->eoimode_bit & 1);
    uint32_t out = deactivate && !g->irqs[intid].active ? SPE_EOI_NOT_ACTIVE : 0;
    if (commit) {
        uint64_t *ap = group ? &g->icc_ap1r0 : &g->icc_ap0r0;
        *ap &= *ap - 1;
        if (deactivate)
            g->irqs[intid].active = 0;
    }
    return out;
}
