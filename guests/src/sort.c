/*
 * sort: quicksort (median-of-three, insertion sort below a cutoff) of
 * N pseudo-random 64-bit values, then a sortedness check and a checksum
 * over the sorted array. Data-dependent branches and a 64 KiB working set.
 *
 * checksum = fold(mix64, 0, sorted values in ascending order)
 */
#include <stdio.h>

#include "guest.h"

#define N        8192
#define SEED     0x5350455f534f5254ULL   /* "SPE_SORT" */
#define CUTOFF   16

static uint64_t values[N];

static void insertion_sort(uint64_t *a, long lo, long hi)
{
	for (long i = lo + 1; i <= hi; i++) {
		uint64_t v = a[i];
		long j = i - 1;
		while (j >= lo && a[j] > v) {
			a[j + 1] = a[j];
			j--;
		}
		a[j + 1] = v;
	}
}

static inline void swap(uint64_t *a, long i, long j)
{
	uint64_t t = a[i];
	a[i] = a[j];
	a[j] = t;
}

/* Sorts a[lo..hi] (inclusive); recurses on the smaller half only. */
static void quick_sort(uint64_t *a, long lo, long hi)
{
	while (hi - lo >= CUTOFF) {
		long mid = lo + (hi - lo) / 2;

		/* median of three into a[mid], then use it as the pivot */
		if (a[mid] < a[lo])
			swap(a, mid, lo);
		if (a[hi] < a[lo])
			swap(a, hi, lo);
		if (a[hi] < a[mid])
			swap(a, hi, mid);
		uint64_t pivot = a[mid];

		/* Hoare partition */
		long i = lo - 1, j = hi + 1;
		for (;;) {
			do i++; while (a[i] < pivot);
			do j--; while (a[j] > pivot);
			if (i >= j)
				break;
			swap(a, i, j);
		}
		if (j - lo < hi - j) {
			quick_sort(a, lo, j);
			lo = j + 1;
		} else {
			quick_sort(a, j + 1, hi);
			hi = j;
		}
	}
	insertion_sort(a, lo, hi);
}

int main(void)
{
	uint64_t state = SEED;

	for (long i = 0; i < N; i++)
		values[i] = lcg_next(&state);

	quick_sort(values, 0, N - 1);

	long out_of_order = 0;
	uint64_t h = 0;
	for (long i = 0; i < N; i++) {
		if (i > 0 && values[i - 1] > values[i])
			out_of_order++;
		h = mix64(h, values[i]);
	}

	printf("sort: %d values, %ld out of order\n", N, out_of_order);
	guest_print_checksum(h);
	return out_of_order != 0;
}
