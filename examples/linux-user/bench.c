/* SPDX-License-Identifier: MIT */
/*
 * A static Linux program for the Linux user-mode speed row of scripts/bench.py: sorts, hashes
 * and formats with glibc, so time goes to ordinary library code (qsort, snprintf, malloc),
 * not to one hand-written loop. Prints one checksum line.
 *
 *     aarch64-linux-gnu-gcc -static -O2 -o bench bench.c && spe-emu run ./bench -- 200000
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 0x9E3779B97F4A7C15u;

static uint64_t next(void)
{
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	return state;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	uint32_t *v = malloc(n * sizeof *v);
	char **s = malloc(n / 8 * sizeof *s);
	uint64_t h = 1469598103934665603u;
	char buf[64];

	if (!v || !s)
		return 1;
	for (long i = 0; i < n; i++)
		v[i] = (uint32_t)next();
	qsort(v, n, sizeof *v, cmp_u32);
	for (long i = 0; i < n / 8; i++) {
		snprintf(buf, sizeof buf, "%08x-%ld", v[(i * 7919) % n], i);
		s[i] = strdup(buf);
	}
	qsort(s, n / 8, sizeof *s, cmp_str);
	for (long i = 0; i < n / 8; i++) {
		for (const char *p = s[i]; *p; p++)
			h = (h ^ (unsigned char)*p) * 1099511628211u;
		free(s[i]);
	}
	for (long i = 0; i < n; i += 3)
		h = (h ^ v[i]) * 1099511628211u;
	printf("checksum: 0x%016llx\n", (unsigned long long)h);
	free(v);
	free(s);
	return 0;
}
