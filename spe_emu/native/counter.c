/*
 * Native instruction counter for the spe_emu run loop.
 *
 * A Unicorn UC_HOOK_BLOCK callback (called once per translated-block execution, not per
 * instruction) that counts retired A64 instructions (4 bytes each) and stops emulation before
 * the block that contains instruction number `stop_at` (0-based count of instructions retired
 * so far). The Python side reads and writes the struct through ctypes; there is no Python
 * callback on the hot path.
 *
 * The file is also a (trivial) CPython extension module so setuptools can build it; the
 * module itself exports nothing.
 */
#include <stdint.h>

typedef int (*spe_stop_fn)(void *uc);

struct spe_counter {
    uint64_t insns;        /* instructions of every block entered so far */
    uint64_t block_start;  /* address of the block being executed */
    uint64_t block_insns;  /* its length in instructions */
    uint64_t stop_at;      /* stop before the block holding instruction #stop_at */
    spe_stop_fn emu_stop;  /* uc_emu_stop from libunicorn */
    uint64_t stops;        /* number of stops requested by this hook */
    uint64_t stop_block;   /* address of the block we stopped in front of */
    uint64_t stop_block_insns; /* its length in instructions */
};

/* Lets the loader reject a stale build whose struct layout differs from the Python mirror. */
const uint64_t spe_counter_size = sizeof(struct spe_counter);

void spe_block_hook(void *uc, uint64_t address, uint32_t size, struct spe_counter *c)
{
    uint64_t n = size >> 2;
    if (n == 0)
        return;
    if (c->insns + n > c->stop_at) {
        c->stops++;
        c->stop_block = address;
        c->stop_block_insns = n;
        c->emu_stop(uc);
        return;
    }
    c->block_start = address;
    c->block_insns = n;
    c->insns += n;
}

#include <Python.h>
static struct PyModuleDef spe_counter_module = {PyModuleDef_HEAD_INIT, "_counter",
    "Native block-hook instruction counter (used through ctypes).", -1, NULL};
PyMODINIT_FUNC PyInit__counter(void) { return PyModule_Create(&spe_counter_module); }
