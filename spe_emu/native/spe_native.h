/*
 * Shared declarations of the native run-loop helpers: the block-hook counter (counter.c) and
 * the record builder for captured samples (record.c). Python mirrors these structs with
 * ctypes (spe_emu/native/__init__.py); the loader checks their sizes.
 */
#ifndef SPE_NATIVE_H
#define SPE_NATIVE_H

#include <stdint.h>

#define SPE_CAP_MAX 256     /* captures held before the hook stops for Python */
#define SPE_CAP_REGS 33     /* X0-X30, SP, NZCV (the order of Python's CAPTURE_REGS) */
#define SPE_VERDICTS 4096   /* verdict table slots (power of two) */
#define SPE_PROBES 8
#define SPE_STEPS 4096      /* evaluation steps of the verdicts' plans */

typedef int (*spe_stop_fn)(void *uc);
typedef int (*spe_read_batch_fn)(void *uc, const int *regs, void **vals, int count);
typedef int (*spe_translate_fn)(void *uc, uint64_t va, int prot, uint64_t *pa);
typedef int (*spe_mem_read_fn)(void *uc, uint64_t pa, void *bytes, uint64_t size);
typedef int (*spe_ctl_fn)(void *uc, uint32_t control, ...);   /* uc_ctl */

/* How a sample is observed (Machine.PREDICT_*): registers at the start of its block, or at
 * the start of the next block entered (its end), which also gives the PC a final branch went
 * to. */
#define SPE_AT_START 1
#define SPE_NEXT_PC 2
#define SPE_AT_END 3
/* ... or the registers at the start of its block with the earlier instructions that compute
 * its operands evaluated (a plan of steps; the capture is then SPE_AT_START). */
#define SPE_EVAL 4

/* Data address forms (spe_emu.cpu.a64 BaseOffset, Literal, RegisterOffset) */
#define SPE_ADDR_NONE 0
#define SPE_ADDR_BASE 1
#define SPE_ADDR_LITERAL 2
#define SPE_ADDR_REGOFF 3

/* Index register extension (a64.EXTEND_*) */
#define SPE_EXTEND_LSL 0
#define SPE_EXTEND_UXTW 1
#define SPE_EXTEND_SXTW 2

/* The data address of an address form on captured registers (slots), at instruction pc. */
static inline uint64_t spe_address(uint8_t form, uint8_t base, uint8_t index, uint8_t extend,
                                   uint8_t shift, uint64_t offset, const uint64_t *regs,
                                   uint64_t pc)
{
    if (form == SPE_ADDR_LITERAL)
        return pc + offset;
    if (form == SPE_ADDR_BASE)
        return regs[base] + offset;
    uint64_t value = regs[index];
    if (extend == SPE_EXTEND_UXTW)
        value &= 0xFFFFFFFFull;
    else if (extend == SPE_EXTEND_SXTW)
        value = (uint64_t)(int64_t)(int32_t)(uint32_t)value;
    return regs[base] + (value << shift);
}

/* One evaluation step (spe_emu.cpu.a64.Step.op); registers are capture slots (NZCV:
 * SPE_NZCV_SLOT). */
#define SPE_NZCV_SLOT 32
#define SPE_STEP_ADD 1
#define SPE_STEP_SUB 2
#define SPE_STEP_MOV 3      /* src 0xFF: XZR */
#define SPE_STEP_LOAD 4     /* dst 0xFF: XZR */
#define SPE_NO_REG 0xFF

struct spe_step {
    uint64_t imm;           /* ADD/SUB: the immediate; load: the address offset */
    uint64_t mask;          /* ADD/SUB/MOV: the result mask (32 or 64 bits) */
    uint64_t wb;            /* load with writeback: the base register's increment */
    uint16_t at;            /* the instruction's byte offset in its block */
    uint8_t kind, dst, src; /* SPE_STEP_*; dst, src: SPE_NO_REG for XZR; src: the first
                               source (load: the base) */
    uint8_t index, form, extend, shift;  /* load: the address form (SPE_ADDR_*); ADD/SUB
                               with a register: its shift amount */
    uint8_t size;           /* load: bytes */
    uint8_t sext;           /* load: sign-extend to 32 or 64 bits, or 0 */
    uint8_t writeback;      /* load: pre/post-index */
    uint8_t op2;            /* ADD/SUB: the second source register, SPE_NO_REG: imm */
    uint8_t shift_type;     /* ADD/SUB with a register: LSL 0, LSR 1, ASR 2 */
    uint8_t flags;          /* ADDS/SUBS: NZCV is written too */
};

struct spe_capture {
    uint64_t index;                 /* instruction number of the sampled instruction */
    uint64_t pc;                    /* its address */
    uint64_t mode;                  /* SPE_AT_START, SPE_NEXT_PC or SPE_AT_END */
    uint64_t next_pc;               /* first block entered after it (0: not yet) */
    uint64_t regs[SPE_CAP_REGS];    /* register values (at the start or end of its block) */
    /* model_feed "every": what the model gave the sampled operation itself as it executed
     * (SPE_FED_NONE: nothing yet): a load/store's spe_model_access outcome, from its first
     * access (spe_model_hook); a branch's spe_model_branch verdict, 1 mispredicted, from the
     * predictor as the branch found it (block_slow, before the branch trains it) */
    uint64_t fed;
};
#define SPE_FED_NONE (~0ull)

struct spe_verdict {
    uint64_t pc;                    /* block address (0: empty slot) */
    uint32_t n;                     /* block length */
    uint16_t k;                     /* sampled instruction in it */
    uint16_t mode;                  /* SPE_AT_START, SPE_NEXT_PC, SPE_AT_END or SPE_EVAL */
    uint16_t plan, plan_len;        /* SPE_EVAL: its steps, steps[plan .. plan + plan_len) */
};

struct spe_gt_entry;

struct spe_control;
/* The PMU's event sources (struct spe_counter pmu_*; Python: native.PMU_SOURCES):
 * instructions of every block entered, branches executed and mispredicted, load and store
 * instructions (each counted once, by its first access), exceptions taken (counted in the EL
 * taken from), instructions that took a synchronous exception with themselves as the
 * preferred return address (not architecturally executed: INST_RETIRED is instructions minus
 * these), then the model's SPE_STAT counts. */
#define SPE_PMU_INSNS 0
#define SPE_PMU_BRANCHES 1
#define SPE_PMU_MISPREDICTS 2
#define SPE_PMU_LOADS 3
#define SPE_PMU_STORES 4
#define SPE_PMU_EXCEPTIONS 5
#define SPE_PMU_FAULTED 6
#define SPE_PMU_MODEL 7
#define SPE_PMU_SOURCES 14   /* SPE_PMU_MODEL + SPE_MODEL_STATS */

struct spe_counter {
    uint64_t insns;        /* instructions of every block entered so far */
    uint64_t fast_limit;   /* the hook counts a block without more checks if it ends by this
                            * instruction number: stop_at, or 0 while a capture is completing
                            * or after Python changed stop_at (block_slow derives it again) */
    uint64_t block_start;  /* address of the block being executed */
    uint64_t block_insns;  /* its length in instructions */
    uint64_t stop_at;      /* stop before the block holding instruction #stop_at */
    spe_stop_fn emu_stop;  /* uc_emu_stop from libunicorn */
    uint64_t stops;        /* number of stops requested by this hook */
    uint64_t stop_block;   /* address of the block we stopped in front of */
    uint64_t stop_block_insns; /* its length in instructions */
    /* captured samples */
    uint64_t event_at;     /* the planned interval event */
    uint64_t gap;          /* members from one event to the next; 0: no captures */
    uint64_t limit;        /* no capture in a block that ends past this instruction number */
    uint64_t cap_budget;   /* captures allowed before the Profiling Buffer needs a check */
    uint64_t cap_count;    /* captures in caps[] */
    uint64_t completing;   /* 1 + the capture waiting for the next block entry, or 0 */
    spe_read_batch_fn reg_read_batch;  /* uc_reg_read_batch from libunicorn */
    int32_t reg_ids[SPE_CAP_REGS + 1]; /* Unicorn ids of the captured registers (+ padding) */
    /* evaluation of SPE_EVAL plans: loads read RAM only, through the current regime */
    spe_translate_fn vmem_translate;   /* uc_vmem_translate from libunicorn */
    spe_mem_read_fn mem_read;          /* uc_mem_read from libunicorn */
    uint64_t ram_base, ram_size;       /* bytes */
    uint64_t step_count;               /* steps[] in use */
    uint64_t evaluated;                /* captures whose operands a plan evaluated */
    /* ground truth (spe-emu run --ground-truth): executions per (block address, length) in an
     * open-addressing table of gt_cap entries (a power of two; NULL: off, and the common
     * path of the hook never looks at it) */
    struct spe_gt_entry *gt_table;
    uint64_t gt_cap;       /* entries in gt_table */
    uint64_t gt_used;      /* entries in use */
    /* Unmasking watch (instead of a code hook on every MSR DAIFClr): while `control` says
     * Python has work (and the watch is not idle), every block takes the slow path, which
     * reads PSTATE and calls unmask_fallback (Machine._on_unmask) when one of daif_mask's bits (PSTATE.{A, I, F})
     * set at the last block watched is clear now, passing those bits as its size argument;
     * NULL control: no watch (raw loop) */
    const struct spe_control *control;
    void (*unmask_fallback)(void *uc, uint64_t address, uint32_t size, void *user_data);
    uint64_t daif_mask;
    uint64_t daif_seen;    /* daif_mask's bits set at the last block watched */
    int32_t pstate_id;     /* Unicorn's id of PSTATE */
    int32_t pad;
    uint64_t unmasks;      /* unmaskings seen (calls of unmask_fallback) */
    /* FEAT_SPE_PBT (pbt_on): a block entered anywhere but where the block before it ended
     * was reached by a taken branch (or an exception entry or return): its address, and 1 +
     * the instructions retired before it (0: none yet) */
    uint64_t pbt_on;
    uint64_t pbt_target;
    uint64_t pbt_insns;
    /* A masked-interrupt poll (Machine._poll_at): stop_at was planned as poll_at, the stop
     * point without the poll being unpolled_at; when the run reaches it after the native GIC
     * path lowered every output (control->irq == 0), nothing is left to poll for: the run
     * goes on to unpolled_at and poll_at becomes UINT64_MAX (none). */
    uint64_t poll_at;
    uint64_t unpolled_at;
    /* model_feed "every" (feed != NULL): every block counted trains the branch predictor of
     * `feed` with the branch that ended the block counted before it (spe_feed_branch), and a
     * capture arms the memory hook (spe_model_hook, whose user data is this counter) for the
     * first access of the captured instruction: armed = 1 + its capture, armed_pc its PC
     * (0: none). While armed, the next block takes the slow path, which disarms. */
    struct spe_model *feed;
    uint64_t armed;
    uint64_t armed_pc;
    int (*reg_read)(void *uc, int regid, void *value);   /* uc_reg_read */
    int32_t pc_id;         /* Unicorn's id of PC */
    int32_t pad2;
    /* Ground truth of the model (spe-emu run --ground-truth with model_feed "every"): per PC,
     * what the model gave each execution of the instruction there (SPE_GTE_*), in an
     * open-addressing table of gt_events_cap entries (a power of two; NULL: off) that grows
     * at half full. A load/store's outcome is its first access's: gt_last_pc is the PC of
     * the last access recorded in the block being executed (0 at each block entry). */
    struct spe_gt_event *gt_events;
    uint64_t gt_events_cap, gt_events_used;
    uint64_t gt_last_pc;
    /* model_feed "every": accesses and branches feed `feed` while insns < feed_until (the
     * Profiling Buffer enabled: NEVER; disabled: SpeConfig.model_feed_linger instructions more;
     * the reference loop, which counts no blocks here, sets 0 when that has run out) */
    uint64_t feed_until;
    /* PMUv3 (spe_emu/devices/pmu.py): while pmu_on, every block takes the slow path, which
     * reads PSTATE.EL and, when it changed, adds the growth of each event source (SPE_PMU_*)
     * since the last change (pmu_mark) to pmu_counts[the EL left] (spe_pmu_settle): the
     * events of each Exception level, for the counters' filters. The branch and load/store
     * sources grow only while the model is fed (feed, feed_until). */
    uint64_t pmu_on;
    uint32_t el_lsb, el_mask;    /* PSTATE.EL in Unicorn's PSTATE (Python's table) */
    uint64_t pmu_el;
    uint64_t pmu_last_pc;        /* PC of the last access counted (0 at each block entry) */
    uint64_t pmu_branches, pmu_mispredicts, pmu_loads, pmu_stores, pmu_exceptions;
    uint64_t pmu_faulted;
    uint64_t pmu_mark[SPE_PMU_SOURCES];
    uint64_t pmu_counts[4][SPE_PMU_SOURCES];
    /* uc_mem_trace_flush from the patched libunicorn (patches/unicorn/0011; NULL: none): the
     * memory trace's buffer is handed to spe_model_trace_batch before the hook does anything
     * that depends on the accesses made before the block (block_slow, feed_until) */
    void (*trace_flush)(void *uc);
    /* uc_mem_trace_blocks of the patched libunicorn (patches/unicorn/0014; trace_blocks 1):
     * a block the translated code counts (uc_hook_block_counter's fast path) is an entry of
     * the memory trace, which spe_model_trace_batch hands to the model's branch trainer
     * (docs/model.md "Branch prediction") and from which it sets block_start and block_insns;
     * block_slow hands the blocks the hook is called for. handed_start and handed_insns: the
     * block the trainer was handed last (valid when handed_valid), so that it can be told
     * which instruction ran last when an exception or a stop changed block_insns since
     * (spe_model_train_last). */
    uint64_t trace_blocks;
    uint64_t handed_start, handed_insns, handed_valid;
    /* blocks went to the trainer through the model's thread since feed_branch last trained
     * the predictor itself (which then waits for that thread first) */
    uint64_t trainer_live;
    /* (the tables last: the fields above, which the hook reads at every block, stay in a few
     * cache lines) */
    struct spe_capture caps[SPE_CAP_MAX];
    struct spe_verdict verdicts[SPE_VERDICTS];
    struct spe_step steps[SPE_STEPS];
};

void spe_pmu_settle(struct spe_counter *c);
void spe_pmu_sources(const struct spe_counter *c, uint64_t *out);

/* What the model gave the executions of the instruction at pc (SPE_GTE_* counts). */
#define SPE_GTE_OPS 0          /* loads/stores (each execution, by its first access) */
#define SPE_GTE_L1D_REFILL 1   /* ... whose line the L1D did not hold */
#define SPE_GTE_LLC_ACCESS 2   /* ... nor the L2 */
#define SPE_GTE_LLC_MISS 3     /* ... nor the LLC */
#define SPE_GTE_WALK 4         /* ... whose page the TLB did not hold */
#define SPE_GTE_BRANCHES 5     /* branch executions */
#define SPE_GTE_MISPRED 6      /* ... the predictor mispredicted */
#define SPE_GTE_FAULTED 7      /* executions that took a synchronous exception returning to
                                  the instruction (not architecturally executed) */
#define SPE_GTE_COUNTS 8
struct spe_gt_event {
    uint64_t pc;               /* 0: an empty slot */
    uint64_t n[SPE_GTE_COUNTS];
};
void spe_gt_event(struct spe_counter *c, uint64_t pc, int outcome, int mispredicted);
/* The instruction at insn took a synchronous exception; pc: the preferred return address.
 * When they are the same (not SVC, HVC, SMC) and the instruction was counted (`counted`; -1:
 * it is in the block being executed, as in the fast loop), it was not architecturally
 * executed: the PMU's INST_RETIRED leaves it out (pmu_faulted), and the ground truth says so
 * (SPE_GTE_FAULTED) while it counts it among the executions, as SPE's population does. */
void spe_exception_from(struct spe_counter *c, uint64_t insn, uint64_t pc, int counted);

/* One ground-truth entry: the block at addr of n instructions was entered count times
 * (n == 0: an empty slot). */
struct spe_gt_entry {
    uint64_t addr;
    uint64_t n;
    uint64_t count;
};

/* Instructions retired before the instruction at addr of the block the hook entered last
 * (the hook counts a whole block on entry). Machine._retired_before has the same rule for
 * Python's hooks; tests/test_counter_reads.py holds them equal. */
static inline uint64_t spe_retired_before(const struct spe_counter *c, uint64_t addr)
{
    return c->insns - c->block_insns + (addr - c->block_start) / 4;
}

/* counter.c: the instruction at insn takes a synchronous exception. */
uint64_t spe_retired_through(const struct spe_counter *c, uint64_t insn);
uint64_t spe_end_block_at(struct spe_counter *c, uint64_t insn);

/* ---- record.c: records of captured samples ------------------------------------------ */

/* Operation kinds of a record template (what record.c builds; SPE_TPL_PYTHON: Python does) */
#define SPE_TPL_OTHER 1
#define SPE_TPL_LDST 2
#define SPE_TPL_BRANCH 3
#define SPE_TPL_PYTHON 4

/* Branch flags */
#define SPE_BR_COND 1       /* conditional (B.cond, CBZ/CBNZ, TBZ/TBNZ) */
#define SPE_BR_INDIRECT 2
#define SPE_BR_RETURN 4     /* RET*, ERET */
#define SPE_BR_BRANCH 8     /* any branch (a site's kind; 0: the instruction is no branch) */
#define SPE_BR_CALL 16      /* BL, BLR, BLRAA...: pushes its return address */
#define SPE_BR_ERET 32      /* ERET, ERETAA/AB (with RETURN): not on the return stack */
/* Encodings of branches model.c holds (Python's spe_emu.spe.records.BRANCH_ENCODINGS): word &
 * mask == value gives kind (SPE_BR_* | SPE_BR_BRANCH) */
#define SPE_ENCODINGS 32

#define SPE_TEMPLATES 4096  /* template table slots (power of two) */

/* What one instruction (at pc, in el/ns) puts in its record, decided once by Python. */
struct spe_template {
    uint64_t pc;
    uint64_t offset;        /* data address: immediate or literal offset (modulo 2^64) */
    uint64_t target;        /* conditional direct branch: its target */
    uint8_t el;
    uint8_t ns;
    uint8_t kind;           /* SPE_TPL_* */
    int8_t cond;            /* other: the condition code it checks, -1: unconditional */
    uint8_t addr;           /* SPE_ADDR_* */
    uint8_t base;           /* capture slot of the base register */
    uint8_t index;          /* capture slot of the index register */
    uint8_t extend;         /* SPE_EXTEND_* */
    uint8_t shift;
    uint8_t store_only;     /* a store that is not also a load */
    uint8_t branch;         /* SPE_BR_* */
    uint8_t optypes;        /* the OpType bits (1 << value) the FT filter sees */
    uint8_t head_len;
    uint8_t head[19];       /* the PC packet and the Operation Type packet, encoded */
};

/* Why spe_record_captures() stopped */
#define SPE_REC_DONE 0      /* every capture recorded */
#define SPE_REC_DROP 1      /* the capture lies past insn_index: it and the rest are dropped */
#define SPE_REC_TEMPLATE 2  /* no template for the capture's instruction yet */
#define SPE_REC_PYTHON 3    /* Python records this capture */
#define SPE_REC_ORDER 4     /* the capture is not at the expected instruction number */
#define SPE_REC_XLATE 5     /* no translation of xlate_va for a Physical Address packet yet */

#define SPE_XLATES 512      /* translation slots (power of two) */
#define SPE_PA_NONE (~0ull) /* no Physical Address packet */

/* ---- model.c: the micro-architecture model ------------------------------------------ */

/* An outcome of spe_model_access: the TLB walked, and the level that held the line */
#define SPE_OUT_WALK 1
#define SPE_OUT_LEVEL_SHIFT 1
#define SPE_LEVEL_L1D 0
#define SPE_LEVEL_L2 1
#define SPE_LEVEL_LLC 2
#define SPE_LEVEL_DRAM 3
#define SPE_LEVEL_PEER 4   /* another PE's cache held the line modified (spe_model_join) */
#define SPE_UC_MEM_WRITE 17 /* Unicorn's UC_MEM_WRITE: the memory hook's type of a store */
/* Counts of recorded accesses: per level that held the line (SPE_LEVEL_*), then these */
#define SPE_STAT_ACCESSES 5
#define SPE_STAT_WALKS 6
#define SPE_MODEL_STATS 7
#define SPE_OUTCOMES 10    /* spe_model_access outcomes: WALK | 5 levels */

struct spe_model;
int spe_model_access(struct spe_model *m, uint64_t line, int update);
int spe_model_access_rw(struct spe_model *m, uint64_t line, int update, int store);
int spe_model_join(struct spe_model **models, uint32_t n);
int spe_model_target_swap(struct spe_model *m, uint64_t pc, uint64_t target, uint64_t *old);
int spe_model_branch(struct spe_model *m, uint32_t kind, uint64_t pc, uint64_t target,
                     int taken, int update);
/* The branch sites (spe_model_site_kind): what ends a block, as SPE_BR_* flags with
 * SPE_BR_BRANCH for a branch (0: not a branch), from Python's table of encodings
 * (spe_emu.spe.records.BRANCH_ENCODINGS, given by spe_model_set_encodings) */
int spe_model_site_kind(struct spe_model *m, uint64_t pc, uint32_t *kind);
uint32_t spe_model_classify(const struct spe_model *m, uint32_t word);
void spe_model_site_add(struct spe_model *m, uint64_t pc, uint32_t kind);
void spe_model_sites_clear(struct spe_model *m);
#define SPE_SITE_NO_BRANCH (-2)
#define SPE_SITE_UNKNOWN (-3)
int spe_model_feed_branch(struct spe_model *m, uint64_t pc, uint64_t next);
/* The branch trainer's entries (spe_model_train; the model's thread has them in its ring):
 * w0 is SPE_TRAIN | its type | an address's bits [55:0].
 *  - SPE_TRAIN_WORD: a block starts at the address, w1 = its length in instructions << 32 |
 *    the word of its last instruction (the translated code's, uc_mem_trace_blocks); the branch
 *    that ended the block before it (if any) trains the predictor with its outcome;
 *  - SPE_TRAIN_KIND: the same, w1's bits [31:0] being that instruction's kind (SPE_BR_*);
 *  - SPE_TRAIN_LAST: the instruction that ran last is at the address (an exception or a stop
 *    ended its block there), of kind w1[31:0]; w1 bit 32 clear: none ran;
 *  - SPE_TRAIN_CAPTURE: w1 is a capture's &spe_capture.fed, which takes the next branch's
 *    verdict before it trains (one of the last two captures: block_slow). */
#define SPE_TRAIN ((uint64_t)1 << 62)
#define SPE_TRAIN_WORD ((uint64_t)0 << 60)
#define SPE_TRAIN_KIND ((uint64_t)1 << 60)
#define SPE_TRAIN_LAST ((uint64_t)2 << 60)
#define SPE_TRAIN_CAPTURE ((uint64_t)3 << 60)
#define SPE_TRAIN_ADDRESS(a) ((a) & (((uint64_t)1 << 56) - 1))
void spe_model_train(struct spe_counter *c, uint64_t w0, uint64_t w1);
void spe_model_train_last(struct spe_counter *c);
/* The branches the trainer has trained and found mispredicted (the PMU's sources). */
void spe_model_trained(struct spe_model *m, uint64_t *branches, uint64_t *mispredicts);
void spe_model_stats(struct spe_model *m, uint64_t *out);
void spe_model_sync(struct spe_model *m);
void spe_model_sync_all(struct spe_model *m);
void spe_model_set_encodings(struct spe_model *m, const uint32_t *masks, const uint32_t *values,
                             const uint32_t *kinds, uint32_t n);

static inline uint32_t hash64(uint64_t key, uint32_t mask)
{
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

struct spe_recorder {
    /* set by Python for each drain */
    uint64_t insn_index;    /* the instruction number of the stop or hook */
    uint64_t next_pc;       /* where the run goes on (a branch whose next block is unknown) */
    uint64_t expect;        /* instruction number of the next capture */
    uint64_t gap;           /* members from one capture to the next */
    uint32_t el, ns;        /* Exception level and Security state of every capture */
    uint32_t timestamp;     /* CollectTimeStamp(): end records with a Timestamp packet */
    uint32_t collect_pa;    /* CollectPhysicalAddress(): loads/stores get a PA packet */
    uint32_t prefix_len;
    uint8_t prefix[16];     /* Context packets that start every record */
    /* fixed for the machine */
    uint32_t align;         /* records are padded to this many bytes (2**PMBIDR_EL1.Align) */
    uint32_t not_taken_target;
    uint8_t hdr_target, hdr_va, hdr_total, hdr_issue, hdr_xlat, hdr_timestamp, hdr_end, pad0;
    uint8_t hdr_events[4];  /* Events packet header for a 1, 2, 4, 8-byte payload */
    uint32_t ev_retired, ev_not_taken, ev_mispred;  /* E[n] bit numbers */
    uint32_t lat_store, lat_mispredict, lat_issue;  /* latencies of the model (cycles) */
    /* a load/store by its spe_model_access outcome: Events bits, execution and XLAT cycles
     * (spe_emu.spe.records.outcome_table) */
    uint64_t outcome_events[SPE_OUTCOMES];
    uint32_t outcome_execute[SPE_OUTCOMES], outcome_xlat[SPE_OUTCOMES];
    uint32_t counter_max;           /* a saturated Counter packet value (12-bit: 0xFFF) */
    /* results */
    uint64_t out_len;       /* bytes of padded records in out */
    uint64_t records;       /* records in out */
    uint64_t reason;        /* SPE_REC_* of the last call */
    /* owned storage (spe_recorder_init / spe_recorder_free) */
    uint8_t *out;
    uint64_t out_size;
    struct spe_model *model;    /* the machine's (not owned) */
    struct spe_template *templates;
    uint8_t *template_used; /* SPE_TEMPLATES flags: the slot holds a template */
    /* set by Python for each drain: the system counter is the instruction number plus the
     * ticks the PE spent waiting (platform/clock.py); a Timestamp packet holds the counter */
    uint64_t ts_offset;
    /* set by Python for each drain: PMSFCR_EL1.FT's OR filter, the OpType bits of the
     * types selected (0: no filter; spe_emu.spe.filters.collect_record). A record of any
     * other operation is built (the model sees the operation) and discarded. */
    uint64_t type_filter;
    uint64_t filtered;      /* results: records discarded by type_filter */
    /* fixed: the Physical Address packet's header, address mask and NS bit */
    uint64_t hdr_pa, pa_mask, pa_ns;
    /* translations of data pages for PA packets, filled by Python (Machine._translate) on
     * SPE_REC_XLATE and emptied with Python's: tag = (VA >> 12) << 2 | regime, plus 1 (0:
     * empty); the PA page. (A translation that faults is not kept, as Python's cache keeps
     * none: Python records that capture.) */
    uint64_t xlate_va;      /* results: the data address of SPE_REC_XLATE */
    uint64_t xlate_regime;  /* set by Python for each drain: the data addresses' regime */
    uint64_t xlate_tag[SPE_XLATES];
    uint64_t xlate_pa[SPE_XLATES];
    /* fixed: model_feed "every": a load/store or branch record takes its outcome from the
     * capture (spe_capture.fed; Python records a capture without one) */
    uint64_t feed_every;
};

/* Counter reads answered natively (counter.c spe_mrs_hook): MRS CNTPCT_EL0 (which 0) and
 * CNTVCT_EL0 (which 1). Python fills it from the registered owner's own access checks and
 * values (spe_emu.cpu.machine, Machine._fill_counter_reads): `allowed` bit 2 * EL + which
 * says the read is permitted at that EL, and the value is the instructions retired before
 * the MRS minus offset[EL][which] (mod 2^64). valid == 0: every MRS goes to `fallback` (the
 * Python hook), which fills the table again. */
struct uc_arm64_cp {        /* Unicorn's uc_arm64_cp_reg */
    uint32_t crn, crm, op0, op1, op2;
    uint64_t val;
};
typedef uint32_t (*spe_sys_hook_fn)(void *uc, int reg, const struct uc_arm64_cp *cp,
                                    void *user_data);
typedef int (*spe_reg_io_fn)(void *uc, int regid, void *value);

struct spe_exc_model;
struct spe_counter_reads {
    uint64_t valid;
    uint64_t allowed;
    uint64_t offset[4][2];
    struct spe_counter *counter;
    /* the register ids, PSTATE.EL and uc_reg_read/uc_reg_write of exception entry's model */
    const struct spe_exc_model *model;
    spe_sys_hook_fn fallback;   /* the Python MRS hook */
    uint64_t answered;          /* reads answered natively (for tests and benchmarks) */
    /* From Python's tables, so no encoding is written here twice: the two counters'
     * encodings (op0, op1, CRn, CRm, op2; COUNTER_READS). */
    uint32_t enc[2][5];
    struct spe_sysreg_filter *filter;   /* MRS encodings Python answers */
    /* Timer control reads, MRS CNTP_CTL_EL0 (which 0) and CNTV_CTL_EL0 (which 1), while
     * valid and ctl_valid (Python clears ctl_valid at every write of a timer register):
     * ctl_allowed bit 2 * EL + which says the read is permitted at that EL and reaches a
     * timer; the value is ctl[EL][which] with ISTATUS set when its ENABLE bit is set and the
     * count the timer compares -- the instructions retired before the MRS minus
     * ctl_offset[EL][which] -- has reached ctl_cval[EL][which] (unsigned; generic_timer.py
     * timer_output, GenericTimer.ctl_parts: the timer an EL's access reaches). */
    uint64_t ctl_valid, ctl_allowed;
    uint64_t ctl[4][2], ctl_cval[4][2], ctl_offset[4][2];
    uint32_t ctl_enc[2][5];
    uint32_t enable_lsb, istatus_lsb;
    uint64_t ctl_answered;      /* CTL reads answered natively */
};

/* ---- exception.c: exception entry (AArch64.TakeException) and the INTR hook ----------- */

/* Where exception entry finds its registers and PSTATE fields: Unicorn register ids and
 * CP-register encodings, indexed by Exception level (index 0 unused except sp_el), and field
 * positions -- all filled by Python from its register tables (spe_emu.native.exception_model),
 * so no encoding or field is written here twice. */
struct spe_exc_model {
    int32_t pc_id, sp_id, pstate_id, cp_id;   /* UC_ARM64_REG_PC, _SP, _PSTATE, _CP_REG */
    int32_t sp_el[4], elr[4], esr[4], far[4], vbar[4];
    uint32_t spsr_enc[4][5], sctlr_enc[4][5], hcr_enc[5];   /* op0, op1, CRn, CRm, op2 */
    /* PSTATE (SPSR layout): EL (lsb, width-mask), SP, the bits entry sets (D, A, I, F) and
     * clears (SS, IL, BTYPE, UAO), PAN */
    uint32_t el_lsb, el_mask, sp_bit, pan_bit;
    uint64_t entry_set, entry_clear;
    uint32_t span_bit;                        /* SCTLR_ELx.SPAN */
    uint32_t e2h_bit, tge_bit;                /* HCR_EL2.E2H, HCR_EL2.TGE */
    spe_reg_io_fn reg_read, reg_write;        /* uc_reg_read / uc_reg_write */
};

/* What spe_take_exception did (spe_emu.cpu.exceptions.ExceptionEntry) */
struct spe_exc_entry {
    uint64_t from_el, spsr, vector;
};

/* Offsets of the exception types inside a vector-table quarter (Arm ARM D1.10.2; Python's
 * spe_emu.cpu.exceptions.VectorKind) */
#define SPE_VECTOR_IRQ 0x080
#define SPE_VECTOR_FIQ 0x100

/* spe_take_exception flags */
#define SPE_EXC_SYNDROME 1   /* write ESR_ELx = syndrome */
#define SPE_EXC_FAR 2        /* write FAR_ELx = far */

typedef void (*spe_intr_fn)(void *uc, uint32_t intno, void *user_data);
struct spe_gic;
struct spe_control;
typedef int (*spe_context_save_fn)(void *uc, void *context);

/* The INTR hook (spe_intr_hook): synchronous exceptions QEMU raised, taken natively where
 * nothing of Python's is involved; everything else goes to `fallback` (Machine._on_intr). */
struct spe_intr {
    const struct spe_exc_model *model;
    struct spe_counter *counter;
    spe_intr_fn fallback;                 /* the Python INTR hook */
    spe_context_save_fn context_save;     /* uc_context_save */
    void *context;                        /* a uc_context of this engine */
    uint64_t exc_offset;                  /* CPUARMState.exception in it (qemu_state.py) */
    spe_translate_fn vmem_translate;      /* uc_vmem_translate */
    spe_mem_read_fn mem_read;             /* uc_mem_read */
    uint32_t native;                      /* 0: every exception goes to fallback */
    uint32_t enabled_els;                 /* bit n: profiling is enabled at ELn (then Python) */
    uint64_t native_intnos;               /* bit n: QEMU exception n may be taken here */
    uint64_t after_insn_intnos;           /* bit n: the PC is after the instruction (SVC...) */
    uint32_t psci_intno;                  /* HVC or SMC of the PSCI conduit (EL > 0: Python) */
    uint32_t undef_intno;
    uint64_t far_ecs;                     /* bit n: ESR_ELx.EC n reports FAR_ELx */
    uint32_t ec_lsb, ec_mask;             /* ESR_ELx.EC */
    /* Aborts Python looks at again (SyncChecks.refine_abort): EC in abort_ecs with ISS.FSC
     * in python_fscs */
    uint64_t abort_ecs, python_fscs;
    uint32_t fsc_lsb, fsc_mask;
    /* Encodings an UNDEF may be Python's to emulate (MRS/MSR of a system register, HLT) */
    uint32_t python_undef_mask[2], python_undef_value[2];
    /* the exception-loop guard (Machine._take_sync): entries with no instruction retired */
    uint64_t entry_retired, entries_in_place, loop_limit;
    uint64_t taken;                       /* exceptions taken natively */
    /* The GIC CPU interface's common accesses (ICC_IAR1_EL1 reads, ICC_EOIR1_EL1 and
     * ICC_SGI1R_EL1 writes) executed natively on the GIC model's state, and an interrupt
     * they make deliverable taken at once; the rest go to Python. */
    struct spe_gic *gic;                  /* NULL: no GIC */
    struct spe_control *control;          /* told when the GIC's output is asserted */
    uint32_t gic_native;                  /* 0 until Python refreshed the fields below */
    uint32_t icc_ok;                      /* bit 3 * EL + n: access n (IAR1, EOIR1, SGI1R)
                                             is permitted at EL (Python's access checks) */
    uint32_t icc_word[3];                 /* MRS ICC_IAR1_EL1, MSR ICC_EOIR1_EL1, MSR
                                             ICC_SGI1R_EL1 with Rt = 0 */
    uint32_t intid_mask;                  /* ICC_EOIR1_EL1.INTID (from bit 0) */
    uint64_t sgi_self_mask, sgi_self_value;  /* ICC_SGI1R_EL1 naming only this PE */
    uint32_t sgi_intid_lsb, sgi_intid_mask;  /* ICC_SGI1R_EL1.INTID (lsb, width-mask) */
    uint32_t sgi1r_groups, pad1;          /* the groups ICC_SGI1R_EL1 forwards */
    uint32_t irq_target, fiq_target;      /* the EL a physical IRQ / FIQ is routed to */
    uint32_t i_bit, f_bit;                /* PSTATE.I, PSTATE.F */
    int32_t x_ids[31];                    /* Unicorn ids of X0-X30 */
    uint64_t icc_native;                  /* ICC accesses executed natively */
    uint64_t irqs_taken;                  /* interrupts taken natively */
    /* Unicorn ends an emu_start at its `until` address by translating a WFI there
     * (translate-a64.c); at EL0 with SCTLR_EL1.nTWI == 0 QEMU raises that as a trapped WFI
     * (ESR_ELx.EC == wfx_ec) of the instruction before. Such an UNDEF whose word is not
     * wfi_word is not the guest's: Python's (Machine._unicorn_exit). */
    uint32_t wfx_ec, wfi_word;
    /* NULL: every abort of python_fscs goes to Python; else one that spe_abort_stands()
     * finds Python would leave unchanged is taken natively. */
    struct spe_walk *walk;
};

int spe_exception_guard(struct spe_intr *h, uint64_t retired);

/* ---- exception.c: what the stage 1 walk really ends with -------------------------------
 * Unicorn's walker reads zeros where there is no memory and lets any output address through,
 * so a fault it reports as a Translation fault may be an Address size fault or a synchronous
 * External abort on the walk (Python: spe_emu.arch.mmu.walk_fault, SyncChecks.refine_abort).
 * Every register encoding, field position and granule property below comes from mmu.py's
 * tables (spe_emu.cpu.exceptions.walk_tables); the walk itself is mmu.walk's, checked
 * against it by tests/test_native_walk.py. Field masks are width-masks (value >> lsb & mask). */
struct spe_granule {
    uint32_t page_shift, index_bits;      /* Granule.page_shift, Granule.index_bits */
    uint32_t block_levels;                /* bit n: a block is valid at level n */
    uint32_t level_shift[4];              /* Granule.level_shift(level) */
    uint32_t start_level[49];             /* Granule.start_level(ia_bits), ia_bits <= 48 */
};
struct spe_va_range {                     /* mmu.VaRange */
    uint32_t tcr_enc[5], ttbr_enc[5];     /* op0, op1, CRn, CRm, op2 */
    uint32_t tsz_lsb, tsz_mask, tg_lsb, tg_mask, tbi_lsb, ps_lsb, ps_mask;
    uint32_t epd_lsb;                     /* 64: the range has no EPD */
    uint32_t upper;                       /* the upper range: VA[top:ia_bits] all ones */
    uint32_t granule[4];                  /* TGx value -> index in spe_walk.granules */
};
#define SPE_RANGE_EL1_LOWER 0
#define SPE_RANGE_EL1_UPPER 1
#define SPE_RANGE_EL2_LOWER 2
#define SPE_RANGE_EL2_VHE_LOWER 3
#define SPE_RANGE_EL2_VHE_UPPER 4
#define SPE_RANGE_EL3_LOWER 5
struct spe_walk {
    const struct spe_exc_model *model;    /* cp-register reads; SCTLR_ELx encodings */
    spe_mem_read_fn mem_read;             /* uc_mem_read: fails where there is no memory */
    struct spe_va_range ranges[6];        /* SPE_RANGE_* */
    struct spe_granule granules[3];
    uint32_t scr_enc[5], mmfr0_enc[5];
    uint32_t m_lsb, vm_lsb, ns_lsb, parange_lsb, parange_mask;  /* SCTLR.M, HCR.VM, SCR.NS */
    uint32_t pa_bits[8];                  /* PA_BITS: a PS / PARange value -> bits */
    uint32_t txsz_min, txsz_max, final_level, valid_lsb, type_lsb;
    uint32_t fsc_address_size, fsc_walk_external;
    uint32_t e0pd;                        /* FEAT_E0PD presented (CpuFeatures.e0pd) */
    uint32_t e0pd_lsb[2];                 /* TCR_EL1.E0PD0, E0PD1 */
    uint32_t pad;
    uint64_t translation_fscs;            /* bit n: FSC n is a Translation fault */
    uint64_t baddr_mask, oa_mask;         /* TTBR.BADDR, DESC.OA (in place) */
};
#define SPE_WALK_AGREES (-1)              /* the walk ends otherwise: QEMU's fault stands */
#define SPE_WALK_PYTHON (-2)              /* not decided here (stage 2 applies) */
int spe_walk_fault(struct spe_walk *w, void *uc, uint64_t va, uint32_t regime);
/* Whether SyncChecks.refine_abort leaves the abort QEMU reports with `fsc` at `va`, from
 * EL `el`, unchanged: not possibly FEAT_E0PD's level 0 Translation fault, and for a
 * Translation fault, a walk that ends with it. */
int spe_abort_stands(struct spe_walk *w, void *uc, uint32_t el, uint64_t va, uint32_t fsc);

/* D1.3.6 interrupt masking (exception.c): whether an asynchronous exception routed to
 * `target` is taken at `el` under `pstate` (mask_bit: PSTATE.A, I or F). */
int spe_unmasked(uint32_t target, uint32_t el, uint64_t pstate, uint32_t mask_bit);

/* The same for the GIC's outputs: the interrupt taken now given the GIC's outputs
 * (`lines`: bit 0 IRQ, bit 1 FIQ), their target ELs, the current EL and PSTATE: its target
 * EL with *kind = its vector offset (0x080 IRQ, 0x100 FIQ), or 0 for none. */
uint32_t spe_deliverable(uint32_t lines, uint32_t irq_target, uint32_t fiq_target,
                         uint32_t el, uint64_t pstate, uint32_t i_bit, uint32_t f_bit,
                         uint32_t *kind);

/* The words of code matching any of npat (mask, value) patterns (counter.c). */
uint64_t spe_word_match(const uint8_t *code, uint64_t nwords, const uint32_t *masks,
                        const uint32_t *values, uint32_t npat, uint64_t *out, uint32_t *words,
                        uint64_t cap);

/* MSR/MRS/SYS hooks: encodings (op0:op1:CRn:CRm:op2, 16 bits) Python must see; the rest
 * are left to QEMU without a Python call. msr_all: every MSR goes to Python (while profiling
 * is enabled: a write can change what a record holds); sys_all: every SYS (reference loop). */
#define SPE_SYSREG_KEYS 65536
#define SPE_IC_LOG 4096   /* ranges of IC IVAU a PE logs for the others (spe_ic_replay) */
struct spe_control;
struct spe_sysreg_filter {
    uint8_t mrs[SPE_SYSREG_KEYS / 8];
    uint8_t msr[SPE_SYSREG_KEYS / 8];
    uint8_t sys[SPE_SYSREG_KEYS / 8];    /* SYS instructions (op0 == 1: TLBI, IC ...) */
    uint32_t msr_all, sys_all;
    uint32_t sys_cache;                   /* Python holds something a TLBI or IC invalidates
                                             (else even those SYS stay native) */
    uint32_t daif_key;                    /* MSR DAIF, Xt: Python only while `control` says
                                             it has work (see struct spe_control) */
    const struct spe_control *control;
    spe_sys_hook_fn msr_fallback;         /* the Python MSR hook */
    spe_sys_hook_fn sys_fallback;         /* the Python SYS hook */
    uint64_t skipped;                     /* MRS/MSR/SYS left to QEMU natively */
    /* MSR SP_EL0/SP_EL1/SP_EL2 (keys): Python only for a value that is not a multiple of
     * sp_align (bytes), or while some stack pointer is misaligned (sp_aligned == 0): a
     * Linux kernel writes SP_EL0 (its `current`) at every entry from EL0 and task switch */
    uint32_t sp_key[3];
    uint32_t sp_aligned;
    uint64_t sp_align;
    /* DC ZVA: spe_zva_hook calls zva_fallback (Python) while zva_python is set (the PE is
     * at an EL whose data accesses are to Device memory: it takes an Alignment fault) */
    uint32_t zva_python;
    void *zva_fallback;
    /* The instruction-cache maintenance SYS (CRn == code_crn, in `sys`): Python only while
     * it remembers code (sys_code: learnt verdicts, instruction words, record templates,
     * made only while profiling is enabled); TLBI still reaches it by sys_cache alone */
    uint32_t code_crn;
    uint32_t sys_code;
    /* The TLBI and IC (the SYS of `sys`, by CRn) the PE executed, native or not: a several-
     * PE machine broadcasts their effect to the other PEs' engines (spe_emu.cpu.smp) */
    uint64_t tlbi_seen;
    uint64_t ic_seen;
    /* Of those IC (with several PEs): each IC IVAU whose address translates logs the
     * physical address range of its line, and the other PEs' engines drop the code of those
     * ranges only
     * (spe_ic_replay). A line that continues or falls in the last range logged extends
     * it (a loop over a block of code logs one range); else it starts the next:
     * ic_log[n % SPE_IC_LOG] is the n-th range, ic_logged how many so far. IC IALLUIS and
     * an IC IVAU whose address does not translate count in ic_all, and those engines drop
     * all their code; so does IC IALLU while iallu_broadcast is set (Python keeps it at
     * HCR_EL2.FB, which makes IC IALLU at EL1 broadcast as IC IALLUIS; at EL2 too, a
     * superset); otherwise IC IALLU is this PE's alone */
    uint64_t ic_logged;
    uint64_t ic_all;
    uint64_t iallu_broadcast;
    uint64_t ic_line;                     /* bytes of an instruction cache line (CTR_EL0) */
    spe_translate_fn vmem_translate;      /* uc_vmem_translate */
    /* The log and the counts are kept with several PEs only (smp set). Then the executing
     * PE's own engine, which sees only its own PE's stores, drops the code an IC names
     * too: IC IVAU's line at once (ctl with ctl_remove_phys: UC_CTL_WRITE(
     * UC_CTL_TB_REMOVE_CACHE_PHYS, 2)); for IC IALLU and IC IALLUIS the hook sets
     * ic_flush_own and stops the run (emu_stop) after the instruction, and the run loop
     * drops all the engine's code there (not from inside a translated block) */
    uint32_t smp, ic_flush_own;
    spe_ctl_fn ctl;
    uint32_t ctl_remove_phys, ic_pad;
    spe_stop_fn emu_stop;
    struct { uint64_t lo, hi; } ic_log[SPE_IC_LOG];
};
int64_t spe_ic_replay(void *uc, const struct spe_sysreg_filter *f, uint64_t from);

/* The control-instruction hooks (ERET: spe_eret_hook; PSB CSYNC: spe_psb_hook): Python's
 * Machine._on_control_insn runs only while `python` is set (profiling enabled, the GIC's
 * output possibly asserted, or a Profiling Buffer that may be enabled: Python keeps it). */
typedef void (*spe_code_fn)(void *uc, uint64_t address, uint32_t size, void *user_data);
struct spe_control {
    uint32_t python;    /* Python's own reasons */
    uint32_t irq;       /* the native CPU-interface path left the GIC's output asserted */
    /* the unmasking watch rests while `python` is set for reasons no unmasking concerns
     * (Machine._on_unmask: nothing asserted or pending that PSTATE.{A, I, F} could let in);
     * cleared with every new reason (Machine._python_controls) */
    uint32_t unmask_idle, unmask_pad;
    spe_code_fn fallback;
    uint64_t skipped;
    /* ERET (spe_eret_hook): Python also when SPSR_ELx may set PSTATE.IL: per EL, bit
     * (SPSR_ELx.IL << 5 | SPSR_ELx.M) (spe_emu.cpu.sync_checks.eret_il_table) */
    uint64_t eret_il[4];
    const struct spe_exc_model *model;
    uint32_t spsr_il_lsb, spsr_m_lsb;   /* SPSR_ELx.IL, SPSR_ELx.M[4:0] (lsb) */
    uint32_t spsr_m_mask, pad2;         /* SPSR_ELx.M width-mask */
    /* PSB CSYNC (spe_psb_hook): Python's Machine._on_psb_csync runs only while `psb` is set
     * (profiling enabled: records of captured or predicted samples may be unwritten). */
    uint32_t psb, psb_pad;
    spe_code_fn psb_fallback;
    uint64_t psb_skipped;
};

/* Whether `key` is set in a filter bitmap. */
static inline int spe_key_set(const uint8_t *bitmap, unsigned key)
{
    return (bitmap[key >> 3] >> (key & 7)) & 1;
}

static inline unsigned spe_sysreg_key(const struct uc_arm64_cp *cp)
{
    return (cp->op0 & 3) << 14 | (cp->op1 & 7) << 11 | (cp->crn & 15) << 7 | (cp->crm & 15) << 3
           | (cp->op2 & 7);
}

/* ---- gic.c: the GICv3 model's interrupt state and prioritisation -------------------- */

#define SPE_GIC_MAX_INTIDS 992   /* 32 + spe_emu.devices.gicv3.MAX_NUM_SPIS */
#define SPE_GIC_SPURIOUS 1023

/* One interrupt (IHI 0069 §4.1); spe_emu.devices.gicv3 uses these as its interrupts' state. */
struct spe_gic_irq {
    uint8_t group, enabled, latch, level, active, priority, config, pad;
};

/* The state both the Python model (spe_emu.devices.gicv3.GicV3) and the native CPU-interface
 * path act on. The ICC registers are whole register values; their field positions come from
 * Python's ICC_REGISTERS table. */
struct spe_gic {
    uint32_t num_intids;
    uint32_t pri_bits;            /* implemented priority bits (5) */
    uint32_t grp_enabled;         /* GICD_CTLR: bit g set = EnableGrp<g> (Python keeps it) */
    uint32_t awake;               /* GICR_WAKER.ProcessorSleep == 0 (Python keeps it) */
    uint64_t icc_pmr, icc_bpr0, icc_bpr1, icc_ctlr, icc_igrpen0, icc_igrpen1,
             icc_ap0r0, icc_ap1r0;
    uint32_t cbpr_bit, eoimode_bit, enable_bit;   /* ICC_CTLR_EL1.{CBPR, EOImode},
                                                     ICC_IGRPENn_EL1.Enable */
    uint32_t edge_bit;            /* Int_config: bit 1 set = edge-triggered */
    uint32_t dirty;               /* the native path changed the state since Python looked */
    uint32_t pad;
    uint8_t routed[SPE_GIC_MAX_INTIDS];      /* SPI n reaches this PE (GICD_IROUTER<n>) */
    struct spe_gic_irq irqs[SPE_GIC_MAX_INTIDS];
};

/* spe_gic_eoi() outcomes (bits): what Python logs as guest errors */
#define SPE_EOI_SPECIAL 1        /* INTID 1020..1023: no effect */
#define SPE_EOI_NO_SUCH 2        /* an INTID that does not exist: no effect */
#define SPE_EOI_NO_ACTIVE 4      /* no active priority: no effect */
#define SPE_EOI_WRONG_GROUP 8    /* the highest active priority is the other group's */
#define SPE_EOI_NOT_ACTIVE 16    /* deactivated an interrupt that was not active (done) */
#define SPE_EOI_ERRORS (SPE_EOI_NO_SUCH | SPE_EOI_NO_ACTIVE | SPE_EOI_WRONG_GROUP \
                        | SPE_EOI_NOT_ACTIVE)

int spe_gic_hppi(const struct spe_gic *g, uint32_t *prio, uint32_t *intid, uint32_t *group);
uint32_t spe_gic_lines(const struct spe_gic *g);
uint32_t spe_gic_acknowledge(struct spe_gic *g, uint32_t group);
uint32_t spe_gic_eoi(struct spe_gic *g, uint32_t group, uint32_t intid, int commit);

/* ---- the console UART's transmit path (uart.c) ---------------------------------------- */

#define SPE_UART_BUF 4096

/* A PL011 (spe_emu.devices.pl011) mapped with spe_uart_read/spe_uart_write: while `steady`
 * (Python sets it when a UARTDR write would only send its character, the FIFO empty and the
 * transmit interrupt already raised, and clears it otherwise) a write to UARTDR appends the
 * character to buf and a read of UARTFR answers fr; every other access, and those while not
 * steady, go to Python's fallbacks (the binding's MMIO callbacks), after `flush` has taken
 * buf. flush is also called at a newline and when buf is full. Read with uart.c. */
struct spe_uart {
    uint32_t steady;
    uint32_t fr;                   /* UARTFR while steady */
    uint64_t dr_offset, fr_offset; /* Python's register map */
    uint32_t len;                  /* characters in buf */
    uint32_t last_size;            /* the last native UARTDR write: its size (bytes) ... */
    uint64_t last_value;           /* ... and value (Python stores it in UARTDR at flush) */
    uint64_t sent;                 /* characters sent natively */
    void *read_fallback, *write_fallback, *flush;
    uint8_t buf[SPE_UART_BUF];
};

uint64_t spe_uart_read(void *uc, uint64_t offset, unsigned size, struct spe_uart *u);
void spe_uart_write(void *uc, uint64_t offset, unsigned size, uint64_t value,
                    struct spe_uart *u);

#endif
