/*
 * Native exception entry for the spe_emu run loop.
 *
 * Unicorn never takes an architectural exception itself: every exception QEMU raises reaches
 * the UC_HOOK_INTR callbacks with ESR_ELx, ELR_ELx, SPSR_ELx, PSTATE and the vector untouched
 * (shared/notes/unicorn-aarch64-facts.md). spe_take_exception() performs the entry
 * (AArch64.TakeException(), Arm ARM D1.10) for both the Python run loop
 * (spe_emu.cpu.exceptions.take_exception calls it) and spe_intr_hook() below, so the rule is
 * written once.
 *
 * spe_intr_hook() is the INTR hook of the fast run loop. QEMU has already computed the
 * syndrome, the fault address and the target Exception level of a synchronous exception, with
 * all its trap controls, into CPUARMState.exception (spe_emu.cpu.qemu_state); the hook reads
 * them back from a saved context and takes the exception without a Python call, unless
 * something of Python's is involved: profiling enabled at the current or the target EL (the
 * population and the records must see the exception), a pending capture, an UNDEF that may be
 * a register or semihosting call spe_emu emulates, an abort SyncChecks.refine_abort would
 * change (spe_abort_stands(): a Translation fault whose walk really ends with an Address size
 * fault or External abort QEMU does not report, a possible FEAT_E0PD fault, a walk through
 * stage 2), the PSCI conduit, a syndrome QEMU left zero, an exception loop, or an exception
 * number not known to be synchronous. Those go to
 * `fallback` (Machine._on_intr), which does exactly what it did before this hook existed.
 */
#include <string.h>

#include "spe_native.h"

const uint64_t spe_exc_model_size = sizeof(struct spe_exc_model);
const uint64_t spe_intr_size = sizeof(struct spe_intr);
const uint64_t spe_control_size = sizeof(struct spe_control);
const uint64_t spe_walk_size = sizeof(struct spe_walk);

static uint64_t cp_read(void *uc, const struct spe_exc_model *m, const uint32_t *enc)
{
    struct uc_arm64_cp cp = {enc[2], enc[3], enc[0], enc[1], enc[4], 0};
    m->reg_read(uc, m->cp_id, &cp);
    return cp.val;
}

static void cp_write(void *uc, const struct spe_exc_model *m, const uint32_t *enc,
                     uint64_t value)
{
    struct uc_arm64_cp cp = {enc[2], enc[3], enc[0], enc[1], enc[4], value};
    m->reg_write(uc, m->cp_id, &cp);
}

static uint64_t reg_read(void *uc, const struct spe_exc_model *m, int id)
{
    uint64_t value = 0;   /* (32-bit registers fill only the low half) */
    m->reg_read(uc, id, &value);
    return value;
}

static void reg_write(void *uc, const struct spe_exc_model *m, int id, uint64_t value)
{
    m->reg_write(uc, id, &value);
}

/* Which SP_ELn the live SP is in PSTATE `pstate`: SP_EL0 when PSTATE.SP == 0, else SP_EL<EL>. */
static uint32_t sp_bank(const struct spe_exc_model *m, uint64_t pstate)
{
    return (pstate >> m->sp_bit & 1) ? (uint32_t)(pstate >> m->el_lsb) & m->el_mask : 0;
}

/* Switches PSTATE from `old` to `new` (possibly changing EL and SP selection) as QEMU's own
 * exception code does: the live SP is saved into its bank, PSTATE written, SP loaded from the
 * new bank, and the CP register `sync_enc` written with `sync_value`, which makes QEMU rebuild
 * its cached hflags so translated code sees the new EL. */
static void set_pstate(const struct spe_exc_model *m, void *uc, uint64_t old, uint64_t new,
                       const uint32_t *sync_enc, uint64_t sync_value)
{
    uint32_t old_bank = sp_bank(m, old), new_bank = sp_bank(m, new);
    uint64_t sp = reg_read(uc, m, m->sp_id);
    reg_write(uc, m, m->sp_el[old_bank], sp);
    uint64_t new_sp = old_bank == new_bank ? sp : reg_read(uc, m, m->sp_el[new_bank]);
    reg_write(uc, m, m->pstate_id, new);
    reg_write(uc, m, m->sp_id, new_sp);
    cp_write(uc, m, sync_enc, sync_value);
}

/* set_pstate() from the current PSTATE, re-writing `sync_enc` with its own value. */
void spe_set_pstate(const struct spe_exc_model *m, void *uc, uint64_t new,
                    const uint32_t *sync_enc)
{
    set_pstate(m, uc, reg_read(uc, m, m->pstate_id), new, sync_enc, cp_read(uc, m, sync_enc));
}

/* AArch64.TakeException() to `target` (1-3) at vector offset `kind` (0x000 synchronous, 0x080
 * IRQ, 0x100 FIQ, 0x180 SError): FAR_ELx = far (flags & SPE_EXC_FAR), ESR_ELx = syndrome (flags
 * & SPE_EXC_SYNDROME), SPSR_ELx = PSTATE, ELR_ELx = preferred; PSTATE.{EL, SP} = {target, 1},
 * D, A, I, F set, SS, IL, BTYPE, UAO cleared, PAN set where FEAT_PAN says (entry to EL1, or to
 * EL2 in a host: HCR_EL2.{E2H, TGE} = {1, 1}, with SCTLR_ELx.SPAN == 0); PC = VBAR_ELx + the
 * offset of D1.10.2 (+0x000 current EL with SP_EL0, +0x200 with SP_ELx, +0x400 lower EL). The
 * live SP is saved to its bank and the new one loaded (QEMU keeps SP_ELn apart from the live
 * SP), and the SPSR_ELx write, a CP-register write, rebuilds QEMU's hflags so translated code
 * sees the new EL. */
void spe_take_exception(const struct spe_exc_model *m, void *uc, uint32_t target,
                        uint32_t kind, uint64_t preferred, uint64_t syndrome, uint64_t far,
                        uint32_t flags, struct spe_exc_entry *out)
{
    uint64_t old = reg_read(uc, m, m->pstate_id);
    uint32_t from = (uint32_t)(old >> m->el_lsb) & m->el_mask;
    uint64_t offset = kind + (target > from ? 0x400 : (old >> m->sp_bit & 1) ? 0x200 : 0);
    uint64_t vector = reg_read(uc, m, m->vbar[target]) + offset;

    if (flags & SPE_EXC_FAR)
        reg_write(uc, m, m->far[target], far);
    if (flags & SPE_EXC_SYNDROME)
        reg_write(uc, m, m->esr[target], syndrome);
    reg_write(uc, m, m->elr[target], preferred);

    uint64_t new = (old | m->entry_set) & ~m->entry_clear;
    new = (new & ~((uint64_t)m->el_mask << m->el_lsb)) | (uint64_t)target << m->el_lsb;
    new |= 1ull << m->sp_bit;
    int in_host = 0;
    if (target == 2) {
        uint64_t hcr = cp_read(uc, m, m->hcr_enc);
        in_host = (hcr >> m->e2h_bit & 1) && (hcr >> m->tge_bit & 1);
    }
    if ((target == 1 || in_host) && !(cp_read(uc, m, m->sctlr_enc[target]) >> m->span_bit & 1))
        new |= 1ull << m->pan_bit;

    set_pstate(m, uc, old, new, m->spsr_enc[target], old);   /* (SPSR_ELx = old PSTATE) */
    reg_write(uc, m, m->pc_id, vector);
    if (out) {
        out->from_el = from;
        out->spsr = old;
        out->vector = vector;
    }
}

/* The exception-loop guard (Machine._take_sync and spe_intr_hook): a synchronous exception
 * raised by the instruction that ends `retired` instructions. It is "in place" when no
 * instruction completed since the previous entry: none retired (an abort fetching the vector)
 * or only the one raising it (the vector's first instruction: UNDEFINED, an SVC to the same
 * vector, a trapped access), so the handler never ran a single instruction. 1, with nothing
 * counted, when it would be the loop_limit-th in place in a row (a guest error: the vector
 * table is not mapped or not code); otherwise counts it and returns 0. */
int spe_exception_guard(struct spe_intr *h, uint64_t retired)
{
    if (retired < h->entry_retired || retired - h->entry_retired > 1) {
        h->entry_retired = retired;   /* (also the first entry: entry_retired is NEVER) */
        h->entries_in_place = 0;
        return 0;
    }
    if (h->entries_in_place + 1 >= h->loop_limit)
        return 1;
    h->entry_retired = retired;
    h->entries_in_place++;
    return 0;
}

/* struct { u32 syndrome; u32 fsr; u64 vaddress; u32 target_el; } of CPUARMState */
struct qemu_exception {
    uint32_t syndrome, fsr;
    uint64_t vaddress;
    uint32_t target_el;
};

/* The instruction word at pc in the current regime; 0 when it cannot be read. */
static int fetch_word(void *uc, const struct spe_intr *h, uint64_t pc, uint32_t *word)
{
    uint64_t pa;
    return h->vmem_translate(uc, pc, 4 /* UC_PROT_EXEC */, &pa) == 0
           && h->mem_read(uc, pa, word, 4) == 0;
}

/* Whether an UNDEF of `word` may be an instruction spe_emu emulates. */
static int python_undef(const struct spe_intr *h, uint32_t word)
{
    for (int i = 0; i < 2; i++)
        if ((word & h->python_undef_mask[i]) == h->python_undef_value[i])
            return 1;
    return 0;
}

int spe_unmasked(uint32_t target, uint32_t el, uint64_t pstate, uint32_t mask_bit)
{
    /* Never taken when routed below the current EL; masked by the PSTATE bit when routed to
     * the current EL, and when routed to EL1 from EL0 (an interrupt routed to a higher EL is
     * not masked by PSTATE, except one to EL1: Arm ARM D1.3.6, the physical interrupt
     * masking table for AArch64). */
    return target >= el && ((target > el && target != 1) || !(pstate >> mask_bit & 1));
}

uint32_t spe_deliverable(uint32_t lines, uint32_t irq_target, uint32_t fiq_target,
                         uint32_t el, uint64_t pstate, uint32_t i_bit, uint32_t f_bit,
                         uint32_t *kind)
{
    if ((lines & 2) && spe_unmasked(fiq_target, el, pstate, f_bit)) {   /* FIQ first */
        *kind = SPE_VECTOR_FIQ;
        return fiq_target;
    }
    if ((lines & 1) && spe_unmasked(irq_target, el, pstate, i_bit)) {
        *kind = SPE_VECTOR_IRQ;
        return irq_target;
    }
    return 0;
}

/* After the native path changed the GIC's state (the instruction at pc, now retired): when
 * the GIC asserts an output, the control hooks must call Python again, and the interrupt is
 * taken at once (preferred return: the next instruction) if it is deliverable to an EL where
 * profiling is disabled; otherwise the run stops at the next block for Python to plan it. */
static void gic_changed(void *uc, struct spe_intr *h, struct spe_counter *c, uint32_t el,
                        uint64_t pstate, uint64_t next_pc)
{
    uint32_t lines = spe_gic_lines(h->gic);
    h->gic->dirty = 1;
    h->control->irq = lines != 0;
    if (!lines)
        return;
    uint32_t kind = 0;
    uint32_t target = spe_deliverable(lines, h->irq_target, h->fiq_target, el, pstate,
                                      h->i_bit, h->f_bit, &kind);
    if (target && !(h->enabled_els >> target & 1)) {
        spe_take_exception(h->model, uc, target, kind, next_pc, 0, 0, 0, 0);
        h->irqs_taken++;
        h->counter->pmu_exceptions++;
        return;
    }
    c->stop_at = c->insns;
    c->fast_limit = 0;
}

/* ICC_IAR1_EL1 read, ICC_EOIR1_EL1 or ICC_SGI1R_EL1 write (an UNDEF in QEMU) executed on the
 * GIC model's state (gic.c), when permitted at `el` and free of anything Python reports (an
 * EOI it would log, an SGI to another PE); 1 when done (PC past it), 0: Python's to do. */
static int icc_fast(void *uc, struct spe_intr *h, struct spe_counter *c, uint32_t word,
                    uint64_t pc, uint32_t el, uint64_t pstate)
{
    const struct spe_exc_model *m = h->model;
    struct spe_gic *g = h->gic;
    uint32_t rt = word & 31, which;
    for (which = 0; which < 3 && (word & ~31u) != h->icc_word[which]; which++)
        ;
    if (which == 3 || !(h->icc_ok >> (3 * el + which) & 1))
        return 0;
    uint64_t value = rt == 31 ? 0 : reg_read(uc, m, h->x_ids[rt]);
    if (which == 0) {
        uint64_t intid = spe_gic_acknowledge(g, 1);
        if (rt != 31)
            reg_write(uc, m, h->x_ids[rt], intid);
    } else if (which == 1) {
        uint32_t intid = (uint32_t)value & h->intid_mask;
        if (spe_gic_eoi(g, 1, intid, 0) & (SPE_EOI_ERRORS | SPE_EOI_SPECIAL))
            return 0;
        spe_gic_eoi(g, 1, intid, 1);
    } else {
        if ((value & h->sgi_self_mask) != h->sgi_self_value)
            return 0;
        struct spe_gic_irq *irq = &g->irqs[(value >> h->sgi_intid_lsb) & h->sgi_intid_mask];
        if (h->sgi1r_groups >> (irq->group & 1) & 1)
            irq->latch = 1;
    }
    reg_write(uc, m, m->pc_id, pc + 4);
    h->icc_native++;
    gic_changed(uc, h, c, el, pstate, pc + 4);
    return 1;
}

static uint64_t field(uint64_t value, uint32_t lsb, uint32_t mask)
{
    return lsb < 64 ? value >> lsb & mask : 0;
}

/* The FSC of the Address size fault or synchronous External abort on the stage 1 walk of
 * `va` in the regime of `regime` (1 = EL1&0, 2, 3) that the walk ends with, SPE_WALK_AGREES
 * when it ends otherwise, SPE_WALK_PYTHON with stage 2 enabled for EL1&0. As
 * mmu.walk_fault (Arm ARM D8.3, AArch64.S1Walk(), AArch64.OAOutOfRange(),
 * AArch64.FetchDescriptor()): the initial table address, each next-level table address and
 * the output address are checked against the output address size (TCR_ELx.{I}PS, at most
 * ID_AA64MMFR0_EL1.PARange); a descriptor read from no memory is an External abort at the
 * level being read. */
int spe_walk_fault(struct spe_walk *w, void *uc, uint64_t va, uint32_t regime)
{
    const struct spe_exc_model *m = w->model;
    uint64_t hcr = cp_read(uc, m, m->hcr_enc);
    uint32_t e2h = hcr >> m->e2h_bit & 1, tge = hcr >> m->tge_bit & 1;
    if (regime == 1 && (hcr >> w->vm_lsb & 1) && (cp_read(uc, m, w->scr_enc) >> w->ns_lsb & 1)
            && !(e2h && tge))
        return SPE_WALK_PYTHON;   /* (mmu.stage2_enabled) */
    if (!(cp_read(uc, m, m->sctlr_enc[regime]) >> w->m_lsb & 1))
        return SPE_WALK_AGREES;
    uint32_t upper = va >> 55 & 1;
    const struct spe_va_range *r =
        regime == 1 ? &w->ranges[upper ? SPE_RANGE_EL1_UPPER : SPE_RANGE_EL1_LOWER]
        : regime == 2 ? (e2h ? &w->ranges[upper ? SPE_RANGE_EL2_VHE_UPPER
                                                : SPE_RANGE_EL2_VHE_LOWER]
                             : &w->ranges[SPE_RANGE_EL2_LOWER])
        : &w->ranges[SPE_RANGE_EL3_LOWER];
    uint64_t tcr = cp_read(uc, m, r->tcr_enc);
    uint32_t tsz = (uint32_t)field(tcr, r->tsz_lsb, r->tsz_mask);
    tsz = tsz < w->txsz_min ? w->txsz_min : tsz > w->txsz_max ? w->txsz_max : tsz;
    uint32_t ia_bits = 64 - tsz;
    uint32_t top = (tcr >> r->tbi_lsb & 1) ? 55 : 63;
    uint64_t ones = (1ULL << (top + 1 - ia_bits)) - 1;   /* VA[top:ia_bits] */
    if ((va >> ia_bits & ones) != (r->upper ? ones : 0))
        return SPE_WALK_AGREES;   /* (a level 0 Translation fault) */
    if (field(tcr, r->epd_lsb, 1))
        return SPE_WALK_AGREES;
    const struct spe_granule *g = &w->granules[r->granule[field(tcr, r->tg_lsb, r->tg_mask)]];
    uint32_t level = g->start_level[ia_bits];
    uint64_t table_bytes = 8ULL << (ia_bits - g->level_shift[level]);
    uint64_t table = cp_read(uc, m, r->ttbr_enc) & w->baddr_mask & ~(table_bytes - 1);
    uint32_t ps = w->pa_bits[field(tcr, r->ps_lsb, r->ps_mask) & 7];
    uint32_t pa_max = w->pa_bits[field(cp_read(uc, m, w->mmfr0_enc), w->parange_lsb,
                                       w->parange_mask) & 7];
    uint32_t oa_bits = ps < pa_max ? ps : pa_max;
    if (table >> oa_bits)
        return (int)w->fsc_address_size;   /* (level 0) */
    uint32_t index_bits = ia_bits - g->level_shift[level];
    uint64_t table_mask = w->oa_mask & ~((1ULL << g->page_shift) - 1);
    for (;;) {
        uint32_t shift = g->level_shift[level];
        uint64_t index = va >> shift & ((1ULL << index_bits) - 1);
        uint64_t desc = 0;
        if (w->mem_read(uc, table + 8 * index, &desc, 8) != 0)
            return (int)(w->fsc_walk_external | level);
        if (!(desc >> w->valid_lsb & 1))
            return SPE_WALK_AGREES;
        if (desc >> w->type_lsb & 1) {
            if (level < w->final_level) {
                table = desc & table_mask;
                if (table >> oa_bits)
                    return (int)(w->fsc_address_size | level);
                level++;
                index_bits = g->index_bits;
                continue;
            }
        } else if (!(g->block_levels >> level & 1)) {
            return SPE_WALK_AGREES;
        }
        uint64_t size_mask = (1ULL << shift) - 1;
        uint64_t oa = (desc & w->oa_mask & ~size_mask) | (va & size_mask);
        return oa >> oa_bits ? (int)(w->fsc_address_size | level) : SPE_WALK_AGREES;
    }
}

int spe_abort_stands(struct spe_walk *w, void *uc, uint32_t el, uint64_t va, uint32_t fsc)
{
    const struct spe_exc_model *m = w->model;
    /* (SyncChecks._e0pd_fault decides whether an access at EL0/EL1 is unprivileged: any
     * that may be goes to Python) */
    if (w->e0pd && el <= 1
            && (cp_read(uc, m, w->ranges[SPE_RANGE_EL1_LOWER].tcr_enc)
                >> w->e0pd_lsb[va >> 55 & 1] & 1)
            && (cp_read(uc, m, m->sctlr_enc[1]) >> w->m_lsb & 1))
        return 0;
    if (!(w->translation_fscs >> fsc & 1))
        return 1;
    return spe_walk_fault(w, uc, va, el > 1 ? el : 1) == SPE_WALK_AGREES;
}

void spe_intr_hook(void *uc, uint32_t intno, struct spe_intr *h)
{
    const struct spe_exc_model *m = h->model;
    struct spe_counter *c = h->counter;
    if (!h->native || intno >= 64 || !((h->native_intnos >> intno) & 1)
            || c->cap_count || c->completing)
        goto python;

    uint64_t pstate = reg_read(uc, m, m->pstate_id);
    uint32_t el = (uint32_t)(pstate >> m->el_lsb) & m->el_mask;
    if ((intno == h->psci_intno && el > 0) || (h->enabled_els >> el & 1))
        goto python;
    uint64_t pc = reg_read(uc, m, m->pc_id);
    uint32_t word = 0;
    if (intno == h->undef_intno) {
        if (!fetch_word(uc, h, pc, &word))
            goto python;
        if (h->gic && h->gic_native && icc_fast(uc, h, c, word, pc, el, pstate))
            return;
        if (python_undef(h, word))
            goto python;
    }
    if (h->context_save(uc, h->context) != 0)
        goto python;
    struct qemu_exception exc;
    memcpy(&exc, (const char *)h->context + h->exc_offset, sizeof exc);
    if (exc.syndrome == 0)
        goto python;   /* (Machine._rebuild_syndrome) */
    /* An exception is never taken to a lower EL (QEMU routes HVC at EL3 to EL2). */
    uint32_t target = exc.target_el;
    if (target < el)
        target = el;
    if (target < 1)
        target = 1;
    if (h->enabled_els >> target & 1)
        goto python;
    uint32_t ec = (exc.syndrome >> h->ec_lsb) & h->ec_mask;
    if (intno == h->undef_intno && ec == h->wfx_ec && word != h->wfi_word)
        goto python;   /* (Unicorn's emu_start exit: Machine._unicorn_exit) */
    uint32_t fsc = (exc.syndrome >> h->fsc_lsb) & h->fsc_mask;
    if ((h->abort_ecs >> ec & 1) && (h->python_fscs >> fsc & 1)
            && !(h->walk && spe_abort_stands(h->walk, uc, el, exc.vaddress, fsc)))
        goto python;

    /* The population is accounted up to and including the instruction, and the block ends
     * there (spe_end_block_at, as Machine._take_sync does). */
    uint64_t insn = (h->after_insn_intnos >> intno) & 1 ? pc - 4 : pc;
    if (spe_exception_guard(h, spe_retired_through(c, insn)))
        goto python;   /* (Python raises the exception-loop error) */
    spe_end_block_at(c, insn);

    uint32_t flags = SPE_EXC_SYNDROME | (((h->far_ecs >> ec) & 1) ? SPE_EXC_FAR : 0);
    spe_take_exception(m, uc, target, 0, pc, exc.syndrome, exc.vaddress, flags, 0);
    h->taken++;
    h->counter->pmu_exceptions++;
    spe_exception_from(h->counter, insn, pc, -1);
    return;
python:
    h->fallback(uc, intno, h);
}

/* UC_HOOK_CODE callback on PSB CSYNC: Python writes the records of every sampled operation
 * before it (SPE supplement §3.6) only while profiling is enabled; otherwise nothing. */
void spe_psb_hook(void *uc, uint64_t address, uint32_t size, struct spe_control *ctl)
{
    if (!ctl->psb) {
        ctl->psb_skipped++;
        return;
    }
    ctl->psb_fallback(uc, address, size, ctl);
}

/* UC_HOOK_CODE callback on ERET: Python's hook while it has something to re-plan
 * (struct spe_control: python or irq set), and also when this ERET
 * may leave PSTATE.IL set (its SPSR_ELx.{IL, M} in the table Python made for the current
 * context): the run then checks for the Illegal Execution state exception. */
void spe_eret_hook(void *uc, uint64_t address, uint32_t size, struct spe_control *ctl)
{
    if (!(ctl->python | ctl->irq)) {
        const struct spe_exc_model *m = ctl->model;
        uint32_t el = (uint32_t)(reg_read(uc, m, m->pstate_id) >> m->el_lsb) & m->el_mask;
        if (el == 0) {
            ctl->skipped++;
            return;   /* (UNDEFINED at EL0: QEMU raises it) */
        }
        uint64_t spsr = cp_read(uc, m, m->spsr_enc[el]);
        uint32_t key = (uint32_t)((spsr >> ctl->spsr_il_lsb & 1) << 5
                                  | (spsr >> ctl->spsr_m_lsb & ctl->spsr_m_mask));
        if (!(ctl->eret_il[el] >> key & 1)) {
            ctl->skipped++;
            return;
        }
    }
    ctl->fallback(uc, address, size, ctl);
}

/* UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE callback, installed (Python's SyncChecks) only while
 * the PE is at an Exception level whose stage 1 regime is disabled, where every data access
 * is to Device-nGnRnE memory (AArch64.S1DisabledOutput()) and must be aligned to its size
 * (the Device check of AArch64.MemSingle[]): an aligned access (size bytes, a power of two)
 * returns at once; a misaligned one calls `fallback` (Python's Machine._on_misaligned),
 * which takes the Alignment fault. */
typedef void (*spe_mem_fn)(void *uc, int type, uint64_t address, int size, int64_t value,
                           void *data);

void spe_align_hook(void *uc, int type, uint64_t address, int size, int64_t value,
                    spe_mem_fn fallback)
{
    if (!(address & (uint64_t)(size - 1)))
        return;
    fallback(uc, type, address, size, value, 0);
}

/* UC_HOOK_CODE callback on each DC ZVA instruction of the loaded images: Python (the filter's
 * zva_fallback, SyncChecks.dc_zva) only while the PE is at an Exception level whose data
 * accesses are to Device memory (zva_python, set with spe_align_hook's installation), where
 * DC ZVA generates an Alignment fault; otherwise QEMU executes it with no call. */
typedef void (*spe_insn_fn)(void *uc, uint64_t address, uint32_t size, void *data);

void spe_zva_hook(void *uc, uint64_t address, uint32_t size, struct spe_sysreg_filter *f)
{
    if (f->zva_python)
        ((spe_insn_fn)f->zva_fallback)(uc, address, size, f);
}
