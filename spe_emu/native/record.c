/*
 * Native records for captured samples (docs/model.md, "Native records").
 *
 * The block hook (counter.c) captures the registers of samples it can observe without a stop.
 * Python used to replay every capture: decode, observe, build the record, write it. Here one
 * call, spe_record_captures(), builds the records of all the captures whose instruction has a
 * *template* -- what Python decided once for that instruction (PC and Operation Type packets,
 * data address form, branch kind, condition code) -- and appends them, padded, to an output
 * buffer that Python writes to the Profiling Buffer in one go. It stops at the first capture
 * it cannot record (no template yet, an instruction Python records itself, a capture past the
 * stop) and says why; Python handles that one and calls again.
 *
 * The record is the one spe_emu.spe.records.RecordBuilder.build() gives for the same sample
 * (SPE supplement §2.3, §5.3; Arm ARM D18.1): the same packets in the same order, from the
 * same micro-architecture model (model.c), which Python's builder uses too, so both update
 * one model in instruction order. Packet header bytes, event numbers, latencies and what a
 * load/store's outcome in the model puts in its record come from Python (spe_emu.spe.packets,
 * spe_emu.spe.records), so each is declared once.
 */
#include <stdlib.h>
#include <string.h>

#include "spe_native.h"

const uint64_t spe_recorder_size = sizeof(struct spe_recorder);
const uint64_t spe_template_size = sizeof(struct spe_template);

/* ---- the recorder --------------------------------------------------------------------- */

void spe_recorder_free(struct spe_recorder *r)
{
    free(r->templates), free(r->template_used), free(r->out);
    r->templates = 0;
    r->template_used = 0;
    r->out = 0;
}

/* Allocates an output buffer of out_size bytes and the template table; the records use the
 * model m. 0 without memory. */
int spe_recorder_init(struct spe_recorder *r, struct spe_model *m, uint64_t out_size)
{
    r->model = m;
    r->templates = malloc(SPE_TEMPLATES * sizeof *r->templates);
    r->template_used = calloc(SPE_TEMPLATES, 1);
    r->out = malloc(out_size);
    r->out_size = out_size;
    if (!r->templates || !r->template_used || !r->out) {
        spe_recorder_free(r);
        return 0;
    }
    return 1;
}

/* ---- templates ------------------------------------------------------------------------ */

/* The slot of the template for (pc, el, ns), or the empty slot where it would go; -1 when its
 * probe sequence is full of other templates. */
static int template_find(const struct spe_recorder *r, uint64_t pc, uint32_t el, uint32_t ns)
{
    uint32_t slot = hash64((pc >> 2) ^ ((uint64_t)(el << 1 | ns) << 60), SPE_TEMPLATES - 1);
    for (int i = 0; i < SPE_PROBES; i++) {
        int at = (int)((slot + i) & (SPE_TEMPLATES - 1));
        const struct spe_template *t = &r->templates[at];
        if (!r->template_used[at] || (t->pc == pc && t->el == el && t->ns == ns))
            return at;
    }
    return -1;
}

/* Stores a template (its pc/el/ns select the slot); 0 when its probe sequence is full. */
static int template_add(struct spe_recorder *r, const struct spe_template *t)
{
    int at = template_find(r, t->pc, t->el, t->ns);
    if (at < 0 || t->head_len > sizeof t->head)
        return 0;
    r->templates[at] = *t;
    r->template_used[at] = 1;
    return 1;
}

/* Stores `count` templates (an array); 1 when all were stored, 0 when one found no room (the
 * ones before it are stored). */
int spe_templates_add(struct spe_recorder *r, const struct spe_template *ts, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        if (!template_add(r, &ts[i]))
            return 0;
    return 1;
}

void spe_templates_clear(struct spe_recorder *r)
{
    memset(r->template_used, 0, SPE_TEMPLATES);
}

/* ---- records -------------------------------------------------------------------------- */

/* ConditionHolds(cond) on NZCV in bits 31:28 (a64.condition_holds). */
static int condition_holds(int cond, uint64_t nzcv)
{
    int n = (int)(nzcv >> 31) & 1, z = (int)(nzcv >> 30) & 1;
    int c = (int)(nzcv >> 29) & 1, v = (int)(nzcv >> 28) & 1;
    int result;
    switch ((cond >> 1) & 7) {
    case 0: result = z; break;
    case 1: result = c; break;
    case 2: result = n; break;
    case 3: result = v; break;
    case 4: result = c && !z; break;
    case 5: result = n == v; break;
    case 6: result = n == v && !z; break;
    default: result = 1; break;
    }
    if ((cond & 1) && cond != 0xF)
        result = !result;
    return result;
}

static uint8_t *put_le(uint8_t *o, uint64_t value, int bytes)
{
    for (int i = 0; i < bytes; i++)
        *o++ = (uint8_t)(value >> (8 * i));
    return o;
}

/* Address packet payload of an instruction address (§5.3.1): ADDR[55:0], EL, NS. */
static uint64_t insn_address(uint64_t addr, uint32_t el, uint32_t ns)
{
    return (addr & 0x00FFFFFFFFFFFFFFull) | (uint64_t)el << 61 | (uint64_t)ns << 63;
}

static uint64_t data_address(const struct spe_template *t, const uint64_t *regs, uint64_t pc)
{
    return spe_address(t->addr, t->base, t->index, t->extend, t->shift, t->offset, regs, pc);
}

/* ---- translations for Physical Address packets ---------------------------------------- */

static uint64_t xlate_tag(const struct spe_recorder *r, uint64_t va)
{
    return ((va >> 12) << 2 | r->xlate_regime) + 1;
}

static uint32_t xlate_slot(uint64_t tag)
{
    return hash64(tag, SPE_XLATES - 1);
}

/* The translation of the page of va in the drain's regime (Python's); 0 when the table has
 * none. */
static int xlate_find(const struct spe_recorder *r, uint64_t va, uint64_t *pa)
{
    uint64_t tag = xlate_tag(r, va);
    uint32_t at = xlate_slot(tag);
    if (r->xlate_tag[at] != tag)
        return 0;
    *pa = r->xlate_pa[at];
    return 1;
}

void spe_xlate_add(struct spe_recorder *r, uint64_t va, uint64_t pa_page)
{
    uint64_t tag = xlate_tag(r, va);
    uint32_t at = xlate_slot(tag);
    r->xlate_tag[at] = tag;
    r->xlate_pa[at] = pa_page;
}

void spe_xlate_clear(struct spe_recorder *r)
{
    memset(r->xlate_tag, 0, sizeof r->xlate_tag);
}

/* Builds the record of capture cap from template t at o, a load/store's with its data
 * address va and a Physical Address packet from pa_page (SPE_PA_NONE: none); returns the end
 * (before padding). */
static uint8_t *build(struct spe_recorder *r, const struct spe_template *t,
                      const struct spe_capture *cap, uint64_t va, uint64_t pa_page,
                      uint8_t *o)
{
    uint64_t events = 1ull << r->ev_retired;
    uint32_t execute = 1, xlat = 0;
    memcpy(o, r->prefix, r->prefix_len);
    o += r->prefix_len;
    memcpy(o, t->head, t->head_len);
    o += t->head_len;
    if (t->kind == SPE_TPL_OTHER) {
        if (t->cond >= 0 && !condition_holds(t->cond, cap->regs[SPE_CAP_REGS - 1]))
            events |= 1ull << r->ev_not_taken;
    } else if (t->kind == SPE_TPL_BRANCH) {   /* outcome from the PC its block left to */
        uint64_t next = cap->next_pc ? cap->next_pc : r->next_pc;
        uint64_t target = next;
        int taken = 1, mispredicted = 0;
        if (t->branch & SPE_BR_COND) {
            target = t->target;
            taken = next == target;
            if (!taken)
                events |= 1ull << r->ev_not_taken;
        }
        if (taken || r->not_taken_target) {
            *o++ = r->hdr_target;
            o = put_le(o, insn_address(target, r->el, r->ns), 8);
        }
        /* (out of memory for the target table, -1: counted as mispredicted; model_feed
         * "every": the prediction the branch found, spe_record_captures checks there is one) */
        mispredicted = r->feed_every ? cap->fed != 0
                       : spe_model_branch(r->model, t->branch, cap->pc, target, taken, 1) != 0;
        if (mispredicted) {
            events |= 1ull << r->ev_mispred;
            execute += r->lat_mispredict;
        }
    } else if (t->addr != SPE_ADDR_NONE) {   /* load/store: the locality model */
        *o++ = r->hdr_va;
        o = put_le(o, va, 8);
        if (pa_page != SPE_PA_NONE) {
            *o++ = (uint8_t)r->hdr_pa;
            o = put_le(o, ((pa_page | (va & 0xFFF)) & r->pa_mask) | (r->ns ? r->pa_ns : 0), 8);
        }
        int out = r->feed_every ? (int)cap->fed : spe_model_access(r->model, va >> 6, 1);
        events |= r->outcome_events[out];
        execute = r->outcome_execute[out];
        xlat = r->outcome_xlat[out];
        if (t->store_only)
            execute = r->lat_store;
    }
    uint32_t total = r->lat_issue + execute + (xlat ? xlat - 1 : 0);
    uint32_t max = r->counter_max;
    int size = events < 0x100 ? 0 : events < 0x10000 ? 1 : events < (1ull << 32) ? 2 : 3;
    *o++ = r->hdr_events[size];
    o = put_le(o, events, 1 << size);
    *o++ = r->hdr_total;
    o = put_le(o, total < max ? total : max, 2);
    *o++ = r->hdr_issue;
    o = put_le(o, r->lat_issue < max ? r->lat_issue : max, 2);
    if (xlat) {
        *o++ = r->hdr_xlat;
        o = put_le(o, xlat < max ? xlat : max, 2);
    }
    if (r->timestamp) {   /* the system counter at the instruction (virtual time) */
        *o++ = r->hdr_timestamp;
        o = put_le(o, cap->index + r->ts_offset, 8);
    } else {
        *o++ = r->hdr_end;
    }
    return o;
}

/* Records captures[start..cap_count) of counter c in order until one needs Python; returns
 * that capture's position (cap_count when all are recorded) and sets r->reason. The caller
 * has waited for the model's worker, which sets the captures' outcomes (spe_model_sync:
 * Prediction._drain). */
uint32_t spe_record_captures(const struct spe_counter *c, struct spe_recorder *r,
                             uint32_t start, uint32_t cap_count)
{
    uint32_t i;
    r->reason = SPE_REC_DONE;
    for (i = start; i < cap_count; i++) {
        const struct spe_capture *cap = &c->caps[i];
        if (cap->index > r->insn_index) {
            r->reason = SPE_REC_DROP;
            break;
        }
        if (cap->index != r->expect) {
            r->reason = SPE_REC_ORDER;
            break;
        }
        int at = template_find(r, cap->pc, r->el, r->ns);
        if (at < 0 || !r->template_used[at]) {
            r->reason = SPE_REC_TEMPLATE;
            break;
        }
        const struct spe_template *t = &r->templates[at];
        if (t->kind == SPE_TPL_PYTHON
                || (cap->mode == SPE_AT_END && !cap->next_pc)          /* live registers */
                || (t->kind == SPE_TPL_BRANCH && cap->mode != SPE_NEXT_PC)
                || (r->feed_every && cap->fed == SPE_FED_NONE          /* (model_feed) */
                    && (t->kind == SPE_TPL_BRANCH
                        || (t->kind == SPE_TPL_LDST && t->addr != SPE_ADDR_NONE)))
                || r->out_len + 256 + r->align > r->out_size) {
            r->reason = SPE_REC_PYTHON;
            break;
        }
        uint64_t va = 0, pa_page = SPE_PA_NONE;
        if (t->kind == SPE_TPL_LDST && t->addr != SPE_ADDR_NONE) {
            va = data_address(t, cap->regs, cap->pc);
            if (r->collect_pa && !xlate_find(r, va, &pa_page)) {
                r->xlate_va = va;
                r->reason = SPE_REC_XLATE;
                break;
            }
        }
        uint8_t *begin = r->out + r->out_len;
        uint8_t *end = build(r, t, cap, va, pa_page, begin);
        r->expect += r->gap;
        if (r->type_filter && !(t->optypes & r->type_filter)) {
            r->filtered++;   /* CollectRecord(): not a type selected (the model saw it) */
            continue;
        }
        size_t pad = (size_t)(-(end - begin)) & (r->align - 1);   /* Padding packets */
        memset(end, 0, pad);
        r->out_len += (uint64_t)(end - begin) + pad;
        r->records++;
    }
    return i;
}
