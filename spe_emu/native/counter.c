/*
 * Native instruction counter for the spe_emu run loop.
 *
 * A Unicorn UC_HOOK_BLOCK callback (called once per translated-block execution, not per
 * instruction) that counts retired A64 instructions (4 bytes each) and stops emulation before
 * the block that contains instruction number `stop_at` (0-based count of instructions retired
 * so far). The Python side reads and writes the struct through ctypes; there is no Python
 * callback on the hot path.
 *
 * Captured samples: when the stop is for the planned sample-interval event (`stop_at ==
 * event_at`) and the run loop has said how the sample can be observed (a (block, length, k)
 * triple in the verdict table, or else instruction 0 of the block, at its start:
 * docs/model.md "Samples inside a block"), the hook copies X0-X30, SP and NZCV into the
 * capture ring instead of stopping -- at the block's start, or at the next block entered for
 * a sample observed at its block's end or by the PC its branch went to -- moves `event_at` on
 * by the fixed `gap` and goes on. At its next stop or hook, Python has the records built
 * (record.c, or Python for what a template cannot describe: Machine._drain). The
 * hook never captures where that could change what the guest sees: only with a fixed gap
 * (PMSIRR_EL1.RND == 0), while `cap_budget` (records that fit without a Profiling Buffer
 * management event) lasts, when the next event is not in the same block and the block ends
 * before `limit`.
 *
 * With the patched libunicorn (patches/unicorn/0009, uc_hook_block_counter) the translated
 * code runs that common path itself: a block that ends by `fast_limit` adds its length to
 * `insns` and sets `block_start` and `block_insns` (the struct's first four fields, laid out
 * as struct uc_block_counter) without a call; the hook runs for every other block. Python
 * gives the hook that path only while it is all the hook would do (no FEAT_SPE_PBT tracking,
 * no model feed: Machine._inline_block_counter).
 *
 * Ground truth (spe-emu run --ground-truth): while gt_table is set, fast_limit stays 0, so
 * every block takes the slow path, which counts one more execution of (block address, length)
 * in an open-addressing table that grows at half full; Python expands the blocks to PCs at the
 * end (Machine.ground_truth) and corrects a block an exception ended early (_take_sync). The
 * default path keeps its one compare.
 *
 * The file is also a (trivial) CPython extension module so setuptools can build it; the
 * module itself exports nothing.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "spe_native.h"

/* Let the loader reject a stale build: one of other sources, or whose struct layout differs
 * from the Python mirror. */
#ifndef SPE_SOURCE_DIGEST
#define SPE_SOURCE_DIGEST ""
#endif
const char spe_source_digest[17] = SPE_SOURCE_DIGEST;
const uint64_t spe_counter_size = sizeof(struct spe_counter);
/* (with the size, the offsets of fields around the ones the mirror is most likely to get out
 * of order: native.COUNTER_OFFSETS names them) */
const uint64_t spe_counter_offsets[] = {
    offsetof(struct spe_counter, caps), offsetof(struct spe_counter, gt_table),
    offsetof(struct spe_counter, feed), offsetof(struct spe_counter, feed_until),
    offsetof(struct spe_counter, pmu_counts), offsetof(struct spe_counter, trace_flush),
    offsetof(struct spe_counter, verdicts), offsetof(struct spe_counter, steps)};
const uint64_t spe_counter_reads_size = sizeof(struct spe_counter_reads);
const uint64_t spe_sysreg_filter_size = sizeof(struct spe_sysreg_filter);
/* (uc_hook_block_counter's struct uc_block_counter: count, limit, last_pc, last_insns) */
_Static_assert(offsetof(struct spe_counter, insns) == 0
               && offsetof(struct spe_counter, fast_limit) == 8
               && offsetof(struct spe_counter, block_start) == 16
               && offsetof(struct spe_counter, block_insns) == 24,
               "struct spe_counter begins as struct uc_block_counter");

static uint32_t verdict_slot(uint64_t pc, uint32_t n, uint32_t k)
{
    uint64_t h = (pc >> 2) * 0x9E3779B97F4A7C15ull
                 ^ ((uint64_t)n << 16 | k) * 0xC2B2AE3D27D4EB4Full;
    return (uint32_t)(h >> 40) & (SPE_VERDICTS - 1);
}

/* The slot of the verdict for instruction k of the n-instruction block at pc, or the empty
 * slot where it would go, or NULL when its probe sequence is full of other verdicts. */
static struct spe_verdict *verdict_find(struct spe_counter *c, uint64_t pc, uint32_t n,
                                        uint32_t k)
{
    uint32_t slot = verdict_slot(pc, n, k);
    for (int i = 0; i < SPE_PROBES; i++) {
        struct spe_verdict *v = &c->verdicts[(slot + i) & (SPE_VERDICTS - 1)];
        if (v->pc == 0 || (v->pc == pc && v->n == n && v->k == k))
            return v;
    }
    return 0;
}

/* Stores how instruction k of the n-instruction block at pc can be captured (no plan); the
 * verdict, or NULL when its probe sequence is full. */
static struct spe_verdict *verdict_store(struct spe_counter *c, uint64_t pc, uint32_t n,
                                         uint32_t k, uint32_t mode)
{
    struct spe_verdict *v = k > 0xFFFF ? 0 : verdict_find(c, pc, n, k);
    if (!v)
        return 0;
    v->pc = pc;
    v->n = n;
    v->k = (uint16_t)k;
    v->mode = (uint16_t)mode;
    v->plan = v->plan_len = 0;
    return v;
}

/* Records how instruction k of the n-instruction block at pc can be captured; 0 if full. */
int spe_verdict_add(struct spe_counter *c, uint64_t pc, uint32_t n, uint32_t k, uint32_t mode)
{
    return verdict_store(c, pc, n, k, mode) != 0;
}

/* Records the verdicts of several blocks. `batch` holds `size` bytes: per block, its address
 * (u64), length (u32) and number of verdicts (u32), then per verdict k, mode, the number of
 * steps of its plan and a zero (u16 each), then the plan's steps (struct spe_step), all
 * little-endian. Returns 1 when every verdict was stored, 0 when one found no room (in the
 * table or for its steps; the ones before it are stored). */
int spe_verdicts_add(struct spe_counter *c, const uint8_t *batch, uint64_t size)
{
    uint64_t at = 0;
    while (at + 16 <= size) {
        uint64_t pc;
        uint32_t n, count;
        memcpy(&pc, batch + at, 8);
        memcpy(&n, batch + at + 8, 4);
        memcpy(&count, batch + at + 12, 4);
        at += 16;
        for (uint32_t i = 0; i < count && at + 8 <= size; i++) {
            uint16_t entry[4];
            memcpy(entry, batch + at, 8);
            at += 8;
            uint64_t steps = entry[2];
            struct spe_verdict *v;
            if (at + steps * sizeof(struct spe_step) > size
                    || c->step_count + steps > SPE_STEPS
                    || !(v = verdict_store(c, pc, n, entry[0], entry[1])))
                return 0;
            v->plan = (uint16_t)c->step_count;
            v->plan_len = (uint16_t)steps;
            memcpy(&c->steps[c->step_count], batch + at, steps * sizeof(struct spe_step));
            c->step_count += steps;
            at += steps * sizeof(struct spe_step);
        }
    }
    return 1;
}

void spe_verdicts_clear(struct spe_counter *c)
{
    for (int i = 0; i < SPE_VERDICTS; i++)
        c->verdicts[i].pc = 0;
    c->step_count = 0;
}

/* ShiftReg() of a 32- or 64-bit value (mask): LSL 0, LSR 1, ASR 2. */
static uint64_t shift_reg(uint64_t value, unsigned kind, unsigned amount, uint64_t mask)
{
    unsigned bits = mask == 0xFFFFFFFFull ? 32 : 64;
    value &= mask;
    if (kind == 0)
        return (value << amount) & mask;
    if (kind == 1)
        return value >> amount;
    int64_t sv = bits == 32 ? (int64_t)(int32_t)(uint32_t)value : (int64_t)value;
    return (uint64_t)(sv >> amount) & mask;
}

/* ADD/SUB/ADDS/SUBS: AddWithCarry(Rn, operand2 or NOT(operand2), carry) (Arm ARM C6.2),
 * the result to Rd and, for ADDS/SUBS, N, Z, C, V to NZCV (bits 31:28, as Unicorn holds it). */
static void add_sub(const struct spe_step *st, uint64_t *regs)
{
    uint64_t mask = st->mask;
    unsigned bits = mask == 0xFFFFFFFFull ? 32 : 64;
    uint64_t x = st->src == SPE_NO_REG ? 0 : regs[st->src] & mask;
    uint64_t y = st->op2 == SPE_NO_REG ? st->imm
                 : shift_reg(regs[st->op2], st->shift_type, st->shift, mask);
    uint64_t carry = st->kind == SPE_STEP_SUB;
    if (carry)
        y = ~y & mask;
    unsigned __int128 sum = (unsigned __int128)x + y + carry;
    uint64_t result = (uint64_t)sum & mask;
    if (st->dst != SPE_NO_REG)
        regs[st->dst] = result;
    if (st->flags) {
        uint64_t n = result >> (bits - 1) & 1, z = result == 0;
        uint64_t c = bits == 64 ? (uint64_t)(sum >> 64) : (uint64_t)(sum >> 32) & 1;
        uint64_t v = ((~(x ^ y) & (x ^ result)) >> (bits - 1)) & 1;
        regs[SPE_NZCV_SLOT] = n << 31 | z << 30 | c << 29 | v << 28;   /* PSTATE.{N,Z,C,V} */
    }
}

/* Runs the plan of an SPE_EVAL verdict for the block at `block` on the registers at its
 * start (Machine._evaluate): 0 when a load would read outside RAM, across a page or from an
 * address that does not translate for a read at the current EL (the run loop then stops and
 * Python decides). */
static int evaluate(void *uc, const struct spe_counter *c, const struct spe_verdict *v,
                    uint64_t block, uint64_t *regs)
{
    for (uint32_t i = 0; i < v->plan_len; i++) {
        const struct spe_step *st = &c->steps[v->plan + i];
        uint64_t pc = block + st->at;
        switch (st->kind) {
        case SPE_STEP_ADD:
        case SPE_STEP_SUB:
            add_sub(st, regs);
            break;
        case SPE_STEP_MOV:
            regs[st->dst] = st->src == SPE_NO_REG ? 0 : regs[st->src] & st->mask;
            break;
        case SPE_STEP_LOAD: {
            uint64_t va = spe_address(st->form, st->src, st->index, st->extend, st->shift,
                                      st->imm, regs, pc);
            uint64_t pa, value = 0;
            if ((va & 0xFFF) + st->size > 0x1000
                    || c->vmem_translate(uc, va, 1 /* UC_PROT_READ */, &pa) != 0
                    || pa < c->ram_base || pa + st->size > c->ram_base + c->ram_size
                    || c->mem_read(uc, pa, &value, st->size) != 0)
                return 0;
            unsigned bits = 8 * st->size;
            if (st->sext && bits < 64 && (value >> (bits - 1)) & 1) {
                value |= ~0ull << bits;
                if (st->sext == 32)
                    value &= 0xFFFFFFFFull;
            }
            if (st->writeback)
                regs[st->src] += st->wb;
            if (st->dst != SPE_NO_REG)
                regs[st->dst] = value;
            break;
        }
        default:
            return 0;
        }
    }
    return 1;
}

static int read_regs(void *uc, struct spe_counter *c, uint64_t *regs)
{
    void *ptrs[SPE_CAP_REGS];
    for (int i = 0; i < SPE_CAP_REGS; i++) {
        regs[i] = 0;   /* NZCV fills only 32 bits */
        ptrs[i] = &regs[i];
    }
    return c->reg_read_batch(uc, c->reg_ids, ptrs, SPE_CAP_REGS) == 0;
}

static int try_capture(void *uc, uint64_t address, uint64_t n, struct spe_counter *c)
{
    uint64_t k = c->event_at - c->insns;
    int mode;
    if (c->stop_at != c->event_at || c->gap == 0 || c->cap_budget == 0
            || c->cap_count >= SPE_CAP_MAX || c->insns + n > c->limit
            || c->event_at + c->gap < c->insns + n)
        return 0;
    const struct spe_verdict *v = verdict_find(c, address, (uint32_t)n, (uint32_t)k);
    if (!v || !v->pc) {
        if (k != 0)
            return 0;
        mode = SPE_AT_START;   /* the first instruction: the registers at the block's start */
    } else {
        mode = v->mode;
    }
    struct spe_capture *cap = &c->caps[c->cap_count];
    if (!read_regs(uc, c, cap->regs))
        return 0;
    if (mode == SPE_EVAL) {
        if (!evaluate(uc, c, v, address, cap->regs))
            return 0;
        c->evaluated++;
        mode = SPE_AT_START;   /* (the registers as the sampled instruction sees them) */
    }
    cap->index = c->event_at;
    cap->pc = address + 4 * k;
    cap->mode = (uint64_t)mode;
    cap->next_pc = 0;
    cap->fed = SPE_FED_NONE;
    if (c->feed) {   /* its first access gives it its outcome (spe_model_hook) */
        c->armed = c->cap_count + 1;
        c->armed_pc = cap->pc;
    }
    c->cap_count++;
    if (mode != SPE_AT_START)
        c->completing = c->cap_count;
    c->cap_budget--;
    c->event_at += c->gap;
    c->stop_at = c->event_at < c->limit ? c->event_at : c->limit;
    return 1;
}

/* The ground-truth slot of the n-instruction block at addr (its own or the empty one where it
 * goes); the table always has an empty slot (it grows at half full). */
static struct spe_gt_entry *gt_slot(struct spe_gt_entry *t, uint64_t cap, uint64_t addr,
                                    uint64_t n)
{
    uint64_t i = ((addr >> 2) * 0x9E3779B97F4A7C15ull ^ n * 0xC2B2AE3D27D4EB4Full) >> 17;
    for (;; i++) {
        struct spe_gt_entry *e = &t[i & (cap - 1)];
        if (e->n == 0 || (e->addr == addr && e->n == n))
            return e;
    }
}

/* Starts counting executions per block in a table of cap entries (a power of two, >= 2);
 * returns 0 when out of memory. */
int spe_gt_enable(struct spe_counter *c, uint64_t cap)
{
    free(c->gt_table);
    c->gt_table = calloc(cap, sizeof(struct spe_gt_entry));
    c->gt_cap = c->gt_table ? cap : 0;
    c->gt_used = 0;
    c->fast_limit = 0;   /* every block takes the slow path from now on */
    return c->gt_table != 0;
}

void spe_gt_free(struct spe_counter *c)
{
    free(c->gt_table);
    c->gt_table = 0;
    c->gt_cap = c->gt_used = 0;
    free(c->gt_events);
    c->gt_events = 0;
    c->gt_events_cap = c->gt_events_used = 0;
}

/* Starts recording, per PC, what the model gives each execution (a table of cap entries, a
 * power of two >= 2); returns 0 when out of memory. */
int spe_gt_events_enable(struct spe_counter *c, uint64_t cap)
{
    free(c->gt_events);
    c->gt_events = calloc(cap, sizeof(struct spe_gt_event));
    c->gt_events_cap = c->gt_events ? cap : 0;
    c->gt_events_used = 0;
    return c->gt_events != 0;
}

static struct spe_gt_event *gt_event_slot(struct spe_gt_event *t, uint64_t cap, uint64_t pc)
{
    for (uint64_t i = ((pc >> 2) * 0x9E3779B97F4A7C15ull) >> 17;; i++) {
        struct spe_gt_event *e = &t[i & (cap - 1)];
        if (e->pc == 0 || e->pc == pc)
            return e;
    }
}

/* The entry of pc (NULL: out of memory to grow). */
static struct spe_gt_event *gt_event_entry(struct spe_counter *c, uint64_t pc)
{
    if (2 * (c->gt_events_used + 1) > c->gt_events_cap) {
        uint64_t cap = 2 * c->gt_events_cap;
        struct spe_gt_event *t = calloc(cap, sizeof(struct spe_gt_event));
        if (!t)
            return NULL;
        for (uint64_t i = 0; i < c->gt_events_cap; i++)
            if (c->gt_events[i].pc)
                *gt_event_slot(t, cap, c->gt_events[i].pc) = c->gt_events[i];
        free(c->gt_events);
        c->gt_events = t;
        c->gt_events_cap = cap;
    }
    struct spe_gt_event *e = gt_event_slot(c->gt_events, c->gt_events_cap, pc);
    if (!e->pc) {
        e->pc = pc;
        c->gt_events_used++;
    }
    return e;
}

/* One execution of the instruction at pc: a load/store whose first access had the
 * spe_model_access outcome (-1: not a load/store), or a branch, mispredicted or not (-1: not
 * a branch). (Out of memory to grow: not recorded.) */
void spe_gt_event(struct spe_counter *c, uint64_t pc, int outcome, int mispredicted)
{
    struct spe_gt_event *e = pc ? gt_event_entry(c, pc) : NULL;
    if (!e)
        return;
    if (outcome >= 0) {
        int level = outcome >> SPE_OUT_LEVEL_SHIFT;
        e->n[SPE_GTE_OPS]++;
        e->n[SPE_GTE_L1D_REFILL] += level != SPE_LEVEL_L1D;
        e->n[SPE_GTE_LLC_ACCESS] += level >= SPE_LEVEL_LLC;
        e->n[SPE_GTE_LLC_MISS] += level == SPE_LEVEL_DRAM;
        e->n[SPE_GTE_WALK] += (outcome & SPE_OUT_WALK) != 0;
    }
    if (mispredicted >= 0) {
        e->n[SPE_GTE_BRANCHES]++;
        e->n[SPE_GTE_MISPRED] += mispredicted != 0;
    }
}

void spe_exception_from(struct spe_counter *c, uint64_t insn, uint64_t pc, int counted)
{
    /* (an instruction abort at a block's first instruction: the block was never entered,
     * the instruction never counted, in the ground truth either) */
    if (counted < 0)
        counted = insn >= c->block_start && insn - c->block_start < 4 * c->block_insns;
    if (insn != pc || !counted)
        return;
    c->pmu_faulted++;
    struct spe_gt_event *e = c->gt_events && pc ? gt_event_entry(c, pc) : NULL;
    if (e)
        e->n[SPE_GTE_FAULTED]++;
}

/* Adds `times` executions of the n-instruction block at addr (negative: takes them back, for
 * a block an exception ended early); returns 0 when the table could not grow (the count is
 * then lost, which Python reports). */
int spe_gt_add(struct spe_counter *c, uint64_t addr, uint64_t n, int64_t times)
{
    if (!c->gt_table || n == 0)
        return 0;
    if (2 * (c->gt_used + 1) > c->gt_cap) {
        uint64_t cap = 2 * c->gt_cap;
        struct spe_gt_entry *t = calloc(cap, sizeof(struct spe_gt_entry));
        if (!t)
            return 0;
        for (uint64_t i = 0; i < c->gt_cap; i++)
            if (c->gt_table[i].n)
                *gt_slot(t, cap, c->gt_table[i].addr, c->gt_table[i].n) = c->gt_table[i];
        free(c->gt_table);
        c->gt_table = t;
        c->gt_cap = cap;
    }
    struct spe_gt_entry *e = gt_slot(c->gt_table, c->gt_cap, addr, n);
    if (e->n == 0) {
        e->addr = addr;
        e->n = n;
        c->gt_used++;
    }
    e->count += (uint64_t)times;
    return 1;
}

/* Instructions retired up to and including the instruction at insn, which takes a synchronous
 * exception: in the block the hook entered last, the ones before it and itself; outside it
 * (an Instruction Abort: the instruction was never fetched), those counted so far. */
uint64_t spe_retired_through(const struct spe_counter *c, uint64_t insn)
{
    if (c->block_start <= insn && insn < c->block_start + 4 * c->block_insns)
        return spe_retired_before(c, insn) + 1;
    return c->insns;
}

/* The exception at insn ends the block there (Machine._take_sync and the native INTR hook):
 * the hook counted the whole block on entry, so the instructions after insn are taken back,
 * from the ground-truth count too. Returns spe_retired_through(). */
uint64_t spe_end_block_at(struct spe_counter *c, uint64_t insn)
{
    uint64_t retired = spe_retired_through(c, insn);
    uint64_t dropped = c->insns - retired;
    if (dropped) {
        if (c->gt_table) {   /* (the block ran only up to the faulting instruction) */
            spe_gt_add(c, c->block_start, c->block_insns, -1);
            spe_gt_add(c, c->block_start, c->block_insns - dropped, 1);
        }
        c->block_insns -= dropped;
        c->insns = retired;
    }
    return retired;
}

/* FEAT_SPE_PBT: the block at address follows a taken branch unless it starts where the
 * block before it ended (a taken branch to the next instruction looks like none). */
static inline void track_branch(struct spe_counter *c, uint64_t address)
{
    if (c->pbt_on && address != c->block_start + 4 * c->block_insns) {
        c->pbt_target = address;
        c->pbt_insns = c->insns + 1;
    }
}

/* The kind of the instruction at pc (SPE_BR_* | SPE_BR_BRANCH; 0: no branch), classified
 * from its word the first time (model.c keeps it until Machine._forget_code); 0 when it does
 * not translate for execution or is not in RAM (not remembered). */
static uint32_t site_kind(void *uc, struct spe_counter *c, uint64_t pc)
{
    uint32_t kind = 0, word = 0;
    uint64_t pa;
    if (spe_model_site_kind(c->feed, pc, &kind))
        return kind;
    if (c->vmem_translate(uc, pc, 4 /* UC_PROT_EXEC */, &pa) != 0
            || pa < c->ram_base || pa + 4 > c->ram_base + c->ram_size
            || c->mem_read(uc, pa, &word, 4) != 0)
        return 0;
    kind = spe_model_classify(c->feed, word);
    spe_model_site_add(c->feed, pc, kind);
    return kind;
}

/* Whether caps[i], one of the last two captures, takes the verdict of the branch that ended
 * the block counted last: a capture of that block's last instruction with no outcome yet
 * (read atomically: the model's thread may be setting a captured load's or store's). */
static inline int branch_capture(const struct spe_counter *c, uint64_t i)
{
    return c->caps[i].index == c->insns - 1
           && __atomic_load_n(&c->caps[i].fed, __ATOMIC_RELAXED) == SPE_FED_NONE;
}

/* model_feed "every": the block counted last ended at a branch, and the run went on at
 * next: the branch trains the predictor (spe_model_branch with update). With caps, a capture
 * of that branch (one of the last two) first takes the prediction the branch found
 * (spe_capture.fed): only the slow path can meet one, the block after a capture being armed.
 * A block an exception ended early ends at the instruction that took it (spe_end_block_at),
 * which is no branch. */
static inline void feed_branch(void *uc, struct spe_counter *c, uint64_t next, int caps)
{
    c->handed_valid = 0;   /* (the trainer's last block is no longer the one run last) */
    if (c->trainer_live) {   /* (the trainer's branches on the model's thread first) */
        c->trainer_live = 0;
        spe_model_sync_all(c->feed);
    }
    if (!c->block_insns || c->insns >= c->feed_until)
        return;
    uint64_t pc = c->block_start + 4 * (c->block_insns - 1);
    int mispredicted;
    if (caps) {
        uint32_t kind = site_kind(uc, c, pc);
        if (!(kind & SPE_BR_BRANCH))
            return;
        int taken = next != pc + 4;
        for (uint64_t i = c->cap_count; i-- > 0 && i + 2 >= c->cap_count;)
            if (branch_capture(c, i))
                c->caps[i].fed = spe_model_branch(c->feed, kind, pc, next, taken, 0) != 0;
        mispredicted = spe_model_branch(c->feed, kind, pc, next, taken, 1);
    } else {
        mispredicted = spe_model_feed_branch(c->feed, pc, next);
        if (mispredicted == SPE_SITE_UNKNOWN) {   /* (classified once, and remembered) */
            uint32_t kind = site_kind(uc, c, pc);
            mispredicted = kind & SPE_BR_BRANCH
                           ? spe_model_branch(c->feed, kind, pc, next, next != pc + 4, 1)
                           : SPE_SITE_NO_BRANCH;
        }
        if (mispredicted == SPE_SITE_NO_BRANCH)
            return;
    }
    c->pmu_branches++;
    c->pmu_mispredicts += mispredicted != 0;
    if (c->gt_events)
        spe_gt_event(c, pc, -1, mispredicted != 0);
}

/* model_feed "every" with the blocks traced (trace_blocks), neither the PMU nor ground truth
 * on: block_slow (and block_fed, while FEAT_SPE_PBT keeps the inline counter off) hands the
 * block at address, of n instructions, to the model's branch trainer (spe_model_train),
 * which trains the predictor with the branch before it as feed_branch would: first, if the
 * trainer does not have the block run last as it is now (spe_model_train_last), the
 * instruction that ran last; then the captures that take that branch's verdict
 * (feed_branch's); then the block, with the kind of its last instruction. */
static __attribute__((noinline)) void hand_block(void *uc, struct spe_counter *c,
                                                uint64_t address, uint64_t n)
{
    if (c->insns >= c->feed_until) {
        c->handed_valid = 0;
        return;
    }
    if (!c->handed_valid) {   /* (fed by feed_branch, or paused, since) */
        uint64_t pc = c->block_start + 4 * (c->block_insns - 1);
        uint64_t kind = c->block_insns ? site_kind(uc, c, pc) : 0;
        spe_model_train(c, SPE_TRAIN | SPE_TRAIN_LAST | SPE_TRAIN_ADDRESS(pc),
                        kind | (uint64_t)(c->block_insns != 0) << 32);
    } else {
        spe_model_train_last(c);
    }
    for (uint64_t i = c->cap_count; i-- > 0 && i + 2 >= c->cap_count;)
        if (branch_capture(c, i))   /* (the trainer sets none for an instruction no branch) */
            spe_model_train(c, SPE_TRAIN | SPE_TRAIN_CAPTURE,
                            (uint64_t)(uintptr_t)&c->caps[i].fed);
    /* (read from memory, as feed_branch's sites: the blocks the translated code counts bring
     * the word they were translated from; the two differ only for code outside RAM, which
     * site_kind does not read and no board runs) */
    uint64_t kind = site_kind(uc, c, address + 4 * (n - 1));
    spe_model_train(c, SPE_TRAIN | SPE_TRAIN_KIND | SPE_TRAIN_ADDRESS(address), n << 32 | kind);
    c->handed_start = address;
    c->handed_insns = n;
    c->handed_valid = 1;
}

static inline void count_block(struct spe_counter *c, uint64_t address, uint64_t n)
{
    if (c->gt_table)
        spe_gt_add(c, address, n, 1);
    track_branch(c, address);
    c->block_start = address;
    c->block_insns = n;
    c->insns += n;
}

/* What the hook does besides counting: complete the last capture, then capture, stop, or
 * count the block; then derive fast_limit for the blocks after it. Kept out of line, and
 * reached by a tail call, so that the common path below needs no stack frame. */
static int watching(const struct spe_counter *c)
{
    const struct spe_control *ctl = c->control;
    return ctl && ((ctl->python & !ctl->unmask_idle) | ctl->irq);
}

/* The unmasking watch (spe_native.h): at a block entry, PSTATE.{A, I, F} bits that were set
 * at the last block watched and are clear now (an MSR DAIFClr or MSR DAIF ended the last
 * block; QEMU ends a block after MSR DAIFClr so that an interrupt is taken there): Python's
 * hook, which may stop the run in front of this block (stop_at). */
static void watch_unmask(void *uc, uint64_t address, struct spe_counter *c)
{
    uint64_t pstate = 0;
    void *value = &pstate;
    if (c->reg_read_batch(uc, &c->pstate_id, &value, 1) != 0)
        return;
    uint64_t masked = pstate & c->daif_mask, cleared = c->daif_seen & ~masked;
    c->daif_seen = masked;
    if (cleared) {
        c->unmasks++;
        c->unmask_fallback(uc, address, (uint32_t)cleared, (void *)c->control);
    }
}

_Static_assert(SPE_PMU_SOURCES == SPE_PMU_MODEL + SPE_MODEL_STATS, "PMU sources");

/* The event sources' totals now (SPE_PMU_*; instructions: those counted at block entries). */
void spe_pmu_sources(const struct spe_counter *c, uint64_t *out)
{
    out[SPE_PMU_INSNS] = c->insns;
    out[SPE_PMU_BRANCHES] = c->pmu_branches;
    out[SPE_PMU_MISPREDICTS] = c->pmu_mispredicts;
    if (c->feed) {   /* (and those the model's branch trainer counted: spe_model_train) */
        uint64_t branches, mispredicts;
        spe_model_trained(c->feed, &branches, &mispredicts);
        out[SPE_PMU_BRANCHES] += branches;
        out[SPE_PMU_MISPREDICTS] += mispredicts;
    }
    out[SPE_PMU_LOADS] = c->pmu_loads;
    out[SPE_PMU_STORES] = c->pmu_stores;
    out[SPE_PMU_EXCEPTIONS] = c->pmu_exceptions;
    out[SPE_PMU_FAULTED] = c->pmu_faulted;
    if (c->feed)
        spe_model_stats(c->feed, out + SPE_PMU_MODEL);
    else
        memset(out + SPE_PMU_MODEL, 0, SPE_MODEL_STATS * sizeof *out);
}

/* Adds the sources' growth since the last settling to pmu_counts[pmu_el]. */
void spe_pmu_settle(struct spe_counter *c)
{
    uint64_t now[SPE_PMU_SOURCES];
    spe_pmu_sources(c, now);
    for (int i = 0; i < SPE_PMU_SOURCES; i++) {
        c->pmu_counts[c->pmu_el & 3][i] += now[i] - c->pmu_mark[i];
        c->pmu_mark[i] = now[i];
    }
}

/* At a block entry while pmu_on: a change of PSTATE.EL settles the EL left (a block never
 * spans one: exception entry and return end it). */
static void pmu_track(void *uc, struct spe_counter *c)
{
    uint64_t pstate = 0;
    void *value = &pstate;
    c->pmu_last_pc = 0;
    if (c->reg_read_batch(uc, &c->pstate_id, &value, 1) != 0)
        return;
    uint64_t el = pstate >> c->el_lsb & c->el_mask;
    if (el != c->pmu_el) {
        spe_pmu_settle(c);
        c->pmu_el = el;
    }
}

static __attribute__((noinline)) void block_slow(void *uc, uint64_t address, uint64_t n,
                                                 struct spe_counter *c)
{
    if (c->trace_flush)   /* (the accesses before this block reach the model first) */
        c->trace_flush(uc);
    if (n == 0)
        return;
    if (c->pmu_on)
        pmu_track(uc, c);
    c->armed = 0;   /* (the block of a capture has run) */
    c->gt_last_pc = 0;
    if (watching(c))
        watch_unmask(uc, address, c);
    if (address & 3) {   /* a misaligned PC: Python takes the PC alignment fault at the stop */
        c->stops++;
        c->stop_block = address;
        c->stop_block_insns = n;
        c->fast_limit = 0;
        c->emu_stop(uc);
        return;
    }
    if (c->completing) {   /* the block of the last capture has run to its end */
        struct spe_capture *cap = &c->caps[c->completing - 1];
        c->completing = 0;
        cap->next_pc = address;
        if (cap->mode == SPE_AT_END && !read_regs(uc, c, cap->regs))
            cap->next_pc = 0;   /* (Python completes it from the live state) */
    }
    if (c->insns + n > c->stop_at && c->stop_at == c->poll_at && c->control
            && !c->control->irq) {
        c->stop_at = c->unpolled_at;   /* (the poll is moot: every GIC output is low) */
        c->poll_at = UINT64_MAX;
    }
    if (c->insns + n > c->stop_at && !try_capture(uc, address, n, c)) {
        c->stops++;
        c->stop_block = address;
        c->stop_block_insns = n;
        c->fast_limit = c->gt_table || watching(c) || c->pmu_on ? 0 : c->stop_at;
        c->emu_stop(uc);
        return;
    }
    if (c->feed && c->trace_blocks && !(c->pmu_on | (uint64_t)c->gt_events))
        hand_block(uc, c, address, n);
    else if (c->feed)
        feed_branch(uc, c, address, 1);
    count_block(c, address, n);
    c->fast_limit = c->completing || c->armed || c->gt_table || watching(c) || c->pmu_on
                    ? 0 : c->stop_at;
}

/* The common path, one branch: the block ends by fast_limit (so it holds no stop point and
 * no capture is completing) and starts at a 4-byte aligned PC (Arm ARM D1.3.3 PC alignment
 * checking). (A zero-size block, which Unicorn does not produce for A64 code, would only
 * record itself as the current block here.) */
/* The common path with model_feed "every" feeding: the branch that ended the last block
 * trains the predictor first (out of line, so that the path without a feed needs no stack
 * frame: a Linux boot runs it at every block; flattened, so that the model's site look-up
 * and predictor are inlined into it: 3% of a qsort program's run, which calls it at each of
 * its 25 M blocks). */
static __attribute__((noinline, flatten)) void block_fed(void *uc, uint64_t address,
                                                         uint64_t n, struct spe_counter *c)
{
    /* (feed_access feeds while c->insns < feed_until: the accesses before a block that
     * crosses it go in first) */
    if (c->insns < c->feed_until && c->insns + n >= c->feed_until && c->trace_flush)
        c->trace_flush(uc);
    /* (no capture to give the branch's outcome to: the block after a capture is armed, so
     * it takes the slow path, whose feed_branch does; with the blocks traced, the trainer
     * has the predictor: FEAT_SPE_PBT's tracking keeps the inline counter off) */
    if (c->trace_blocks)
        hand_block(uc, c, address, n);
    else
        feed_branch(uc, c, address, 0);
    track_branch(c, address);
    c->block_start = address;
    c->block_insns = n;
    c->insns += n;
}

void spe_block_hook(void *uc, uint64_t address, uint32_t size, struct spe_counter *c)
{
    uint64_t n = size >> 2, end = c->insns + n;
    if (__builtin_expect((end <= c->fast_limit) & ((address & 3) == 0), 1)) {
        if (c->feed) {
            block_fed(uc, address, n, c);
            return;
        }
        track_branch(c, address);
        c->block_start = address;
        c->block_insns = n;
        c->insns = end;
        return;
    }
    block_slow(uc, address, n, c);
}

#include <Python.h>
static struct PyModuleDef spe_counter_module = {PyModuleDef_HEAD_INIT, "_counter",
    "Native block-hook instruction counter (used through ctypes).", -1, NULL};
PyMODINIT_FUNC PyInit__counter(void) { return PyModule_Create(&spe_counter_module); }

static int cp_is(const struct uc_arm64_cp *cp, const uint32_t *e)
{
    return cp->op0 == e[0] && cp->op1 == e[1] && cp->crn == e[2] && cp->crm == e[3]
           && cp->op2 == e[4];
}

/* UC_HOOK_INSN (MRS) callback: CNTPCT_EL0 / CNTVCT_EL0 from the instruction count, and
 * CNTP_CTL_EL0 / CNTV_CTL_EL0 from the timer's parts and the instruction count, when the
 * table says the read is permitted at the current EL; the registers the filter names go to
 * the Python hook; QEMU reads the rest.
 * (Returning 1 skips the MRS with our value in Xt: QEMU knows these registers.) */
uint32_t spe_mrs_hook(void *uc, int reg, const struct uc_arm64_cp *cp,
                      struct spe_counter_reads *r)
{
    for (unsigned k = 0; r->valid && k < 4; k++) {   /* (k 0, 1: counters; 2, 3: CTL) */
        unsigned which = k & 1, ctl = k >> 1;
        if (!cp_is(cp, ctl ? r->ctl_enc[which] : r->enc[which]) || (ctl && !r->ctl_valid))
            continue;
        const struct spe_exc_model *m = r->model;
        uint64_t pstate = 0, pc = 0;
        m->reg_read(uc, m->pstate_id, &pstate);
        unsigned el = (unsigned)(pstate >> m->el_lsb) & m->el_mask;
        if (!(((ctl ? r->ctl_allowed : r->allowed) >> (2 * el + which)) & 1))
            break;
        m->reg_read(uc, m->pc_id, &pc);
        uint64_t retired = spe_retired_before(r->counter, pc), value;
        if (!ctl) {
            value = retired - r->offset[el][which];
            r->answered++;
        } else {
            uint64_t count = retired - r->ctl_offset[el][which];
            value = r->ctl[el][which];
            if ((value >> r->enable_lsb & 1) && count >= r->ctl_cval[el][which])
                value |= (uint64_t)1 << r->istatus_lsb;
            r->ctl_answered++;
        }
        m->reg_write(uc, reg, &value);
        return 1;
    }
    const struct spe_sysreg_filter *f = r->filter;
    unsigned key = spe_sysreg_key(cp);
    if (f && !spe_key_set(f->mrs, key)) {
        r->filter->skipped++;
        return 0;   /* a register no Python table answers: QEMU reads it */
    }
    return r->fallback(uc, reg, cp, r);
}

/* UC_HOOK_INSN (MSR) callback: the writes Python must see (filter->msr, or every write while
 * msr_all) go to the Python hook; the rest QEMU executes without a Python call. */
uint32_t spe_msr_hook(void *uc, int reg, const struct uc_arm64_cp *cp,
                      struct spe_sysreg_filter *f)
{
    unsigned key = spe_sysreg_key(cp);
    int sp_write = key == f->sp_key[0] || key == f->sp_key[1] || key == f->sp_key[2];
    if (!f->msr_all && (!spe_key_set(f->msr, key)
                        || (key == f->daif_key && f->control
                            && !(f->control->python | f->control->irq))
                        || (sp_write && f->sp_aligned && f->sp_align
                            && cp->val % f->sp_align == 0))) {
        f->skipped++;
        return 0;
    }
    return f->msr_fallback(uc, reg, cp, f);
}

/* An instruction cache maintenance instruction of the PE (Arm ARM C5.3, "A64 system
 * instructions for cache maintenance": IC IALLUIS, IC IALLU, IC IVAU). With several PEs
 * (f->smp; one PE's engine keeps its own code coherent and nothing else reads the log):
 * IC IVAU (op1 3, CRm 5, op2 1) logs the physical address range of the line its Xt names,
 * as the PE translates it now (spe_ic_replay), and its own engine drops that range; IC IALLU
 * (op1 0, CRm 5, op2 0) is the PE's own unless iallu_broadcast, any other counts in ic_all,
 * and both make the run stop for its own engine's flush (see spe_sysreg_filter). */
static void ic_seen(void *uc, const struct uc_arm64_cp *cp, struct spe_sysreg_filter *f)
{
    uint64_t pa;
    f->ic_seen++;
    if (!f->smp)
        return;
    if (cp->op1 == 3 && cp->crm == 5 && cp->op2 == 1
        && f->vmem_translate(uc, cp->val, 1 /* UC_PROT_READ */, &pa) == 0) {
        uint64_t lo = pa & ~(f->ic_line - 1), hi = lo + f->ic_line;
        if (f->ctl(uc, f->ctl_remove_phys, lo, hi) != 0) {
            f->ic_flush_own = 1;   /* (a library without the control: all its code) */
            f->emu_stop(uc);
        }
        if (f->ic_logged) {
            __typeof__(f->ic_log[0]) *last = &f->ic_log[(f->ic_logged - 1) % SPE_IC_LOG];
            if (lo >= last->lo && lo <= last->hi) {
                last->hi = hi > last->hi ? hi : last->hi;
                return;
            }
        }
        __typeof__(f->ic_log[0]) *next = &f->ic_log[f->ic_logged++ % SPE_IC_LOG];
        next->lo = lo;
        next->hi = hi;
        return;
    }
    if (!(cp->op1 == 0 && cp->crm == 5 && cp->op2 == 0) || f->iallu_broadcast)
        f->ic_all++;
    f->ic_flush_own = 1;
    f->emu_stop(uc);
}

/* Drops from the engine uc the translated code of the ranges f's PE logged (IC IVAU) since
 * it had logged `from` of them, through f's uc_ctl and control (the same library's for
 * every PE: UC_CTL_WRITE(UC_CTL_TB_REMOVE_CACHE_PHYS, 2), patches/unicorn/0012). The range
 * logged last before then is dropped again: it may have grown since. Returns how many ranges
 * it dropped, or -1 when some are no longer in the log or uc_ctl refused one (Unicorn
 * without the patch): the caller then drops all the engine's code. */
int64_t spe_ic_replay(void *uc, const struct spe_sysreg_filter *f, uint64_t from)
{
    if (from)
        from--;
    if (f->ic_logged - from > SPE_IC_LOG)
        return -1;
    for (uint64_t n = from; n < f->ic_logged; n++) {
        const __typeof__(f->ic_log[0]) *r = &f->ic_log[n % SPE_IC_LOG];
        if (f->ctl(uc, f->ctl_remove_phys, r->lo, r->hi) != 0)
            return -1;
    }
    return (int64_t)(f->ic_logged - from);
}

/* UC_HOOK_INSN (SYS) callback: the operations Python acts on (filter->sys: TLBI, IC) go to
 * the Python hook; the rest (DC ZVA, DC CVAU, AT ...) QEMU executes without a Python call. */
uint32_t spe_sys_hook(void *uc, int reg, const struct uc_arm64_cp *cp,
                      struct spe_sysreg_filter *f)
{
    unsigned key = spe_sysreg_key(cp);
    if (spe_key_set(f->sys, key)) {
        if (cp->crn == f->code_crn)
            ic_seen(uc, cp, f);
        else
            f->tlbi_seen++;
    }
    if (!f->sys_all && (!f->sys_cache || !spe_key_set(f->sys, key)
                        || (cp->crn == f->code_crn && !f->sys_code))) {
        f->skipped++;
        return 0;
    }
    return f->sys_fallback(uc, reg, cp, f);
}

/* The indexes of the little-endian 32-bit words of code[0 .. 4 * nwords) that match any
 * (masks[i], values[i]) of the npat patterns (word & mask == value), in order, into out[0 ..
 * cap), and the words themselves into words[0 .. cap); returns how many match (more than
 * cap: only the first cap are stored). The patterns are Python's (native.word_match's
 * callers: control_offsets, sync_checks' DC ZVA and SP writers, the fed branches). */
uint64_t spe_word_match(const uint8_t *code, uint64_t nwords, const uint32_t *masks,
                        const uint32_t *values, uint32_t npat, uint64_t *out, uint32_t *words,
                        uint64_t cap)
{
    uint64_t found = 0;
    for (uint64_t i = 0; i < nwords; i++) {
        const uint8_t *b = code + 4 * i;
        uint32_t w = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16
                     | (uint32_t)b[3] << 24;
        for (uint32_t p = 0; p < npat; p++) {
            if ((w & masks[p]) == values[p]) {
                if (found < cap) {
                    out[found] = i;
                    words[found] = w;
                }
                found++;
                break;
            }
        }
    }
    return found;
}
