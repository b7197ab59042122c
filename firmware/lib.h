/* SPDX-License-Identifier: MIT */
/* Freestanding helpers: string functions and a small printf. */
#ifndef SPE_FW_LIB_H
#define SPE_FW_LIB_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

size_t fw_strlen(const char *s);

/* the compiler may emit calls to these */
void *memset(void *d, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
void *memmove(void *d, const void *s, size_t n);
int memcmp(const void *a, const void *b, size_t n);

/*
 * Subset of printf: %%, %c, %s, %d, %u, %x, %p with optional '0' flag,
 * field width and 'l'/'ll'/'z' length modifiers. Always NUL-terminates.
 */
int fw_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap);
int fw_snprintf(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* formatted line to the semihosting console (SYS_WRITE0) */
void fw_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#endif /* SPE_FW_LIB_H */
