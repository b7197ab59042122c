/* SPDX-License-Identifier: MIT */
/* Freestanding helpers: string functions and a small printf. */
#include "lib.h"

#include "semihost.h"

#define FW_PRINTF_LINE_MAX	256

size_t fw_strlen(const char *s)
{
	size_t n = 0;

	while (s[n] != '\0')
		n++;
	return n;
}

void *memset(void *d, int c, size_t n)
{
	volatile unsigned char *p = d;	/* keep GCC from turning this into memset() */

	while (n--)
		*p++ = (unsigned char)c;
	return d;
}

void *memcpy(void *d, const void *s, size_t n)
{
	volatile unsigned char *dp = d;
	const unsigned char *sp = s;

	while (n--)
		*dp++ = *sp++;
	return d;
}

void *memmove(void *d, const void *s, size_t n)
{
	volatile unsigned char *dp = d;
	const unsigned char *sp = s;

	if (dp <= sp || dp >= sp + n)
		return memcpy(d, s, n);
	while (n--)
		dp[n] = sp[n];
	return d;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const unsigned char *pa = a, *pb = b;

	for (; n; n--, pa++, pb++)
		if (*pa != *pb)
			return *pa - *pb;
	return 0;
}

struct out {
	char *buf;
	size_t size;
	size_t len;	/* characters produced (may exceed size) */
};

static void out_char(struct out *o, char c)
{
	if (o->len + 1 < o->size)
		o->buf[o->len] = c;
	o->len++;
}

static void out_number(struct out *o, uint64_t v, unsigned base, int negative,
		       unsigned width, char pad)
{
	static const char digits[] = "0123456789abcdef";
	char tmp[24];
	unsigned n = 0;

	do {
		tmp[n++] = digits[v % base];
		v /= base;
	} while (v != 0);
	if (negative)
		tmp[n++] = '-';
	while (width > n) {
		out_char(o, pad);
		width--;
	}
	while (n)
		out_char(o, tmp[--n]);
}

int fw_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
	struct out o = { .buf = buf, .size = size, .len = 0 };

	for (; *fmt; fmt++) {
		unsigned width = 0, lng = 0;
		char pad = ' ';
		uint64_t u;
		int64_t s;

		if (*fmt != '%') {
			out_char(&o, *fmt);
			continue;
		}
		fmt++;
		if (*fmt == '0') {
			pad = '0';
			fmt++;
		}
		while (*fmt >= '0' && *fmt <= '9')
			width = width * 10 + (unsigned)(*fmt++ - '0');
		while (*fmt == 'l' || *fmt == 'z') {
			lng++;
			fmt++;
		}
		switch (*fmt) {
		case 'd':
			s = lng ? va_arg(ap, int64_t) : va_arg(ap, int);
			out_number(&o, s < 0 ? -(uint64_t)s : (uint64_t)s, 10, s < 0, width, pad);
			break;
		case 'u':
		case 'x':
			u = lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned int);
			out_number(&o, u, *fmt == 'u' ? 10 : 16, 0, width, pad);
			break;
		case 'p':
			out_char(&o, '0');
			out_char(&o, 'x');
			out_number(&o, (uint64_t)va_arg(ap, void *), 16, 0, width, pad);
			break;
		case 'c':
			out_char(&o, (char)va_arg(ap, int));
			break;
		case 's': {
			const char *str = va_arg(ap, const char *);

			if (!str)
				str = "(null)";
			while (*str)
				out_char(&o, *str++);
			break;
		}
		case '%':
			out_char(&o, '%');
			break;
		case '\0':
			fmt--;
			break;
		default:
			out_char(&o, '%');
			out_char(&o, *fmt);
			break;
		}
	}
	if (size)
		o.buf[o.len < size ? o.len : size - 1] = '\0';
	return (int)o.len;
}

int fw_snprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = fw_vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n;
}

void fw_printf(const char *fmt, ...)
{
	char line[FW_PRINTF_LINE_MAX];
	va_list ap;

	va_start(ap, fmt);
	fw_vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	semihost_write0(line);
}
