/*
 * matmul: C = A x B for 64x64 double-precision matrices (SIMD&FP loads,
 * FP multiply-add; 96 KiB working set).
 *
 * Every element of A and B is k/8 for an integer k in [-512, 511], so
 * every product and partial sum is exactly representable: the result is
 * bit-exact whatever the evaluation order, vectorisation or FMA use.
 *
 * checksum = fold(mix64, 0, (int64)(C[i][j] * 64) in row-major order)
 */
#include <stdio.h>

#include "guest.h"

#define DIM  64
#define SEED 0x5350455f4d41544dULL   /* "SPE_MATM" */

static double a[DIM][DIM], b[DIM][DIM], c[DIM][DIM];

/* k/8 with k uniformly-ish in [-512, 511], from the top 10 LCG bits. */
static double next_element(uint64_t *state)
{
	int64_t k = (int64_t)(lcg_next(state) >> 54) - 512;
	return (double)k / 8.0;
}

static void multiply(void)
{
	for (int i = 0; i < DIM; i++) {
		for (int j = 0; j < DIM; j++)
			c[i][j] = 0.0;
		for (int k = 0; k < DIM; k++) {
			double aik = a[i][k];
			for (int j = 0; j < DIM; j++)
				c[i][j] += aik * b[k][j];
		}
	}
}

int main(void)
{
	uint64_t state = SEED;

	for (int i = 0; i < DIM; i++)
		for (int j = 0; j < DIM; j++)
			a[i][j] = next_element(&state);
	for (int i = 0; i < DIM; i++)
		for (int j = 0; j < DIM; j++)
			b[i][j] = next_element(&state);

	multiply();

	uint64_t h = 0;
	for (int i = 0; i < DIM; i++)
		for (int j = 0; j < DIM; j++)
			h = mix64(h, (uint64_t)(int64_t)(c[i][j] * 64.0));

	printf("matmul: %dx%d doubles\n", DIM, DIM);
	guest_print_checksum(h);
	return 0;
}
