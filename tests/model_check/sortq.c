/* qsort of 100,000 pseudo-random longs (glibc's merge sort with a heap buffer: mmap is kept
 * out so no page is unmapped and mapped again). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#define N 100000
static long v[N];
static int cmp(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}
int main(void)
{
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    unsigned long x = 2463534242ull;
    for (long i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v[i] = (long)(x % 1000000007ull);
    }
    qsort(v, N, sizeof v[0], cmp);
    printf("%ld %ld %ld\n", v[0], v[N / 2], v[N - 1]);
    return 0;
}
