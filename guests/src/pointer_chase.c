/*
 * pointer_chase: builds one random cycle through NODES 16-byte nodes
 * (512 KiB, larger than a typical L1 data cache) with Sattolo's algorithm,
 * then follows the next pointers for STEPS dependent loads.
 *
 *   perm: start from the identity; for i = NODES-1 .. 1:
 *         j = (lcg >> 33) % i; swap(perm[i], perm[j])
 *   node[i].next = &node[perm[i]]; node[i].value = lcg (after the shuffle)
 *   walk from node 0: acc = acc * 31 + value, STEPS times
 *   checksum = mix64(mix64(0, acc), index of the final node)
 */
#include <stdio.h>

#include "guest.h"

#define NODES 32768
#define STEPS 262144
#define SEED  0x5350455f43484153ULL   /* "SPE_CHAS" */

struct node {
	struct node *next;
	uint64_t value;
};

static struct node nodes[NODES];
static uint32_t perm[NODES];

int main(void)
{
	uint64_t state = SEED;

	/* Sattolo's shuffle: a uniformly random single-cycle permutation */
	for (uint32_t i = 0; i < NODES; i++)
		perm[i] = i;
	for (uint32_t i = NODES - 1; i > 0; i--) {
		uint32_t j = (uint32_t)((lcg_next(&state) >> 33) % i);
		uint32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (uint32_t i = 0; i < NODES; i++) {
		nodes[i].next = &nodes[perm[i]];
		nodes[i].value = lcg_next(&state);
	}

	/* the chase: every load address depends on the previous load */
	const struct node *p = &nodes[0];
	uint64_t acc = 0;
	for (long s = 0; s < STEPS; s++) {
		acc = acc * 31 + p->value;
		p = p->next;
	}

	uint64_t h = mix64(mix64(0, acc), (uint64_t)(p - nodes));
	printf("pointer_chase: %d nodes, %d steps\n", NODES, STEPS);
	guest_print_checksum(h);
	return 0;
}
