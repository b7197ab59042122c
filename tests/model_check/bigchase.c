/* Pointer chase: a random cycle through 64 MiB of 64-byte nodes (twice a 32 MB system cache), 2 laps. */
#include <stdio.h>
#define NODES (1 << 20)
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
    for (int lap = 0; lap < 2; lap++)
        for (unsigned i = 0; i < NODES; i++, steps++)
            p = p->next;
    printf("%ld %ld\n", steps, (long)(p - nodes));
    return 0;
}
