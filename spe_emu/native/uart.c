/*
 * The console UART's common accesses without a Python call: a PL011 (PrimeCell UART r1p5,
 * DDI 0183 §3.3.1 UARTDR, §3.3.3 UARTFR) mapped with these MMIO callbacks sends a character
 * written to UARTDR and answers a read of UARTFR from struct spe_uart while Python's model
 * (spe_emu.devices.pl011.Pl011) says the access would change nothing else: the transmit FIFO
 * empty, the transmitter running, no loopback, TXRIS already set (the write's drain sets it
 * again) -- then the model's state after the write is the state before it, less the
 * character sent. The characters collect in buf, which Python's flush callback takes (to the
 * console and console.log) at a newline, when buf is full and before any access Python
 * handles; Python takes it too before the machine offers console input (a prompt shows) and
 * at the end of the run. No guest-visible state depends on when.
 */
#include "spe_native.h"

const uint64_t spe_uart_size = sizeof(struct spe_uart);

typedef uint64_t (*spe_mmio_read_fn)(void *uc, uint64_t offset, unsigned size, void *data);
typedef void (*spe_mmio_write_fn)(void *uc, uint64_t offset, unsigned size, uint64_t value,
                                  void *data);
typedef void (*spe_uart_flush_fn)(void *uc);

static int plain_size(unsigned size)
{
    return size == 1 || size == 2 || size == 4;   /* (pl011.ACCESS_SIZES) */
}

static void flush(void *uc, struct spe_uart *u)
{
    if (u->len)
        ((spe_uart_flush_fn)u->flush)(uc);
}

/* UC mmio read callback (user data: the struct spe_uart). */
uint64_t spe_uart_read(void *uc, uint64_t offset, unsigned size, struct spe_uart *u)
{
    if (u->steady && offset == u->fr_offset && plain_size(size))
        return (uint64_t)u->fr & ((size == 4 ? 0 : (uint64_t)1 << (8 * size)) - 1);
    flush(uc, u);
    return ((spe_mmio_read_fn)u->read_fallback)(uc, offset, size, 0);
}

/* UC mmio write callback (user data: the struct spe_uart). */
void spe_uart_write(void *uc, uint64_t offset, unsigned size, uint64_t value,
                    struct spe_uart *u)
{
    if (u->steady && offset == u->dr_offset && plain_size(size)) {
        uint8_t c = (uint8_t)value;   /* UARTDR.DATA, bits 7:0 */
        u->buf[u->len++] = c;
        u->last_value = value;
        u->last_size = size;
        u->sent++;
        if (c == '\n' || u->len == SPE_UART_BUF)
            flush(uc, u);
        return;
    }
    flush(uc, u);
    ((spe_mmio_write_fn)u->write_fallback)(uc, offset, size, value, 0);
}
