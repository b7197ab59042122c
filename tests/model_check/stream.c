/* Streaming: sums and scales an 8 MiB array (8x the LLC), four passes. */
#include <stdio.h>
#define N (1 << 20)
static long a[N];
int main(void)
{
    long sum = 0;
    for (long i = 0; i < N; i++)
        a[i] = i;
    for (int pass = 0; pass < 4; pass++)
        for (long i = 0; i < N; i++) {
            sum += a[i];
            a[i] = a[i] * 3 + pass;
        }
    printf("%ld\n", sum);
    return 0;
}
