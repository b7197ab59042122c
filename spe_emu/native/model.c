/*
 * The micro-architecture model behind the events and latencies of records (docs/model.md,
 * "Events and latency model"): a TLB, an L1D, an optional L2 and a last level cache, each a
 * set-associative cache of `lines` entries in `ways`-way sets with LRU replacement (ways 0:
 * fully associative), and the last target of each indirect branch. One model per machine,
 * used by every path that builds a record (record.c for native captures, RecordBuilder in
 * Python through spe_model_access()/spe_model_target_swap()), so there is one
 * implementation of the model.
 *
 * What feeds it (SpeConfig.model_feed): every data access the PE makes, through the
 * UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE callback spe_model_hook, and every branch it executes,
 * through the block hook (counter.c feed_branch) ("every", the default; caches keyed by
 * physical address: Unicorn's memory hooks see PAs), when a record takes what the sampled
 * operation itself found as it executed; or only the sampled operations, as their records
 * are built ("sampled": spe_model_access and spe_model_branch with update = 1).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spe_native.h"

/* ---- LRU set ------------------------------------------------------------------------ */

/* A fixed-capacity set of keys in access order, with a linear-probing hash of node numbers
 * (load <= 1/2, backward-shift deletion). The order is kept one of two ways, which give the
 * same outcomes: up to SPE_STAMP_MAX keys, the clock value of each node's last access (a hit
 * is one store; a miss in a full set looks for the oldest stamp); above it, a doubly linked
 * list of the nodes, oldest first (a big fully associative level, whose misses could not
 * afford the search). */
#define SPE_STAMP_MAX 64

struct spe_lru {
    uint32_t capacity, count;
    uint32_t mask;          /* hash slots - 1 */
    int32_t oldest, newest; /* (list) node numbers, -1: empty */
    uint32_t *slots;        /* node number + 1, 0: empty */
    uint64_t *keys;
    int32_t *prev, *next;   /* (list) */
    uint64_t *stamp;        /* (stamps) the clock at each node's last access */
    uint64_t clock;
};

static struct spe_lru *lru_new(uint32_t capacity)
{
    struct spe_lru *l = calloc(1, sizeof *l);
    uint32_t size = 4;
    while (size < 2 * capacity)
        size <<= 1;
    if (!l)
        return 0;
    l->capacity = capacity;
    l->mask = size - 1;
    l->oldest = l->newest = -1;
    l->slots = calloc(size, sizeof *l->slots);
    /* (node arrays: node i is written before it is read, i < count) */
    l->keys = malloc(capacity * sizeof *l->keys);
    int ok = l->slots && l->keys;
    if (capacity <= SPE_STAMP_MAX) {
        l->stamp = malloc(capacity * sizeof *l->stamp);
        ok = ok && l->stamp;
    } else {
        l->prev = malloc(capacity * sizeof *l->prev);
        l->next = malloc(capacity * sizeof *l->next);
        ok = ok && l->prev && l->next;
    }
    if (!ok) {
        free(l->slots), free(l->keys), free(l->prev), free(l->next), free(l->stamp), free(l);
        return 0;
    }
    return l;
}

static void lru_free(struct spe_lru *l)
{
    if (l)
        free(l->slots), free(l->keys), free(l->prev), free(l->next), free(l->stamp), free(l);
}

/* (list) */
static void lru_unlink(struct spe_lru *l, int32_t node)
{
    int32_t p = l->prev[node], n = l->next[node];
    if (p >= 0) l->next[p] = n; else l->oldest = n;
    if (n >= 0) l->prev[n] = p; else l->newest = p;
}

/* A node outside the order (new, or unlinked) becomes the newest. */
static void lru_append(struct spe_lru *l, int32_t node)
{
    if (l->stamp) {
        l->stamp[node] = ++l->clock;
        return;
    }
    l->prev[node] = l->newest;
    l->next[node] = -1;
    if (l->newest >= 0) l->next[l->newest] = node; else l->oldest = node;
    l->newest = node;
}

/* A node in the order becomes the newest. */
static inline void lru_renew(struct spe_lru *l, int32_t node)
{
    if (l->stamp) {
        l->stamp[node] = ++l->clock;
    } else if (node != l->newest) {
        lru_unlink(l, node);
        lru_append(l, node);
    }
}

/* The node of the least recently used key (the set is not empty). */
static int32_t lru_oldest(const struct spe_lru *l)
{
    if (!l->stamp)
        return l->oldest;
    uint32_t best = 0;
    for (uint32_t i = 1; i < l->count; i++)
        best = l->stamp[i] < l->stamp[best] ? i : best;
    return (int32_t)best;
}

/* Empties slot i and moves later entries of its probe run back into the hole. */
static void lru_erase_slot(struct spe_lru *l, uint32_t i)
{
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & l->mask;
        if (!l->slots[j])
            break;
        uint32_t home = hash64(l->keys[l->slots[j] - 1], l->mask);
        if (((j - home) & l->mask) >= ((j - i) & l->mask)) {
            l->slots[i] = l->slots[j];
            i = j;
        }
    }
    l->slots[i] = 0;
}

/* The slot holding key, or -1. */
static int64_t lru_slot(const struct spe_lru *l, uint64_t key)
{
    for (uint32_t i = hash64(key, l->mask); l->slots[i]; i = (i + 1) & l->mask)
        if (l->keys[l->slots[i] - 1] == key)
            return i;
    return -1;
}

/* Removes key; 1 if it was in the set. The last node moves into the freed one, so nodes
 * stay 0 .. count - 1. */
static int lru_remove(struct spe_lru *l, uint64_t key)
{
    int64_t i = lru_slot(l, key);
    if (i < 0)
        return 0;
    int32_t node = (int32_t)l->slots[i] - 1, last = (int32_t)l->count - 1;
    lru_erase_slot(l, (uint32_t)i);
    if (!l->stamp)
        lru_unlink(l, node);
    if (node != last) {
        int64_t j = lru_slot(l, l->keys[last]);
        l->slots[j] = (uint32_t)node + 1;
        l->keys[node] = l->keys[last];
        if (l->stamp) {
            l->stamp[node] = l->stamp[last];
        } else {
            int32_t p = l->prev[last], n = l->next[last];
            l->prev[node] = p;
            l->next[node] = n;
            if (p >= 0) l->next[p] = node; else l->oldest = node;
            if (n >= 0) l->prev[n] = node; else l->newest = node;
        }
    }
    l->count--;
    return 1;
}

/* 1 if key is in the set; the set is not changed. */
static int lru_contains(const struct spe_lru *l, uint64_t key)
{
    for (uint32_t i = hash64(key, l->mask); l->slots[i]; i = (i + 1) & l->mask)
        if (l->keys[l->slots[i] - 1] == key)
            return 1;
    return 0;
}

/* A miss of lru_touch: key is added as the newest at slot i (the empty slot that ended its
 * probe run), and the oldest leaves when the set is full. */
static __attribute__((noinline)) void lru_insert(struct spe_lru *l, uint64_t key, uint32_t i)
{
    int32_t node;
    if (l->count == l->capacity) {      /* evict the oldest, reuse its node */
        node = lru_oldest(l);
        uint32_t j = hash64(l->keys[node], l->mask);
        while (l->slots[j] != (uint32_t)node + 1)
            j = (j + 1) & l->mask;
        lru_erase_slot(l, j);
        if (!l->stamp)
            lru_unlink(l, node);
        i = hash64(key, l->mask);       /* the hole may have moved the probe run */
        while (l->slots[i])
            i = (i + 1) & l->mask;
    } else {
        node = (int32_t)l->count++;
    }
    l->keys[node] = key;
    l->slots[i] = (uint32_t)node + 1;
    lru_append(l, node);
}

/* Records an access to key; 1 if it was in the set (a hit). A hit becomes the newest; a miss
 * is added as the newest, and the oldest leaves when the set is over capacity. */
static int lru_touch(struct spe_lru *l, uint64_t key)
{
    uint32_t i = hash64(key, l->mask);
    while (l->slots[i]) {
        int32_t node = (int32_t)l->slots[i] - 1;
        if (l->keys[node] == key) {
            lru_renew(l, node);
            return 1;
        }
        i = (i + 1) & l->mask;
    }
    lru_insert(l, key, i);
    return 0;
}

/* ---- last target of each indirect branch ---------------------------------------------- */

struct spe_targets {
    uint32_t mask, count;
    uint64_t *keys, *values;
    uint8_t *used;
};

static int targets_alloc(struct spe_targets *t, uint32_t size)
{
    t->keys = calloc(size, sizeof *t->keys);
    t->values = calloc(size, sizeof *t->values);
    t->used = calloc(size, 1);
    t->mask = size - 1;
    t->count = 0;
    return t->keys && t->values && t->used;
}

static void targets_release(struct spe_targets *t)
{
    free(t->keys), free(t->values), free(t->used);
}

/* The last target of the branch at pc into *old: 1, or 0 when it has none. */
static int targets_peek(const struct spe_targets *t, uint64_t pc, uint64_t *old)
{
    uint32_t i = hash64(pc, t->mask);
    while (t->used[i]) {
        if (t->keys[i] == pc) {
            *old = t->values[i];
            return 1;
        }
        i = (i + 1) & t->mask;
    }
    return 0;
}

/* Sets the last target of the branch at pc; returns 1 and *old if it had one. 0 without
 * memory to grow (the table is then unchanged: not reached in practice). */
static int targets_swap(struct spe_targets *t, uint64_t pc, uint64_t target, uint64_t *old,
                        int *had)
{
    if (2 * (t->count + 1) > t->mask + 1) {   /* grow to keep the load <= 1/2 */
        struct spe_targets bigger;
        if (!targets_alloc(&bigger, 2 * (t->mask + 1))) {
            targets_release(&bigger);
            return 0;
        }
        for (uint32_t i = 0; i <= t->mask; i++) {
            if (!t->used[i])
                continue;
            uint32_t j = hash64(t->keys[i], bigger.mask);
            while (bigger.used[j])
                j = (j + 1) & bigger.mask;
            bigger.used[j] = 1;
            bigger.keys[j] = t->keys[i];
            bigger.values[j] = t->values[i];
            bigger.count++;
        }
        targets_release(t);
        *t = bigger;
    }
    uint32_t i = hash64(pc, t->mask);
    while (t->used[i] && t->keys[i] != pc)
        i = (i + 1) & t->mask;
    *had = t->used[i];
    *old = t->values[i];
    if (!t->used[i]) {
        t->used[i] = 1;
        t->keys[i] = pc;
        t->count++;
    }
    t->values[i] = target;
    return 1;
}

/* ---- levels and the model ------------------------------------------------------------ */

/* One level: `sets` LRU sets (a power of two) of `ways` entries; a key goes to set
 * key & (sets - 1). A set of at most SPE_ARRAY_WAYS ways is a row of keys[], newest first
 * (key + 1; 0: an empty way), looked up by a scan and reordered by a shift; a larger one (a
 * big fully associative level) is an spe_lru. Both keep the same LRU order, so the outcomes
 * do not depend on which a level uses. */
#define SPE_ARRAY_WAYS 16
#define SPE_SITE_CACHE 1024   /* the direct-mapped table of branch sites' kinds (spe_model) */
#define SPE_WORD_CACHE 4096   /* the direct-mapped table of instruction words' kinds (spe_model) */

struct spe_level {
    uint32_t sets;          /* 0: the level is absent */
    uint32_t ways;
    uint64_t *keys;         /* sets * ways keys (ways <= SPE_ARRAY_WAYS), else NULL */
    struct spe_lru **set;   /* sets spe_lru sets (ways > SPE_ARRAY_WAYS), else NULL */
};

struct spe_model {
    struct spe_level tlb, l1d, l2, llc;
    struct spe_targets targets;
    /* conditional branches: gshare (a table of 2^gshare_bits two-bit counters indexed by
     * PC[gshare_bits+1:2] XOR the last gshare_bits outcomes) */
    uint32_t gshare_bits;
    uint8_t *pht;
    uint64_t history;
    /* returns: a stack of ras_depth return addresses, the oldest overwritten when full */
    uint32_t ras_depth, ras_count, ras_top;
    uint64_t *ras;
    /* the kind of the instruction at each PC met (SPE_BR_* | SPE_BR_BRANCH, or 0), and the
     * newest of them in a direct-mapped table indexed by PC[11:2] (key pc + 1; 0: empty),
     * looked up first: the branch feed asks for a block's last instruction at every block */
    struct spe_targets sites;
    struct { uint64_t key; uint32_t kind; } site[SPE_SITE_CACHE];
    uint32_t encodings;
    uint32_t enc_mask[SPE_ENCODINGS], enc_value[SPE_ENCODINGS], enc_kind[SPE_ENCODINGS];
    uint64_t stats[SPE_MODEL_STATS];
    /* the line of the last recorded access + 1 (0: none): another access to it hits the L1D
     * and the TLB and changes nothing (both are already the newest of their sets) */
    uint64_t last_line;
    /* the same for the page of the last recorded access (a TLB hit that changes nothing) */
    uint64_t last_page;
    /* Several PEs (spe_model_join): every PE's model, this one at index `self`; the LLC all
     * of them look lines up in (PE 0's); the lines this PE wrote that no other PE has read or
     * written since (an LRU set as big as its L1D and L2: a line that leaves it counts as
     * written back); and the line + 1 it made modified last (a store to it snoops nothing) */
    struct spe_model **peers;
    uint32_t npeers, self;
    struct spe_level *llcp;
    struct spe_lru *modified;
    uint64_t owned_line;
    /* The branch trainer (train_entry; the worker's while it has entries): the instruction
     * that ran last (train_pc, valid when train_valid), its word or, with train_is_kind, its
     * kind (train_kw); the captures that take the next branch's verdict; the branches
     * trained and mispredicted; the kinds of the words met last, direct-mapped by word. */
    uint64_t train_pc, train_kw;
    int train_valid, train_is_kind;
    uint64_t *train_caps[2];
    uint32_t train_ncaps;
    uint64_t train_branches, train_mispredicts;
    struct { uint64_t key; uint32_t kind; } word_kind[SPE_WORD_CACHE];
    /* The model's thread (spe_model_threads, "The model's thread" below): 0 until a plain
     * batch starts it (not on a line the worker writes) */
    _Alignas(64) struct spe_worker *worker;
    int no_worker;   /* a worker could not be made */
};

const uint64_t spe_model_stats_count = SPE_MODEL_STATS;

/* One access of the batched memory trace: uc_mem_trace_entry of patches/unicorn/0011 (addr:
 * the physical address; info: the PC's bits [55:0], log2 of the size in [58:56], bit 59 set
 * for a store). */
struct spe_trace_entry {
    uint64_t addr;
    uint64_t info;
};

/* A block the translated code counted (patches/unicorn/0014, uc_mem_trace_blocks): info's
 * bits [63:60] all set (an access's MMU index never is), [59:32] its length in instructions,
 * [31:0] the word of its last instruction; addr: its (virtual) address. */
static inline int trace_is_block(uint64_t info)
{
    return info >> 60 == 0xf;
}

static inline uint64_t trace_block_insns(uint64_t info)
{
    return info >> 32 & 0xfffffff;
}

/* After a batch whose last block is blk (NULL: none): block_start and block_insns say it is
 * the block being run (what uc_hook_block_counter's fast path sets without the blocks
 * traced); handed: the trainer was handed it (otherwise it was skipped: block_slow tells the
 * trainer what ran last before the next block it hands). */
static void trace_blocks_seen(struct spe_counter *c, const struct spe_trace_entry *blk,
                              int handed)
{
    if (!blk)
        return;
    c->block_start = blk->addr;
    c->block_insns = trace_block_insns(blk->info);
    c->handed_start = c->block_start;
    c->handed_insns = c->block_insns;
    c->handed_valid = (uint64_t)handed;
}

/* The entry's access: its size in bytes, and the PC of its instruction. */
static inline uint64_t trace_size(const struct spe_trace_entry *e)
{
    return (uint64_t)1 << (e->info >> 56 & 7);
}

static inline uint64_t trace_pc(const struct spe_trace_entry *e)
{
    return (uint64_t)((int64_t)(e->info << 8) >> 8);
}

/* ---- The model's thread ------------------------------------------------------------- */

/* With spe_model_threads set (by Python: docs/model.md "The model's thread"), the batches of
 * the memory trace (spe_model_trace_batch, with one PE and neither the PMU nor ground truth
 * on) are handed to a worker thread of the model as they are, through a ring (worker_feed),
 * and so are the blocks the block hook hands the branch trainer (spe_model_train); the
 * feeding thread goes on emulating while the worker records them, in the same order, with
 * the same code (record_entry, access_rw, train_entry). Everything else that reads or
 * changes the caches', the TLB's or the predictor's state (every exported function but the
 * branch sites') first waits for the worker to be idle (model_sync), so every outcome,
 * record and count is the one the model gives without the thread: only the time it takes
 * changes. The branch sites (counter.c site_kind) stay with the feeding thread. */
int spe_model_threads = 0;

#define SPE_RING_WORDS ((uint64_t)1 << 16)   /* words in flight at most (512 KiB) */
/* A record of a batch's entries as they are: this word | their number (at most SPE_RAW_MAX),
 * then the number + 1 of the entry a capture armed (0: none), the address of that capture's
 * spe_capture.fed, a word of padding and the entries, two words each (worker_feed) */
#define SPE_RING_RAW ((uint64_t)1 << 61)
#define SPE_RAW_MAX 8192
#define SPE_PUBLISH 1024     /* words handed over that wake the worker */
#define SPE_SPINS 20000      /* polls of the ring before the worker sleeps (about 1 ms) */
/* An idle worker's thread ends after this long asleep, in ns (host time: nothing the guest
 * sees; tests shorten it) */
long spe_model_worker_idle_ns = 500000000L;

struct spe_worker {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    _Atomic int running;        /* (written under lock) the thread has not ended */
    int joinable;               /* (lock) the thread has not been joined */
    uint64_t *ring;             /* the words, the nth at [n % SPE_RING_WORDS] */
    uint64_t forks;             /* spe_model_forks when the thread started */
    uint64_t starts;            /* threads started */
    struct spe_worker *next;    /* (spe_workers_lock) the process's next worker */
    _Atomic int sleeping, quit;
    /* (the feeding thread's, on a cache line the worker does not read: its head, published
     * by worker_publish, and its last look at tail; a write of them per batch on the line
     * of `ring`, which the worker reads, cost a transfer of that line each time) */
    _Alignas(64) uint64_t head_local;
    uint64_t tail_seen;
    /* (the ring's word after the last record that sets a capture's spe_capture.fed, and
     * whether a branch capture handed over waits for its block: spe_model_sync) */
    uint64_t fed_head;
    int fed_pending;
    /* (each on a cache line of its own: one thread writes each) */
    _Alignas(64) _Atomic uint64_t head;   /* words handed over (by the feeding thread) */
    _Alignas(64) _Atomic uint64_t tail;   /* words recorded (by the worker) */
};

/* Forks of this process since the first worker started: a child has no worker thread, only
 * the ring, whose entries not yet handed over the feeding thread records itself
 * (worker_wait). Before a fork every worker catches up with what was handed over to it
 * (model_prefork), so that the child's model is not one a worker was part-way through. */
static _Atomic uint64_t spe_model_forks;
static pthread_once_t spe_model_atfork_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t spe_workers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct spe_worker *spe_workers;   /* (spe_workers_lock) every worker of the process */

/* (a spinning thread's pause) */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static void model_prefork(void)
{
    pthread_mutex_lock(&spe_workers_lock);   /* (until the fork is done: model_postfork_*) */
    for (struct spe_worker *w = spe_workers; w; w = w->next)
        while (w->forks == atomic_load(&spe_model_forks) && atomic_load(&w->running)
               && atomic_load(&w->tail) != atomic_load(&w->head))
            cpu_relax();
}

static void model_postfork_parent(void)
{
    pthread_mutex_unlock(&spe_workers_lock);
}

static void model_postfork_child(void)
{
    atomic_fetch_add(&spe_model_forks, 1);
    pthread_mutex_unlock(&spe_workers_lock);
}

static void model_atfork(void)
{
    pthread_atfork(model_prefork, model_postfork_parent, model_postfork_child);
}

static int access_rw(struct spe_model *m, uint64_t line, int update, int store);
static inline void count_last_line_again(struct spe_model *m);
static void train_entry(struct spe_model *m, uint64_t w0, uint64_t w1);

/* One entry of the batched memory trace (addr, info: spe_trace_entry) recorded as
 * spe_model_trace_batch's plain rule says, by the feeding thread or the worker: a block goes
 * to the branch trainer; an access records each line it touches, the line of the last access
 * again (within it) being an L1D hit that changes nothing; with fed, the access is the one a
 * capture armed, whose first line's outcome goes there. */
static inline __attribute__((always_inline)) void record_entry(struct spe_model *m,
                                                             uint64_t addr, uint64_t info,
                                                             uint64_t *fed)
{
    if (trace_is_block(info)) {
        train_entry(m, SPE_TRAIN | SPE_TRAIN_WORD | SPE_TRAIN_ADDRESS(addr),
                    info & (((uint64_t)1 << 60) - 1));
        return;
    }
    uint64_t line = addr >> 6, last = (addr + ((uint64_t)1 << (info >> 56 & 7)) - 1) >> 6;
    int store = (int)(info >> 59 & 1);
    if (__builtin_expect(fed != 0, 0))
        __atomic_store_n(fed, (uint64_t)access_rw(m, line++, 1, store), __ATOMIC_RELAXED);
    else if (line + 1 == m->last_line && last == line) {
        count_last_line_again(m);
        return;
    }
    for (; line <= last; line++)
        access_rw(m, line, 1, store);
}

/* Records the record at the nth word of ring (SPE_RING_RAW: record_entry for each of its
 * entries; the branch trainer's: train_entry); returns the number of the word after it. */
static inline uint64_t worker_take(struct spe_model *m, const uint64_t *ring, uint64_t n)
{
    uint64_t word = ring[n & (SPE_RING_WORDS - 1)];
    if (word & SPE_TRAIN) {
        train_entry(m, word, ring[(n + 1) & (SPE_RING_WORDS - 1)]);
        return n + 2;
    }
    uint64_t count = word & 0xffffffff, cap = ring[(n + 1) & (SPE_RING_WORDS - 1)];
    uint64_t *fed = (uint64_t *)(uintptr_t)ring[(n + 2) & (SPE_RING_WORDS - 1)];
    n += 4;
    for (uint64_t i = 1; i <= count; i++, n += 2)
        record_entry(m, ring[n & (SPE_RING_WORDS - 1)], ring[(n + 1) & (SPE_RING_WORDS - 1)],
                     __builtin_expect(i == cap, 0) ? fed : 0);
    return n;
}

/* The worker: records the words handed over, in order; polls for more, then sleeps; ends
 * after spe_model_worker_idle_ns asleep (worker_publish starts it again) or when told to
 * quit. */
static void *worker_main(void *arg)
{
    struct spe_model *m = arg;
    struct spe_worker *w = m->worker;
    uint64_t t = atomic_load_explicit(&w->tail, memory_order_relaxed);
    for (;;) {
        uint64_t h = atomic_load_explicit(&w->head, memory_order_acquire);
        for (int spins = 0; h == t && spins < SPE_SPINS; spins++) {
            cpu_relax();
            h = atomic_load_explicit(&w->head, memory_order_acquire);
        }
        if (h == t) {
            struct timespec until;
            int timed_out = 0;
            clock_gettime(CLOCK_REALTIME, &until);   /* (host time: the guest sees none) */
            until.tv_nsec += spe_model_worker_idle_ns % 1000000000L;
            until.tv_sec += spe_model_worker_idle_ns / 1000000000L;
            until.tv_sec += until.tv_nsec / 1000000000L;
            until.tv_nsec %= 1000000000L;
            pthread_mutex_lock(&w->lock);
            atomic_store(&w->sleeping, 1);
            while ((h = atomic_load(&w->head)) == t && !atomic_load(&w->quit) && !timed_out)
                timed_out = pthread_cond_timedwait(&w->wake, &w->lock, &until) != 0;
            if (h == t) {   /* (quit, or idle long enough: the sleeping flag stays set) */
                w->running = 0;
                pthread_mutex_unlock(&w->lock);
                return 0;
            }
            atomic_store(&w->sleeping, 0);
            pthread_mutex_unlock(&w->lock);
        }
        while (t < h) {
            uint64_t stop = h - t > 4096 ? t + 4096 : h;   /* (room freed as it goes) */
            while (t < stop)
                t = worker_take(m, w->ring, t);
            atomic_store_explicit(&w->tail, t, memory_order_release);
        }
    }
}

/* Starts w's thread (w->lock held, or w not shared yet); 0 when it cannot. */
static int worker_start(struct spe_model *m, struct spe_worker *w)
{
    atomic_store(&w->sleeping, 0);
    w->forks = atomic_load(&spe_model_forks);
    w->running = w->joinable = pthread_create(&w->thread, 0, worker_main, m) == 0;
    w->starts += (uint64_t)w->running;
    return w->running;
}

/* The worker of m, made on first use; 0 when threads are off (spe_model_threads), with
 * several PEs, or without memory. */
static struct spe_worker *worker_of(struct spe_model *m)
{
    if (m->worker)
        return m->worker;
    if (!spe_model_threads || m->peers || m->no_worker)
        return 0;
    m->no_worker = 1;   /* (until it has one: a model that cannot have one stops asking) */
    pthread_once(&spe_model_atfork_once, model_atfork);
    struct spe_worker *w = aligned_alloc(64, sizeof *w);
    if (!w)
        return 0;
    memset(w, 0, sizeof *w);
    if (!(w->ring = malloc(SPE_RING_WORDS * sizeof *w->ring))) {
        free(w);
        return 0;
    }
    pthread_mutex_init(&w->lock, 0);
    pthread_cond_init(&w->wake, 0);
    m->worker = w;
    if (!worker_start(m, w)) {
        m->worker = 0;
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->wake);
        free(w->ring);
        free(w);
        return 0;
    }
    pthread_mutex_lock(&spe_workers_lock);
    w->next = spe_workers;
    spe_workers = w;
    pthread_mutex_unlock(&spe_workers_lock);
    m->no_worker = 0;
    return w;
}

/* The worker's thread is gone: this is a forked child, or it could not start again. */
static inline int worker_orphaned(const struct spe_worker *w)
{
    return w->forks != atomic_load(&spe_model_forks) || !w->running;
}

/* Hands the entries up to head_local over, waking the worker (or starting its thread again
 * when it ended idle). */
static void worker_publish(struct spe_model *m, struct spe_worker *w)
{
    atomic_store(&w->head, w->head_local);
    if (atomic_load(&w->sleeping) && w->forks == atomic_load(&spe_model_forks)) {
        pthread_mutex_lock(&w->lock);
        if (w->running) {
            pthread_cond_signal(&w->wake);
        } else if (w->joinable) {
            pthread_join(w->thread, 0);
            worker_start(m, w);   /* (else worker_wait records the entries itself) */
        }
        pthread_mutex_unlock(&w->lock);
    }
}

/* Waits until the worker has recorded the ring up to word `until` (at most head_local),
 * publishing it first; in a forked child, or when its thread could not start again, records
 * all of it itself. */
static __attribute__((noinline)) void worker_wait_to(struct spe_model *m, uint64_t until)
{
    struct spe_worker *w = m->worker;
    if (atomic_load_explicit(&w->head, memory_order_relaxed) < until)
        worker_publish(m, w);
    if (worker_orphaned(w)) {
        for (uint64_t t = atomic_load(&w->tail); t < w->head_local;)
            t = worker_take(m, w->ring, t);
        atomic_store(&w->tail, w->head_local);
    } else {
        for (unsigned spins = 0; atomic_load_explicit(&w->tail, memory_order_acquire) < until;
             spins++) {
            if (spins < 100000)
                cpu_relax();
            else
                sched_yield();
        }
    }
    w->tail_seen = atomic_load(&w->tail);   /* (worker_room counts on it) */
}

/* Waits until every word handed over is recorded: after it the model is the feeding
 * thread's until it hands words over again. */
static void worker_wait(struct spe_model *m)
{
    worker_wait_to(m, m->worker->head_local);
}

static inline void model_sync(struct spe_model *m)
{
    if (m->worker)
        worker_wait(m);
}

/* model_sync, exported: before counter.c's feed_branch trains the predictor itself, when the
 * model's thread may still have blocks for the trainer (spe_counter.trainer_live). */
void spe_model_sync_all(struct spe_model *m)
{
    model_sync(m);
}

/* Waits until the model's worker has set every capture's spe_capture.fed handed to it: it has
 * recorded the ring as far as the last record that sets one (fed_head), the rest may still
 * be on the way (every other reader waits for all of it, model_sync). Before the captures
 * are read (Prediction._drain, before record.c and Python's replay). */
void spe_model_sync(struct spe_model *m)
{
    struct spe_worker *w = m->worker;
    if (w && atomic_load_explicit(&w->tail, memory_order_acquire) < w->fed_head)
        worker_wait_to(m, w->fed_head);
}

/* What m's worker did so far: out[0] the words handed to it, out[1] the threads it started,
 * out[2] the words it has recorded (0, 0, 0: no worker). */
void spe_model_worker_stats(struct spe_model *m, uint64_t *out)
{
    struct spe_worker *w = m->worker;
    out[0] = w ? w->head_local : 0;
    out[1] = w ? w->starts : 0;
    out[2] = w ? atomic_load(&w->tail) : 0;
}

/* Ends and frees m's worker (model_sync first). */
static void worker_stop(struct spe_model *m)
{
    struct spe_worker *w = m->worker;
    if (!w)
        return;
    model_sync(m);
    pthread_mutex_lock(&spe_workers_lock);
    for (struct spe_worker **p = &spe_workers; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    pthread_mutex_unlock(&spe_workers_lock);
    if (w->forks == atomic_load(&spe_model_forks)) {
        pthread_mutex_lock(&w->lock);
        atomic_store(&w->quit, 1);
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
        if (w->joinable)
            pthread_join(w->thread, 0);   /* (also a thread that ended idle) */
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->wake);
    }   /* (else a forked child's: the parent's thread may have waited on the condition or
         * held the lock, and destroying them would wait for it forever) */
    free(w->ring);
    free(w);
    m->worker = 0;
}

/* Makes room for n more words in the ring from head h: the worker's tail as last seen first
 * (reading it at every hand-over would take its cache line from the worker, which writes
 * it), then as it is, then publishing and waiting for the worker. */
static inline void worker_room(struct spe_model *m, struct spe_worker *w, uint64_t h,
                               uint64_t n)
{
    if (__builtin_expect(SPE_RING_WORDS - (h - w->tail_seen) >= n, 1))
        return;
    w->tail_seen = atomic_load(&w->tail);
    if (SPE_RING_WORDS - (h - w->tail_seen) >= n)   /* (the worker has moved on) */
        return;
    w->head_local = h;
    worker_publish(m, w);
    if (worker_orphaned(w)) {   /* (no thread: the feeding thread records the ring) */
        worker_wait(m);
        return;
    }
    do {
        cpu_relax();
        w->tail_seen = atomic_load_explicit(&w->tail, memory_order_acquire);
    } while (SPE_RING_WORDS - (h - w->tail_seen) < (n > 4096 ? n : 4096));
}

/* Hands a batch to the worker (spe_model_trace_batch, one PE, neither the PMU nor ground
 * truth on): the entries as they are, in records of at most SPE_RAW_MAX (SPE_RING_RAW), which
 * the worker records as the feeding thread would (record_entry). The first access of the
 * instruction a capture armed (feed_access's rule) goes with the address of the capture's
 * spe_capture.fed, which the worker sets: it is read only after model_sync (spe_model_sync
 * in Prediction._drain). The feeding thread only looks for that access and for the batch's
 * last block (trace_blocks_seen). The worker is woken once SPE_PUBLISH entries wait
 * (model_sync wakes it for the rest). */
static void worker_feed(struct spe_counter *c, struct spe_model *m, struct spe_worker *w,
                        const struct spe_trace_entry *e, size_t count)
{
    uint64_t cap = 0, fed = 0;   /* (the armed access: its index + 1 in the record) */
    if (c->armed) {
        for (size_t i = 0; i < count; i++)
            if (!trace_is_block(e[i].info) && trace_pc(&e[i]) == c->armed_pc) {
                cap = i + 1;
                fed = (uint64_t)(uintptr_t)&c->caps[c->armed - 1].fed;
                c->armed = 0;
                break;
            }
    }
    const struct spe_trace_entry *blk = 0;
    for (size_t i = count; i-- > 0;)
        if (trace_is_block(e[i].info)) {
            blk = &e[i];
            break;
        }
    uint64_t *ring = w->ring, h = w->head_local;
    while (count) {
        size_t n = count < SPE_RAW_MAX ? count : SPE_RAW_MAX;
        worker_room(m, w, h, 4 + 2 * n);
        ring[h++ & (SPE_RING_WORDS - 1)] = SPE_RING_RAW | n;
        ring[h++ & (SPE_RING_WORDS - 1)] = cap <= n ? cap : 0;
        ring[h++ & (SPE_RING_WORDS - 1)] = fed;
        ring[h++ & (SPE_RING_WORDS - 1)] = 0;
        /* (entries stay 16-byte aligned in the ring: a record's header is 4 words) */
        size_t at = h & (SPE_RING_WORDS - 1), first = SPE_RING_WORDS - at;
        if (first > 2 * n)
            first = 2 * n;
        memcpy(ring + at, e, first * sizeof *ring);
        memcpy(ring, (const uint64_t *)e + first, (2 * n - first) * sizeof *ring);
        h += 2 * n;
        if (cap && cap <= n)
            w->fed_head = h;
        cap = cap > n ? cap - n : 0;
        e += n;
        count -= n;
    }
    w->head_local = h;
    c->trainer_live |= blk != 0;
    trace_blocks_seen(c, blk, 1);
    if (h - atomic_load_explicit(&w->head, memory_order_relaxed) >= SPE_PUBLISH)
        worker_publish(m, w);
}

static void level_free(struct spe_level *v)
{
    if (v->set)
        for (uint32_t i = 0; i < v->sets; i++)
            lru_free(v->set[i]);
    free(v->set);
    free(v->keys);
    v->set = 0;
    v->keys = 0;
    v->sets = 0;
}

/* lines entries in ways-way sets (ways 0 or >= lines: one set); lines 0: absent. 0 without
 * memory or for a geometry Python should have refused (lines not a power-of-two multiple of
 * ways). */
static int level_init(struct spe_level *v, uint32_t lines, uint32_t ways)
{
    v->sets = 0;
    v->set = 0;
    v->keys = 0;
    if (lines == 0)
        return 1;
    if (ways == 0 || ways > lines)
        ways = lines;
    uint32_t sets = lines / ways;
    if (sets * ways != lines || (sets & (sets - 1)))
        return 0;
    v->ways = ways;
    if (ways <= SPE_ARRAY_WAYS) {
        v->keys = calloc((size_t)sets * ways, sizeof *v->keys);
        v->sets = v->keys ? sets : 0;
        return v->keys != 0;
    }
    v->set = calloc(sets, sizeof *v->set);
    if (!v->set)
        return 0;
    v->sets = sets;
    for (uint32_t i = 0; i < sets; i++)
        if (!(v->set[i] = lru_new(ways)))
            return 0;
    return 1;
}

/* The way of `row` (ways keys, newest first) that holds want, or ways; with update, want
 * becomes the newest and a miss drops the oldest. A scan and a shift of fixed length, without
 * branches on where the key is: which way holds it is the guest's data, and the host would
 * mispredict an early exit. (Inlined with a constant `ways`, the loops unroll.) */
static inline __attribute__((always_inline)) uint32_t row_access(uint64_t *row, uint64_t want,
                                                                 uint32_t ways, int update)
{
    uint32_t found = 1u << ways;
    for (uint32_t k = 0; k < ways; k++)
        found |= (uint32_t)(row[k] == want) << k;
    uint32_t i = (uint32_t)__builtin_ctz(found);
    if (update) {   /* (the ways 1..last take the one before them) */
        uint32_t last = i - (i == ways);
        for (uint32_t k = ways - 1; k > 0; k--)
            row[k] = k <= last ? row[k - 1] : row[k];
        row[0] = want;
    }
    return i;
}

/* 1 if key is in the level; with update, the access is recorded (LRU order, fill on a miss). */
static inline int level_access(struct spe_level *v, uint64_t key, int update)
{
    if (v->keys) {
        uint64_t *row = v->keys + (size_t)(key & (v->sets - 1)) * v->ways, want = key + 1;
        uint32_t ways = v->ways;
        switch (ways) {   /* (the usual geometries, unrolled) */
        case 4: return row_access(row, want, 4, update) < 4;
        case 8: return row_access(row, want, 8, update) < 8;
        case 16: return row_access(row, want, 16, update) < 16;
        default: return row_access(row, want, ways, update) < ways;
        }
    }
    struct spe_lru *l = v->set[key & (v->sets - 1)];
    return update ? lru_touch(l, key) : lru_contains(l, key);
}

void spe_model_free(struct spe_model *m)
{
    if (!m)
        return;
    worker_stop(m);
    lru_free(m->modified);
    level_free(&m->tlb), level_free(&m->l1d), level_free(&m->l2), level_free(&m->llc);
    targets_release(&m->targets);
    targets_release(&m->sites);
    free(m->pht), free(m->ras);
    free(m);
}

/* A model with the geometry g: lines and ways of the TLB (4 KiB pages), L1D, L2 (lines 0: no
 * L2) and LLC (64-byte lines), in that order; and the predictor p: gshare bits (1..24) and
 * return stack entries (0..1024). NULL without memory or for a bad geometry. */
struct spe_model *spe_model_new(const uint32_t *g, const uint32_t *p)
{
    struct spe_model *m = aligned_alloc(64, sizeof *m);   /* (spe_model.worker's line) */
    if (!m)
        return 0;
    memset(m, 0, sizeof *m);
    m->gshare_bits = p[0];
    m->ras_depth = p[1];
    if (p[0] < 1 || p[0] > 24 || p[1] > 1024
            || !level_init(&m->tlb, g[0], g[1]) || !level_init(&m->l1d, g[2], g[3])
            || !level_init(&m->l2, g[4], g[5]) || !level_init(&m->llc, g[6], g[7])
            || !m->tlb.sets || !m->l1d.sets || !m->llc.sets
            || !targets_alloc(&m->targets, 64) || !targets_alloc(&m->sites, 1024)
            || !(m->pht = malloc((size_t)1 << p[0]))
            || !(m->ras = calloc(p[1] ? p[1] : 1, sizeof *m->ras))) {
        spe_model_free(m);
        return 0;
    }
    memset(m->pht, 2, (size_t)1 << p[0]);   /* weakly taken */
    m->llcp = &m->llc;
    return m;
}

/* 1 if key was in the level, which no longer holds it (the other ways keep their order). */
static int level_remove(struct spe_level *v, uint64_t key)
{
    if (!v->sets)
        return 0;
    if (v->keys) {
        uint64_t *row = v->keys + (size_t)(key & (v->sets - 1)) * v->ways, want = key + 1;
        uint32_t i = 0;
        while (i < v->ways && row[i] != want)
            i++;
        if (i == v->ways)
            return 0;
        for (; i + 1 < v->ways; i++)
            row[i] = row[i + 1];
        row[v->ways - 1] = 0;
        return 1;
    }
    return lru_remove(v->set[key & (v->sets - 1)], key);
}

/* Several PEs: the models of n PEs (n >= 2) share PE 0's LLC and keep their L1D and L2
 * coherent (invalidation-based, docs/model.md "Several PEs"): a store invalidates the line
 * in every other PE's L1D and L2, and a load that misses its own L1D and L2 while another PE
 * holds the line modified is served by that peer (SPE_LEVEL_PEER), which keeps a shared
 * copy. 0 without memory. The models must outlive each other's use (freed together). */
int spe_model_join(struct spe_model **models, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        struct spe_model *m = models[i];
        worker_stop(m);   /* (several PEs: no worker) */
        uint32_t cap = m->l1d.sets * m->l1d.ways + m->l2.sets * m->l2.ways;
        if (!m->modified && !(m->modified = lru_new(cap)))
            return 0;
        m->peers = models;
        m->npeers = n;
        m->self = i;
        m->llcp = &models[0]->llc;
        m->owned_line = 0;
    }
    return 1;
}

/* Another PE's store to `line`: this PE's copies are invalid. */
static void snooped_out(struct spe_model *q, uint64_t line)
{
    level_remove(&q->l1d, line);
    level_remove(&q->l2, line);
    lru_remove(q->modified, line);
    if (q->last_line == line + 1)
        q->last_line = 0;
    if (q->owned_line == line + 1)
        q->owned_line = 0;
}

/* The peer whose L1D or L2 holds `line` modified, or NULL; with update its copy becomes
 * shared (no longer modified). */
static struct spe_model *modified_peer(struct spe_model *m, uint64_t line, int update)
{
    for (uint32_t i = 0; i < m->npeers; i++) {
        struct spe_model *q = m->peers[i];
        if (i == m->self)
            continue;
        if (update && q->owned_line == line + 1)
            q->owned_line = 0;   /* (this PE takes a copy: q's next store must snoop it, even
                                  * if q's caches no longer hold the line) */
        if (!lru_contains(q->modified, line))
            continue;
        if (!level_access(&q->l1d, line, 0) && !(q->l2.sets && level_access(&q->l2, line, 0)))
            continue;
        if (update)
            lru_remove(q->modified, line);
        return q;
    }
    return 0;
}

/* The outcome of a data access to 64-byte line `line` (in 4 KiB page line >> 6): SPE_OUT_WALK
 * when the TLB misses the page, and the level that holds the line (SPE_LEVEL_* <<
 * SPE_OUT_LEVEL_SHIFT): the L1D, else the L2 (when present), else the LLC, else DRAM. Each
 * level is looked up only when the ones above it miss. With update the access is recorded (a
 * level that misses is filled), else the model is only read. */
int spe_model_access(struct spe_model *m, uint64_t line, int update)
{
    return spe_model_access_rw(m, line, update, 0);
}

/* A recorded access to the line of the last one: an L1D hit that changes nothing (it and its
 * page are already the newest of their sets), counted. */
static inline void count_last_line_again(struct spe_model *m)
{
    m->stats[SPE_STAT_ACCESSES]++;
    m->stats[SPE_LEVEL_L1D]++;
}

/* spe_model_access of a load (store 0) or a store (store 1): with several PEs (spe_model_join)
 * a recorded store invalidates the other PEs' copies first; a store that misses its own L1D
 * and L2 while another PE held the line modified gets it from that peer (SPE_LEVEL_PEER), as
 * a load does. */
int spe_model_access_rw(struct spe_model *m, uint64_t line, int update, int store)
{
    model_sync(m);
    return access_rw(m, line, update, store);
}

static int access_rw(struct spe_model *m, uint64_t line, int update, int store)
{
    uint64_t page = line >> 6;
    int from_peer = 0;   /* (a store: another PE held the line modified before it) */
    if (m->peers && store && (!update || m->owned_line != line + 1))
        from_peer = modified_peer(m, line, 0) != 0;
    if (m->peers && store && update && m->owned_line != line + 1) {
        for (uint32_t i = 0; i < m->npeers; i++)
            if (i != m->self)
                snooped_out(m->peers[i], line);
        lru_touch(m->modified, line);
        m->owned_line = line + 1;
    }
    if (line + 1 == m->last_line) {
        if (update)
            count_last_line_again(m);
        return SPE_LEVEL_L1D << SPE_OUT_LEVEL_SHIFT;
    }
    int out = 0;
    if (page + 1 != m->last_page)   /* (the newest page: a hit that changes nothing) */
        out = level_access(&m->tlb, page, update) ? 0 : SPE_OUT_WALK;
    int level = SPE_LEVEL_L1D;
    if (!level_access(&m->l1d, line, update)) {
        level = SPE_LEVEL_L2;
        if (!m->l2.sets || !level_access(&m->l2, line, update)) {
            level = SPE_LEVEL_LLC;
            if (m->peers && (store ? from_peer : modified_peer(m, line, update) != 0))
                level = SPE_LEVEL_PEER;
            if (!level_access(m->llcp, line, update) && level == SPE_LEVEL_LLC)
                level = SPE_LEVEL_DRAM;
        }
    }
    if (update) {
        m->last_line = line + 1;
        m->last_page = page + 1;
        m->stats[SPE_STAT_ACCESSES]++;
        m->stats[SPE_STAT_WALKS] += (uint64_t)(out & SPE_OUT_WALK);
        m->stats[level]++;
    }
    return out | level << SPE_OUT_LEVEL_SHIFT;
}

/* One level alone (which: 0 TLB, 1 L1D, 2 L2, 3 LLC): 1 if key is there; recorded with
 * update. -1 for an absent level. (Tests check the replacement policy through this.) */
int spe_model_touch(struct spe_model *m, uint32_t which, uint64_t key, int update)
{
    model_sync(m);
    struct spe_level *v = which == 0 ? &m->tlb : which == 1 ? &m->l1d
                          : which == 2 ? &m->l2 : m->llcp;
    if (update)
        m->last_line = m->last_page = 0;
    return v->sets ? level_access(v, key, update) : -1;
}

/* 1 and *old when the indirect branch at pc had a last target (now target); 0 when it had
 * none; -1 without memory. */
static int target_swap(struct spe_model *m, uint64_t pc, uint64_t target, uint64_t *old)
{
    int had;
    if (!targets_swap(&m->targets, pc, target, old, &had))
        return -1;
    return had;
}

int spe_model_target_swap(struct spe_model *m, uint64_t pc, uint64_t target, uint64_t *old)
{
    model_sync(m);
    return target_swap(m, pc, target, old);
}

/* The return stack: push a return address, or pop the newest (0 when empty). */
static void ras_push(struct spe_model *m, uint64_t address)
{
    if (!m->ras_depth)
        return;
    m->ras_top = m->ras_top + 1 == m->ras_depth ? 0 : m->ras_top + 1;   /* (no division) */
    m->ras[m->ras_top] = address;
    if (m->ras_count < m->ras_depth)
        m->ras_count++;
}

static void ras_pop(struct spe_model *m)
{
    if (m->ras_count) {
        m->ras_top = m->ras_top ? m->ras_top - 1 : m->ras_depth - 1;
        m->ras_count--;
    }
}

/* The branch predictor, the one rule of what a record's MISPREDICTED event says (record.c
 * and RecordBuilder through Model.branch for records, counter.c feed_branch for training): whether
 * the branch at pc of kind (SPE_BR_* flags, spe_emu.spe.records.branch_kind), taken or not,
 * to target is mispredicted (docs/model.md "Branch prediction"):
 *  - a conditional branch by gshare: the two-bit counter at PC XOR the global history says
 *    taken when >= 2 (the direction only: a taken direct branch's target is known);
 *  - a return (RET*) by the return stack: mispredicted unless its newest entry is target;
 *    an exception return (ERET) is always predicted;
 *  - another indirect branch by the last target its PC went to (a BTB with an entry per PC);
 *  - an unconditional direct branch is always predicted.
 * With update the branch trains the predictor: the counter moves towards the outcome and the
 * history takes it, a return pops, a call (BL, BLR, BLRAA...) pushes pc + 4, an indirect
 * branch's target becomes its PC's last target. Returns 1 mispredicted, 0 not, -1 out of
 * memory. */
static inline __attribute__((always_inline)) int model_branch(
        struct spe_model *m, uint32_t kind, uint64_t pc, uint64_t target, int taken, int update)
{
    int mispredicted = 0;
    if (kind & SPE_BR_ERET)
        return 0;
    if (kind & SPE_BR_RETURN) {
        mispredicted = !m->ras_count || m->ras[m->ras_top] != target;
        if (update)
            ras_pop(m);
    } else if (kind & SPE_BR_INDIRECT) {
        uint64_t old = 0;
        int had = update ? target_swap(m, pc, target, &old)
                         : targets_peek(&m->targets, pc, &old);
        if (had < 0)
            return -1;
        mispredicted = !had || old != target;
    } else if (kind & SPE_BR_COND) {
        /* (without branches on the outcome: a guest's data-dependent branch would make the
         * host mispredict its own here as often) */
        uint64_t mask = ((uint64_t)1 << m->gshare_bits) - 1;
        uint8_t *counter = &m->pht[((pc >> 2) ^ m->history) & mask];
        unsigned t = taken != 0, ctr = *counter;
        mispredicted = (ctr >= 2) != t;
        if (update) {
            *counter = (uint8_t)(ctr + (t & (ctr < 3)) - (!t & (ctr > 0)));
            m->history = (m->history << 1 | t) & mask;
        }
    }
    if (update && (kind & SPE_BR_CALL))
        ras_push(m, pc + 4);
    return mispredicted;
}

/* model_branch, exported (record.c, counter.c's captures, Python's Model.branch), after the
 * trainer has trained every branch handed to it (model_sync). */
int spe_model_branch(struct spe_model *m, uint32_t kind, uint64_t pc, uint64_t target,
                     int taken, int update)
{
    model_sync(m);
    return model_branch(m, kind, pc, target, taken, update);
}

/* The kind of an instruction word (spe_model_classify), remembered by word. */
static inline uint32_t word_kind(struct spe_model *m, uint32_t word)
{
    uint32_t slot = (uint32_t)((word * 0x9E3779B97F4A7C15ull) >> 52) & (SPE_WORD_CACHE - 1);
    if (m->word_kind[slot].key != ((uint64_t)1 << 32 | word)) {
        m->word_kind[slot].key = (uint64_t)1 << 32 | word;
        m->word_kind[slot].kind = spe_model_classify(m, word);
    }
    return m->word_kind[slot].kind;
}

/* The branch trainer (docs/model.md "Branch prediction"): one entry (SPE_TRAIN_*, spe_native.h)
 * of the sequence of blocks run, in order, from spe_model_trace_batch (the blocks the
 * translated code counted) and counter.c's block_slow (the others); the model's thread runs
 * it for the entries in its ring. A block trains the predictor with the branch that ended
 * the block before it, as counter.c's feed_branch does when it runs at every block: the
 * captures handed since (SPE_TRAIN_CAPTURE) first take that branch's verdict. */
static void train_entry(struct spe_model *m, uint64_t w0, uint64_t w1)
{
    uint64_t type = w0 & ((uint64_t)3 << 60);
    uint64_t address = (uint64_t)((int64_t)(w0 << 8) >> 8);
    if (type == SPE_TRAIN_CAPTURE) {
        if (m->train_ncaps < 2)
            m->train_caps[m->train_ncaps++] = (uint64_t *)(uintptr_t)w1;
        return;
    }
    if (type == SPE_TRAIN_LAST) {
        m->train_pc = address;
        m->train_kw = (uint32_t)w1;
        m->train_is_kind = 1;
        m->train_valid = (int)(w1 >> 32 & 1);
        return;
    }
    if (m->train_valid) {
        uint32_t kind = m->train_is_kind ? (uint32_t)m->train_kw
                                         : word_kind(m, (uint32_t)m->train_kw);
        if (kind & SPE_BR_BRANCH) {
            uint64_t pc = m->train_pc;
            int taken = address != pc + 4;
            for (uint32_t i = 0; i < m->train_ncaps; i++)
                __atomic_store_n(m->train_caps[i],
                                 (uint64_t)(model_branch(m, kind, pc, address, taken, 0) != 0),
                                 __ATOMIC_RELAXED);
            int mispredicted = model_branch(m, kind, pc, address, taken, 1);
            m->train_branches++;
            m->train_mispredicts += mispredicted != 0;
        }
    }
    m->train_ncaps = 0;
    uint64_t n = trace_block_insns(w1);   /* (w1: the entry's info without its top bits) */
    m->train_valid = n != 0;
    m->train_pc = address + 4 * (n - 1);
    m->train_kw = (uint32_t)w1;
    m->train_is_kind = type == SPE_TRAIN_KIND;
}

/* Hands the trainer one entry (SPE_TRAIN_*): through the worker's ring when the model has
 * one and the counter feeds it (spe_model_trace_batch's rule), otherwise at once. */
void spe_model_train(struct spe_counter *c, uint64_t w0, uint64_t w1)
{
    struct spe_model *m = c->feed;
    struct spe_worker *w = m->worker;
    if (!(c->pmu_on | (uint64_t)c->gt_events) && (w || (w = worker_of(m)))) {
        uint64_t h = w->head_local;
        worker_room(m, w, h, 2);
        w->ring[h++ & (SPE_RING_WORDS - 1)] = w0;
        w->ring[h++ & (SPE_RING_WORDS - 1)] = w1;
        w->head_local = h;
        c->trainer_live = 1;
        if ((w0 & ((uint64_t)3 << 60)) == SPE_TRAIN_CAPTURE)
            w->fed_pending = 1;
        else if (w->fed_pending) {   /* (the block after it gives the capture its verdict) */
            w->fed_head = h;
            w->fed_pending = 0;
        }
        if (h - atomic_load_explicit(&w->head, memory_order_relaxed) >= SPE_PUBLISH)
            worker_publish(m, w);
        return;
    }
    model_sync(m);
    train_entry(m, w0, w1);
}

/* Before blocks are handed to the trainer (spe_model_trace_batch, counter.c hand_block), with
 * the block handed last valid (handed_valid): if an exception or a stop (Python's debugger
 * and alignment checks, counter.c spe_end_block_at) has since ended that block early
 * (block_insns), the instruction that ran last is not the one the trainer has. It is no
 * branch: within a block only the last instruction can be one (a branch ends a block), so
 * nothing trains on the way out of it (SPE_TRAIN_LAST without an instruction). */
void spe_model_train_last(struct spe_counter *c)
{
    if (c->handed_start == c->block_start && c->handed_insns == c->block_insns)
        return;
    spe_model_train(c, SPE_TRAIN | SPE_TRAIN_LAST, 0);
    c->handed_start = c->block_start;
    c->handed_insns = c->block_insns;
}

void spe_model_trained(struct spe_model *m, uint64_t *branches, uint64_t *mispredicts)
{
    model_sync(m);
    *branches = m->train_branches;
    *mispredicts = m->train_mispredicts;
}

/* The encodings of branches (spe_emu.spe.records.BRANCH_ENCODINGS): n (at most
 * SPE_ENCODINGS) triples of word mask, value and kind. Forgets the sites classified. */
void spe_model_set_encodings(struct spe_model *m, const uint32_t *masks, const uint32_t *values,
                             const uint32_t *kinds, uint32_t n)
{
    model_sync(m);
    m->encodings = n < SPE_ENCODINGS ? n : SPE_ENCODINGS;
    memset(m->word_kind, 0, sizeof m->word_kind);
    memcpy(m->enc_mask, masks, m->encodings * sizeof *masks);
    memcpy(m->enc_value, values, m->encodings * sizeof *values);
    memcpy(m->enc_kind, kinds, m->encodings * sizeof *kinds);
    spe_model_sites_clear(m);
}

/* The kind of the instruction word (SPE_BR_* | SPE_BR_BRANCH; 0: no branch). */
uint32_t spe_model_classify(const struct spe_model *m, uint32_t word)
{
    for (uint32_t i = 0; i < m->encodings; i++)
        if ((word & m->enc_mask[i]) == m->enc_value[i])
            return m->enc_kind[i];
    return 0;
}

/* The slot of the branch site at pc in spe_model.site_key/site_val (PC[11:2]). */
static inline uint32_t site_slot(uint64_t pc)
{
    return (uint32_t)(pc >> 2) & (SPE_SITE_CACHE - 1);
}

/* The kind of the instruction at pc into *kind: 1, or 0 when it is not known yet. */
int spe_model_site_kind(struct spe_model *m, uint64_t pc, uint32_t *kind)
{
    uint32_t slot = site_slot(pc);
    uint64_t value = 0;
    if (m->site[slot].key == pc + 1) {
        *kind = m->site[slot].kind;
        return 1;
    }
    if (!targets_peek(&m->sites, pc, &value))
        return 0;
    *kind = (uint32_t)value;
    m->site[slot].key = pc + 1;
    m->site[slot].kind = *kind;
    return 1;
}

void spe_model_site_add(struct spe_model *m, uint64_t pc, uint32_t kind)
{
    uint64_t old = 0;
    int had;
    if (targets_swap(&m->sites, pc, kind, &old, &had)) {   /* (no memory: not remembered) */
        m->site[site_slot(pc)].key = pc + 1;
        m->site[site_slot(pc)].kind = kind;
    }
}

/* Code or its mapping may have changed (Machine._forget_code): forget the sites' kinds. */
void spe_model_sites_clear(struct spe_model *m)
{
    memset(m->sites.used, 0, (size_t)m->sites.mask + 1);
    m->sites.count = 0;
    memset(m->site, 0, sizeof m->site);
}

/* The branch that ended a block at pc, the run going on at next (counter.c feed_branch):
 * trains the predictor (spe_model_branch with update) when the site's kind is known and a
 * branch. Returns spe_model_branch's verdict, SPE_SITE_NO_BRANCH, or SPE_SITE_UNKNOWN (the
 * caller classifies the site: counter.c site_kind). One call for the two look-ups: the block
 * hook makes it at every block. The caller has waited for the model's thread if it may
 * still have blocks for the trainer (counter.c feed_branch, trainer_live). */
int spe_model_feed_branch(struct spe_model *m, uint64_t pc, uint64_t next)
{
    uint32_t kind;
    if (!spe_model_site_kind(m, pc, &kind))
        return SPE_SITE_UNKNOWN;
    if (!(kind & SPE_BR_BRANCH))
        return SPE_SITE_NO_BRANCH;
    return model_branch(m, kind, pc, next, next != pc + 4, 1);
}

/* Copies the counts of accesses recorded (SPE_STAT_*) to out. */
void spe_model_stats(struct spe_model *m, uint64_t *out)
{
    model_sync(m);
    memcpy(out, m->stats, sizeof m->stats);
}

/* One data access of the instruction at pc (0: not read yet, read_pc reads it when needed)
 * recorded in the model c->feed -- each 64-byte line and 4 KiB page it touches, lowest
 * first. The first access of the instruction a capture armed (c->armed_pc) gives that
 * capture its outcome (spe_capture.fed), as its record must show it; with ground truth,
 * the first access of each execution its PC's counts. The caller has waited for the model's
 * worker (model_sync). */
static void feed_access(void *uc, struct spe_counter *c, uint64_t pc, uint64_t address,
                        uint64_t size, int store)
{
    struct spe_model *m = c->feed;
    if (c->insns >= c->feed_until)   /* (the Profiling Buffer disabled long enough) */
        return;
    uint64_t last = address + (size ? size - 1 : 0);
    uint64_t line = address >> 6;
    if (c->pmu_on) {   /* (an instruction's first access counts it: its later ones, same PC) */
        if (!pc && c->reg_read(uc, c->pc_id, &pc) != 0)
            pc = 0;
        if (!pc || pc != c->pmu_last_pc) {
            c->pmu_last_pc = pc;
            if (store)
                c->pmu_stores++;
            else
                c->pmu_loads++;
        }
    }
    if (c->armed | (uint64_t)c->gt_events) {
        if (!pc && c->reg_read(uc, c->pc_id, &pc) != 0)   /* (synced for memory hooks) */
            pc = 0;
        int first = pc && pc != c->gt_last_pc;   /* (an instruction's later accesses: same PC) */
        int out = access_rw(m, line++, 1, store);
        if (c->armed && pc == c->armed_pc) {
            c->caps[c->armed - 1].fed = (uint64_t)out;
            c->armed = 0;
        }
        if (c->gt_events && first) {
            c->gt_last_pc = pc;
            spe_gt_event(c, pc, out, -1);
        }
    }
    for (; line <= last >> 6; line++)
        access_rw(m, line, 1, store);
}

/* UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE callback (model_feed "every" with Unicorn's own
 * library; user data: the block hook's counter): every data access the PE makes, at its
 * physical address (feed_access). */
void spe_model_hook(void *uc, int type, uint64_t address, int size, int64_t value,
                    struct spe_counter *c)
{
    (void)value;
    model_sync(c->feed);
    feed_access(uc, c, 0, address, size > 0 ? (uint64_t)size : 0, type == SPE_UC_MEM_WRITE);
}

/* Nothing needs an access's PC (no capture armed, no PMU, no ground truth) and there is one
 * PE: spe_model_trace_batch's accesses go straight to the model. */
static inline int batch_plain(const struct spe_counter *c, const struct spe_model *m)
{
    return !m->peers && !(c->armed | c->pmu_on | (uint64_t)c->gt_events);
}

/* The batched memory trace's callback (uc_mem_trace_batch_set, patches/unicorn/0011: the
 * translated code appends each access to a buffer inline; Unicorn hands it over when it runs
 * short, before the TLB changes, before any hook but a block hook runs, and when
 * uc_emu_start returns; the block hook flushes it in block_slow and before a block that
 * crosses feed_until; user data: the block hook's counter): count accesses, oldest first
 * (feed_access), in the order and with the outcomes the per-access trace gave them. */
void spe_model_trace_batch(struct spe_counter *c, const struct spe_trace_entry *e, size_t count)
{
    struct spe_model *m = c->feed;
    /* (feed_access's rule, instructions counted below feed_until: the buffer is flushed
     * before a block crosses it, so a batch is all before it or all after) */
    if (c->insns >= c->feed_until) {
        const struct spe_trace_entry *blk = 0;
        for (const struct spe_trace_entry *end = e + count; e < end; e++)
            if (trace_is_block(e->info))
                blk = e;
        trace_blocks_seen(c, blk, 0);
        return;
    }
    /* (m->worker first: m->peers shares a cache line with what the worker writes; a model
     * with a worker has no peers, spe_model_join) */
    if (c->handed_valid)
        spe_model_train_last(c);
    struct spe_worker *w = m->worker;
    if (!(c->pmu_on | (uint64_t)c->gt_events) && (w || (w = worker_of(m)))) {
        worker_feed(c, m, w, e, count);
        return;
    }
    model_sync(m);
    /* (plain: the accesses go straight to the model; the line of the last access again,
     * within it, is an L1D hit that changes nothing, spe_model_access_rw. Only a capture's
     * access changes what batch_plain says.) */
    int plain = batch_plain(c, m);
    const struct spe_trace_entry *blk = 0;
    for (const struct spe_trace_entry *end = e + count; e < end; e++) {
        if (trace_is_block(e->info))
            blk = e;
        else if (!plain) {
            feed_access(0, c, trace_pc(e), e->addr, trace_size(e), (int)(e->info >> 59 & 1));
            plain = batch_plain(c, m);
            continue;
        }
        record_entry(m, e->addr, e->info, 0);
    }
    trace_blocks_seen(c, blk, 1);
}
