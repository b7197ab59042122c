/*
 * An independent model of the caches and TLB for tests/test_model_crosscheck.py: a QEMU TCG
 * plugin (QEMU 7.2's plugin API, version 1) that runs a TLB, an L1D, an optional L2 and a
 * last level cache with LRU replacement on every data access qemu-aarch64 makes, and writes
 * its counts at exit in the shape of spe_emu's summary.json "model" (docs/model.md "Events
 * and latency model": an access looks up the TLB by 4 KiB page, then each cache level by
 * 64-byte line until one holds it, and fills each level that missed; an access touching
 * several lines is one access per line).
 *
 * Written apart from spe_emu/native/model.c on purpose (a second implementation of the same
 * rules: sets of `ways` entries, a key to set key mod sets, each set an LRU list). In user
 * mode QEMU gives plugins virtual addresses, where spe_emu's model sees physical ones: with
 * fully associative levels (one set) the outcomes are the same for any one-to-one mapping.
 *
 * Arguments: tlb=LINES:WAYS, l1d=..., l2=..., llc=... (ways 0: fully associative; l2 lines
 * 0: no L2; each defaults to spe_emu's default geometry, SpeConfig), out=PATH (the JSON
 * counts).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the plugin API this file uses (QEMU include/qemu/qemu-plugin.h, version 1) ---- */
typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct {
    const char *target_name;
    struct { int min, cur; } version;
    _Bool system_emulation;
} qemu_info_t;
enum { CB_NO_REGS = 0 };
enum { MEM_RW = 3 };
typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*mem_cb)(unsigned int, qemu_plugin_meminfo_t, uint64_t, void *);
typedef void (*udata_cb)(qemu_plugin_id_t, void *);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *, size_t);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *, mem_cb, int, int, void *);
unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, udata_cb, void *);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *, int, void *, uint64_t);
enum { INLINE_ADD_U64 = 0 };
__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* ---- an LRU level: per set, a chained hash of keys and a recency list ---- */
struct entry { uint64_t key; int32_t older, newer, chain; };
struct set { int32_t newest, oldest, count; };
struct level {
    uint64_t sets, ways;
    struct set *set;
    struct entry *e;        /* sets * ways entries; set s owns e[s * ways ...] */
    int32_t *bucket;        /* hash buckets per set: buckets_per_set each */
    uint64_t buckets;
};

static int level_init(struct level *v, uint64_t lines, uint64_t ways)
{
    memset(v, 0, sizeof *v);
    if (!lines)
        return 1;
    if (!ways || ways > lines)
        ways = lines;
    v->sets = lines / ways;
    v->ways = ways;
    v->buckets = 1;
    while (v->buckets < 2 * ways)
        v->buckets <<= 1;
    v->set = calloc(v->sets, sizeof *v->set);
    v->e = calloc(lines, sizeof *v->e);
    v->bucket = malloc(v->sets * v->buckets * sizeof *v->bucket);
    if (!v->set || !v->e || !v->bucket)
        return 0;
    for (uint64_t i = 0; i < v->sets * v->buckets; i++)
        v->bucket[i] = -1;
    for (uint64_t s = 0; s < v->sets; s++)
        v->set[s].newest = v->set[s].oldest = -1;
    return 1;
}

static uint64_t mix(uint64_t k) { k ^= k >> 29; k *= 0xBF58476D1CE4E5B9ull; return k ^ (k >> 32); }

/* 1 if key is held (it becomes the newest); else it is filled as the newest, evicting the
 * oldest of a full set. */
static int level_touch(struct level *v, uint64_t key)
{
    uint64_t s = key % v->sets;
    struct set *st = &v->set[s];
    struct entry *e = v->e + s * v->ways;
    int32_t *b = v->bucket + s * v->buckets;
    uint64_t h = mix(key) & (v->buckets - 1);
    int32_t i;
    for (i = b[h]; i >= 0; i = e[i].chain)
        if (e[i].key == key)
            break;
    if (i >= 0) {
        if (st->newest != i) {           /* unlink, then make newest */
            if (e[i].older >= 0) e[e[i].older].newer = e[i].newer; else st->oldest = e[i].newer;
            e[e[i].newer].older = e[i].older;
            e[i].older = st->newest;
            e[i].newer = -1;
            e[st->newest].newer = i;
            st->newest = i;
        }
        return 1;
    }
    if ((uint64_t)st->count < v->ways) {
        i = st->count++;
    } else {                             /* evict the oldest */
        i = st->oldest;
        int32_t *p = &b[mix(e[i].key) & (v->buckets - 1)];
        while (*p != i)
            p = &e[*p].chain;
        *p = e[i].chain;
        st->oldest = e[i].newer;
        if (st->oldest >= 0) e[st->oldest].older = -1; else st->newest = -1;
    }
    e[i].key = key;
    e[i].chain = b[h];
    b[h] = i;
    e[i].older = st->newest;
    e[i].newer = -1;
    if (st->newest >= 0) e[st->newest].newer = i; else st->oldest = i;
    st->newest = i;
    return 0;
}

static struct level tlb, l1d, l2, llc;
static uint64_t accesses, walks, held[4];   /* held: L1D, L2, LLC, DRAM */
static uint64_t insns;                      /* instructions executed */
static const char *out_path = "model.json";

static void access_line(uint64_t line)
{
    accesses++;
    walks += !level_touch(&tlb, line >> 6);
    if (level_touch(&l1d, line))
        held[0]++;
    else if (l2.sets && level_touch(&l2, line))
        held[1]++;
    else if (level_touch(&llc, line))
        held[2]++;
    else
        held[3]++;
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *u)
{
    (void)vcpu, (void)u;
    uint64_t last = vaddr + (1ull << qemu_plugin_mem_size_shift(info)) - 1;
    for (uint64_t line = vaddr >> 6; line <= last >> 6; line++)
        access_line(line);
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    qemu_plugin_register_vcpu_tb_exec_inline(tb, INLINE_ADD_U64, &insns, n);
    for (size_t i = 0; i < n; i++)
        qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i), on_mem, CB_NO_REGS,
                                         MEM_RW, 0);
}

static void write_counts(qemu_plugin_id_t id, void *u)
{
    (void)id, (void)u;
    FILE *f = fopen(out_path, "w");
    if (!f)
        return;
    fprintf(f, "{\"l1d_hits\": %llu, \"l2_hits\": %llu, \"llc_hits\": %llu, \"dram\": %llu, "
            "\"accesses\": %llu, \"tlb_walks\": %llu, \"instructions\": %llu}\n",
            (unsigned long long)held[0],
            (unsigned long long)held[1], (unsigned long long)held[2],
            (unsigned long long)held[3], (unsigned long long)accesses,
            (unsigned long long)walks, (unsigned long long)insns);
    fclose(f);
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    (void)info;
    uint64_t g[4][2] = {{48, 0}, {512, 4}, {0, 0}, {16384, 16}};
    static const char *names[4] = {"tlb=", "l1d=", "l2=", "llc="};
    for (int a = 0; a < argc; a++) {
        if (!strncmp(argv[a], "out=", 4)) {
            out_path = argv[a] + 4;
            continue;
        }
        for (int k = 0; k < 4; k++)
            if (!strncmp(argv[a], names[k], strlen(names[k])))
                sscanf(argv[a] + strlen(names[k]), "%llu:%llu", (unsigned long long *)&g[k][0],
                       (unsigned long long *)&g[k][1]);
    }
    if (!level_init(&tlb, g[0][0], g[0][1]) || !level_init(&l1d, g[1][0], g[1][1])
            || !level_init(&l2, g[2][0], g[2][1]) || !level_init(&llc, g[3][0], g[3][1]))
        return 1;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
    qemu_plugin_register_atexit_cb(id, write_counts, 0);
    return 0;
}
