/* Pointer chase: a random cycle through NODES 64-byte nodes, LAPS laps (default 4 MiB, 4x
 * the default LLC, 16 laps; tests/test_cores.py builds 64 MiB, 2 laps, with -D). */
#include <stdio.h>
#ifndef NODES
#define NODES (1 << 16)
#endif
#ifndef LAPS
#define LAPS 16
#endif
struct node { struct node *next; long pad[7]; };
static struct node nodes[NODES];
static unsigned order[NODES];
int main(void)
{
    unsigned long x = 88172645463325252ull;
    for (unsigned i = 0; i < NODES; i++)
        order[i] = i;
    for (unsigned i = NODES - 1; i > 0; i--) {   /* Fisher-Yates, xorshift64 */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned j = x % (i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (unsigned i = 0; i < NODES; i++)
        nodes[order[i]].next = &nodes[order[(i + 1) % NODES]];
    struct node *p = &nodes[order[0]];
    long steps = 0;
    for (int lap = 0; lap < LAPS; lap++)
        for (unsigned i = 0; i < NODES; i++, steps++)
            p = p->next;
    printf("%ld %ld\n", steps, (long)(p - nodes));
    return 0;
}
