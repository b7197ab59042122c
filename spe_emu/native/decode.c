/*
 * Bulk SPE trace decoding: the fast path of `spe-emu decode` and `spe-emu report`.
 *
 * spe_emu.spe.packets is the reference decoder (and the only place that knows the header
 * encodings, D18.1.1 and SPE supplement chapter 5). Python hands this file its decode tables
 * (per header byte: packet kind, index, payload size) and, for the text dump, the words
 * describe() uses (per Operation Type class and subclass the whole text, per Events bit its
 * name, per Counter/Context/Address index the text around the value), so nothing here
 * decides what a header or a field means: it walks the bytes by the tables, as
 * packets.iter_packets() does, and prints the lines decode.format_line() prints. Both paths
 * are compared on fuzzed input (tests/test_decode_fast.py, tests/test_decode_perf.py).
 */
#include <stdint.h>
#include <string.h>

#define SPE_BYTE_COLUMNS 16   /* decode.BYTE_COLUMNS: bytes per dump line before the text */
#define SPE_LINE_SLACK 1024   /* room for a line's text beyond its bytes */
#define SPE_LONGEST 65538    /* longest packet: a 64 KiB Alignment command and its fill */
#define SPE_TEXT 48           /* bytes of one text slot (NUL-terminated) */

/* Kind codes of the decode tables besides the PacketType codes Python assigns. */
#define SPE_K_PREFIX 0xfe     /* short table: an extended-header prefix */
#define SPE_K_BAD 0xff        /* extended table: a malformed extended header */

/* How an Address packet index prints (packets._describe_address). */
#define SPE_ADDR_MODE_INSN 0  /* "<name> 0x<addr> el<EL> ns=<NS>" */
#define SPE_ADDR_MODE_VA 1    /* "<name> 0x<payload>" */
#define SPE_ADDR_MODE_PA 2    /* "<name> 0x<addr> ns=<NS> ch=<CH> pat=<PAT>" */
#define SPE_ADDR_MODE_RAW 3   /* "<name> 0x<payload> (<index>)" */

/* Mirrored by spe_emu.tools.bulkdecode.DecodeTables (filled from spe_emu.spe.packets). */
struct spe_decode_tables {
    uint8_t short_kind[256], short_index[256], short_size[256];
    uint8_t ext_kind[32][256], ext_index[32][256], ext_size[32][256];
    /* PacketType codes */
    uint8_t k_padding, k_end, k_timestamp, k_events, k_data_source, k_context, k_op_type,
        k_address, k_counter, k_alignment, k_unknown;
    uint8_t ext_lo_mask;  /* header byte 0 bits that index ext_* (~HDR_EXTENDED_PREFIX_MASK) */
    /* Address payload fields (lsb, width) and the indexes records keep */
    uint8_t addr_lsb, addr_width, el_lsb, el_width, ns_lsb, tag_lsb, tag_width, ch_lsb,
        pat_lsb, pat_width, addr_pc, addr_target, addr_va, addr_pa, pad1[2];
    uint8_t addr_mode[32];
    char addr_name[32][8];
    char event_names[64][SPE_TEXT];
    char op_text[4][256][SPE_TEXT];
    char ts_prefix[16], ds_prefix[16], counter_prefix[16], context_prefix[16];
    char counter_suffix[32][16];
    char context_suffix[4][16];
    uint32_t align_bytes[16];  /* Alignment command SIZE -> bytes (packets.alignment_bytes) */
};

/* One record (packets.Record without its packet list); present: SPE_HAS_* bits. latency[i]
 * is Counter index i (0 total, 1 issue, 2 translation, §5.3.4); context[i] Context index i. */
struct spe_rec_row {
    uint64_t offset, length, pc, target, va, pa, events, timestamp, data_source;
    uint32_t context[2];
    uint32_t present;
    uint16_t latency[3];
    uint8_t el, ns, target_el, target_ns, va_tag, pa_ns, op_class, op_subclass;
};

#define SPE_HAS_PC 0x1
#define SPE_HAS_TARGET 0x2
#define SPE_HAS_VA 0x4
#define SPE_HAS_PA 0x8
#define SPE_HAS_LAT0 0x10     /* << counter index 0..2 */
#define SPE_HAS_OP 0x80
#define SPE_HAS_CTX0 0x100    /* << context index 0..1 */
#define SPE_HAS_DS 0x400
#define SPE_HAS_TS 0x800

const uint64_t spe_decode_tables_size = sizeof(struct spe_decode_tables);
const uint64_t spe_rec_row_size = sizeof(struct spe_rec_row);

/* Outcome of looking at the bytes at one position. */
struct pkt {
    uint8_t kind, index, extended, hlen;
    uint32_t size;        /* payload bytes (alignment: fill bytes) */
    uint64_t payload;
};

#define R_OK 0
#define R_BAD 1           /* bad header */
#define R_SHORT 2         /* the data ends inside the packet */

static uint64_t field(uint64_t v, uint8_t lsb, uint8_t width)
{
    return width >= 64 ? v >> lsb : (v >> lsb) & ((1ull << width) - 1);
}

static int get_packet(const struct spe_decode_tables *t, const uint8_t *buf, uint64_t len,
                      uint64_t pos, struct pkt *p)
{
    uint64_t avail = len - pos;
    uint8_t b0 = buf[pos];
    uint8_t kind = t->short_kind[b0];
    p->extended = 0;
    p->hlen = 1;
    p->payload = 0;
    if (kind == SPE_K_PREFIX) {
        uint8_t b1;
        unsigned lo = b0 & t->ext_lo_mask;  /* the prefix's own bits index ext_* */
        if (avail < 2)
            return R_SHORT;
        b1 = buf[pos + 1];
        kind = t->ext_kind[lo][b1];
        if (kind == SPE_K_BAD)
            return R_BAD;
        p->kind = kind;
        p->index = t->ext_index[lo][b1];
        p->size = t->ext_size[lo][b1];
        p->extended = 1;
        p->hlen = 2;
        if (kind == t->k_alignment) {
            uint64_t align = t->align_bytes[p->index & 15];
            p->size = (uint32_t)((align - (pos + 2) % align) % align);
            return avail < 2 + (uint64_t)p->size ? R_SHORT : R_OK;
        }
    } else {
        p->kind = kind;
        p->index = t->short_index[b0];
        p->size = t->short_size[b0];
    }
    if (avail < p->hlen + (uint64_t)p->size)
        return R_SHORT;
    for (uint32_t i = 0; i < p->size; i++)
        p->payload |= (uint64_t)buf[pos + p->hlen + i] << (8 * i);
    return R_OK;
}

/* ---- text dump ---------------------------------------------------------------------- */

static const char HEX[] = "0123456789abcdef";

static char *put_str(char *o, const char *s)
{
    while (*s)
        *o++ = *s++;
    return o;
}

static char *put_hex(char *o, uint64_t v, int min_digits)
{
    char tmp[16];
    int n = 0;
    do {
        tmp[n++] = HEX[v & 15];
        v >>= 4;
    } while (v);
    while (n < min_digits)
        tmp[n++] = '0';
    while (n)
        *o++ = tmp[--n];
    return o;
}

static char *put_dec(char *o, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *o++ = tmp[--n];
    return o;
}

/* ".  %08x: " then " %02x" per byte, padded to 16 byte columns, then " " */
static char *put_prefix(char *o, uint64_t offset, const uint8_t *raw, uint64_t n)
{
    o = put_str(o, ".  ");
    o = put_hex(o, offset, 8);
    *o++ = ':';
    *o++ = ' ';
    for (uint64_t i = 0; i < n; i++) {
        *o++ = ' ';
        *o++ = HEX[raw[i] >> 4];
        *o++ = HEX[raw[i] & 15];
    }
    for (uint64_t i = n; i < SPE_BYTE_COLUMNS; i++)
        o = put_str(o, "   ");
    *o++ = ' ';
    return o;
}

static char *describe(const struct spe_decode_tables *t, const struct pkt *p,
                      const uint8_t *hdr, char *o)
{
    uint64_t v = p->payload;
    uint8_t k = p->kind;
    if (k == t->k_padding || k == t->k_alignment)
        return put_str(o, "PAD");
    if (k == t->k_end)
        return put_str(o, "END");
    if (k == t->k_timestamp || k == t->k_data_source) {
        o = put_str(o, k == t->k_timestamp ? t->ts_prefix : t->ds_prefix);
        return put_dec(o, v);
    }
    if (k == t->k_events) {
        o = put_str(o, "EV");
        for (int b = 0; b < 64; b++)
            if (v >> b & 1 && t->event_names[b][0]) {
                *o++ = ' ';
                o = put_str(o, t->event_names[b]);
            }
        return o;
    }
    if (k == t->k_op_type)
        return put_str(o, t->op_text[p->index & 3][v & 0xff]);
    if (k == t->k_counter) {
        o = put_str(o, t->counter_prefix);
        o = put_dec(o, v);
        return put_str(o, t->counter_suffix[p->index & 31]);
    }
    if (k == t->k_context) {
        o = put_str(o, t->context_prefix);
        o = put_hex(o, v, 1);
        return put_str(o, t->context_suffix[p->index & 3]);
    }
    if (k == t->k_address) {
        unsigned i = p->index & 31;
        uint8_t mode = t->addr_mode[i];
        o = put_str(o, t->addr_name[i]);
        o = put_str(o, " 0x");
        if (mode == SPE_ADDR_MODE_INSN) {
            o = put_hex(o, field(v, t->addr_lsb, t->addr_width), 1);
            o = put_str(o, " el");
            o = put_dec(o, field(v, t->el_lsb, t->el_width));
            o = put_str(o, " ns=");
            return put_dec(o, field(v, t->ns_lsb, 1));
        }
        if (mode == SPE_ADDR_MODE_PA) {
            o = put_hex(o, field(v, t->addr_lsb, t->addr_width), 1);
            o = put_str(o, " ns=");
            o = put_dec(o, field(v, t->ns_lsb, 1));
            o = put_str(o, " ch=");
            o = put_dec(o, field(v, t->ch_lsb, 1));
            o = put_str(o, " pat=");
            return put_hex(o, field(v, t->pat_lsb, t->pat_width), 1);
        }
        o = put_hex(o, v, 1);
        if (mode == SPE_ADDR_MODE_RAW) {
            o = put_str(o, " (");
            o = put_dec(o, i);
            *o++ = ')';
        }
        return o;
    }
    /* unknown: "UNKNOWN <header bytes> 0x<payload>" */
    o = put_str(o, "UNKNOWN ");
    for (int i = 0; i < p->hlen; i++) {
        if (i)
            *o++ = ' ';
        *o++ = HEX[hdr[i] >> 4];
        *o++ = HEX[hdr[i] & 15];
    }
    o = put_str(o, " 0x");
    return put_hex(o, v, 1);
}

/*
 * Dump lines of buf[*pos..len) into out (at most cap bytes, whole lines only), as
 * spe_emu.tools.decode.decode_lines()/format_line(), one "\n" after each line. Returns the
 * bytes written and advances *pos; call again until *pos == len. A line needs at most
 * 3 * (packet bytes) + SPE_LINE_SLACK bytes, and a packet is at most SPE_LONGEST bytes (an
 * Alignment command to 64 KiB with its fill), so cap must be at least
 * 3 * min(len - *pos, SPE_LONGEST) + SPE_LINE_SLACK.
 */
uint64_t spe_dump(const struct spe_decode_tables *t, const uint8_t *buf, uint64_t len,
                  uint64_t *pos, char *out, uint64_t cap)
{
    char *o = out;
    uint64_t p = *pos;
    while (p < len) {
        struct pkt k;
        uint64_t n;
        int r;
        uint64_t most = len - p < SPE_LONGEST ? len - p : SPE_LONGEST;
        if ((uint64_t)(o - out) + 3 * most + SPE_LINE_SLACK > cap)
            break;
        if (buf[p] == 0 && t->short_kind[0] == t->k_padding) {
            /* a run of Padding bytes shares a line, up to 16 bytes */
            n = 1;
            while (n < SPE_BYTE_COLUMNS && p + n < len && buf[p + n] == 0)
                n++;
            o = put_prefix(o, p, buf + p, n);
            o = put_str(o, "PAD\n");
            p += n;
            continue;
        }
        r = get_packet(t, buf, len, p, &k);
        if (r != R_OK) {
            o = put_prefix(o, p, buf + p, 1);
            o = put_str(o, "Bad packet!\n");
            p += 1;
            continue;
        }
        n = k.hlen + (uint64_t)k.size;
        o = put_prefix(o, p, buf + p, n);
        o = describe(t, &k, buf + p, o);
        *o++ = '\n';
        p += n;
    }
    *pos = p;
    return (uint64_t)(o - out);
}

/* ---- records ------------------------------------------------------------------------- */

static uint64_t sign_extend_addr(const struct spe_decode_tables *t, uint64_t v)
{
    uint64_t a = field(v, t->addr_lsb, t->addr_width);
    uint64_t sign = 1ull << (t->addr_lsb + t->addr_width - 1);
    return a & sign ? a | ~(sign | (sign - 1)) : a;
}

/*
 * Records of buf[*pos..len) into rows (at most max_rows), as packets.iter_records() and
 * Record.from_packets(): a record runs from its first packet that is not Padding/Alignment
 * to an End or Timestamp packet; later packets of a kind override earlier ones; a bad or
 * cut-off packet discards the record being assembled and decoding resumes one byte later;
 * a record not ended by the end of the data is dropped. Returns the rows written and
 * advances *pos (to the end of the last record written, or len); *bad counts the bad and
 * cut-off packets met.
 */
uint64_t spe_scan_records(const struct spe_decode_tables *t, const uint8_t *buf,
                          uint64_t len, uint64_t *pos, struct spe_rec_row *rows,
                          uint64_t max_rows, uint64_t *bad)
{
    uint64_t p = *pos, n = 0;
    struct spe_rec_row cur;
    int open = 0;
    while (p < len && n < max_rows) {
        struct pkt k;
        int r = get_packet(t, buf, len, p, &k);
        if (r != R_OK) {
            ++*bad;
            open = 0;
            p += 1;
            continue;
        }
        uint64_t plen = k.hlen + (uint64_t)k.size;
        if (k.kind == t->k_padding || k.kind == t->k_alignment) {
            p += plen;
            continue;
        }
        if (!open) {
            memset(&cur, 0, sizeof cur);
            cur.offset = p;
            open = 1;
        }
        uint64_t v = k.payload;
        if (k.kind == t->k_address) {
            if (k.index == t->addr_pc) {
                cur.pc = sign_extend_addr(t, v);
                cur.el = (uint8_t)field(v, t->el_lsb, t->el_width);
                cur.ns = (uint8_t)field(v, t->ns_lsb, 1);
                cur.present |= SPE_HAS_PC;
            } else if (k.index == t->addr_target) {
                cur.target = sign_extend_addr(t, v);
                cur.target_el = (uint8_t)field(v, t->el_lsb, t->el_width);
                cur.target_ns = (uint8_t)field(v, t->ns_lsb, 1);
                cur.present |= SPE_HAS_TARGET;
            } else if (k.index == t->addr_va) {
                cur.va = sign_extend_addr(t, v);
                cur.va_tag = (uint8_t)field(v, t->tag_lsb, t->tag_width);
                cur.present |= SPE_HAS_VA;
            } else if (k.index == t->addr_pa) {
                cur.pa = field(v, t->addr_lsb, t->addr_width);
                cur.pa_ns = (uint8_t)field(v, t->ns_lsb, 1);
                cur.present |= SPE_HAS_PA;
            }
        } else if (k.kind == t->k_counter) {
            if (k.index < 3) {
                cur.latency[k.index] = (uint16_t)v;
                cur.present |= SPE_HAS_LAT0 << k.index;
            }
        } else if (k.kind == t->k_op_type) {
            cur.op_class = k.index;
            cur.op_subclass = (uint8_t)v;
            cur.present |= SPE_HAS_OP;
        } else if (k.kind == t->k_events) {
            cur.events = v;
        } else if (k.kind == t->k_context) {
            if (k.index < 2) {
                cur.context[k.index] = (uint32_t)v;
                cur.present |= SPE_HAS_CTX0 << k.index;
            }
        } else if (k.kind == t->k_data_source) {
            cur.data_source = v;
            cur.present |= SPE_HAS_DS;
        } else if (k.kind == t->k_timestamp) {
            cur.timestamp = v;
            cur.present |= SPE_HAS_TS;
        }
        p += plen;
        if (k.kind == t->k_end || k.kind == t->k_timestamp) {
            cur.length = p - cur.offset;
            rows[n++] = cur;
            open = 0;
        }
    }
    /* the table is full right after a record (resume there), or the data has ended (a
     * record still open is dropped) */
    *pos = p;
    return n;
}
