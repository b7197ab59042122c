/*
 * The guest's operating-system layer: picolibc tinystdio streams and
 * _exit() on top of the firmware's SVC ABI (docs/design.md):
 *   svc #0, x8 = 64: write(fd = x0, buf = x1, len = x2) -> x0 = len
 *   svc #0, x8 = 93: exit(status = x0), never returns
 *
 * stdout and stderr buffer one line each and flush it with a single
 * write call on '\n', when the buffer is full, on fflush() and at _exit().
 */
#include <stdio.h>
#include <unistd.h>

#include "guest.h"

#define SYS_WRITE 64
#define SYS_EXIT  93

#define LINE_BUF_SIZE 128

static long svc3(long nr, long a0, long a1, long a2)
{
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a0;
	register long x1 __asm__("x1") = a1;
	register long x2 __asm__("x2") = a2;

	__asm__ volatile("svc #0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2)
			 : "memory");
	return x0;
}

long guest_write(int fd, const void *buf, size_t len)
{
	return svc3(SYS_WRITE, fd, (long)buf, (long)len);
}

/* A tinystdio stream that buffers one line for a file descriptor. */
struct line_stream {
	FILE file;		/* must be first: picolibc passes &file around */
	int fd;
	size_t len;
	char buf[LINE_BUF_SIZE];
};

static int line_flush(FILE *f)
{
	struct line_stream *s = (struct line_stream *)f;

	if (s->len != 0) {
		guest_write(s->fd, s->buf, s->len);
		s->len = 0;
	}
	return 0;
}

static int line_put(char c, FILE *f)
{
	struct line_stream *s = (struct line_stream *)f;

	s->buf[s->len++] = c;
	if (c == '\n' || s->len == sizeof(s->buf))
		line_flush(f);
	return (unsigned char)c;
}

static int no_input(FILE *f)
{
	(void)f;
	return _FDEV_EOF;
}

static struct line_stream guest_stdout = {
	.file = FDEV_SETUP_STREAM(line_put, NULL, line_flush, _FDEV_SETUP_WRITE),
	.fd = 1,
};

static struct line_stream guest_stderr = {
	.file = FDEV_SETUP_STREAM(line_put, NULL, line_flush, _FDEV_SETUP_WRITE),
	.fd = 2,
};

static FILE guest_stdin = FDEV_SETUP_STREAM(NULL, no_input, NULL, _FDEV_SETUP_READ);

FILE *const stdin = &guest_stdin;
FILE *const stdout = &guest_stdout.file;
FILE *const stderr = &guest_stderr.file;

void _exit(int status)
{
	line_flush(stdout);
	line_flush(stderr);
	svc3(SYS_EXIT, status, 0, 0);
	for (;;)
		;	/* the firmware never returns from exit */
}

void guest_print_checksum(uint64_t checksum)
{
	printf("checksum: 0x%016llx\n", (unsigned long long)checksum);
}
