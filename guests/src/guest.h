/*
 * Shared helpers for the spe_emu C guests.
 *
 * The pseudo-random generator and the checksum mixer are deliberately
 * tiny so that tests/test_images.py can re-implement them in a few lines
 * of Python and check guests/expected.json independently.
 */
#ifndef SPE_EMU_GUEST_H
#define SPE_EMU_GUEST_H

#include <stddef.h>
#include <stdint.h>

/* Knuth's MMIX linear congruential generator (full 64-bit state). */
static inline uint64_t lcg_next(uint64_t *state)
{
	*state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
	return *state;
}

/* Fold one 64-bit word into a running checksum. */
static inline uint64_t mix64(uint64_t h, uint64_t v)
{
	h ^= v;
	h *= 0x9E3779B97F4A7C15ULL;
	h ^= h >> 29;
	return h;
}

/* write(2) through the SVC ABI (x8 = 64). Returns the byte count. */
long guest_write(int fd, const void *buf, size_t len);

/* Print the one line every guest must print: "checksum: 0x%016llx". */
void guest_print_checksum(uint64_t checksum);

#endif
