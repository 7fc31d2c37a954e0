/* guard.c — see guard.h. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "exec/guard.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The old pattern: about -2.9e-16 as f32 (0xa5a5a5a5) and f64, so a read of it changes nothing. */
#define GUARD_BYTE_PLAIN 0xa5
/* The poison pattern, 0xff in every byte. Little-endian patterns of each storage dtype:
 *   f64  0xffffffffffffffff  sign 1, exponent 0x7ff (all ones), mantissa 0xfffffffffffff != 0: NaN
 *   f32  0xffffffff          sign 1, exponent 0xff  (all ones), mantissa 0x7fffff != 0:        NaN
 *   f16  0xffff              sign 1, exponent 0x1f  (all ones), mantissa 0x3ff != 0:           NaN
 *   bf16 0xffff              sign 1, exponent 0xff  (all ones), mantissa 0x7f != 0:            NaN
 * (a quiet NaN in each: the top mantissa bit is set). A uniform byte is needed because a guard
 * element may start at any multiple of the element size; 0xff is the only byte whose repetition
 * is NaN in all four. Like 0xa5 before, a write of exactly this byte into a guard goes unseen. */
#define GUARD_BYTE_POISON 0xff

static int mode_read;
static enum mc_guard_mode mode_value = MC_GUARD_BOTH;

enum mc_guard_mode mc_guard_mode(void)
{
    if (!mode_read) {
        mode_read = 1;
        const char *v = getenv("MIXCHECK_GUARD_MODE");
        static const char *names[] = {"none", "poison", "fence", "both"};
        int found = v == NULL || *v == '\0';
        for (int m = 0; !found && m < 4; m++)
            if (strcmp(v, names[m]) == 0) {
                mode_value = (enum mc_guard_mode)m;
                found = 1;
            }
        if (!found)
            fprintf(stderr, "mixcheck: MIXCHECK_GUARD_MODE='%s' is not none, poison, fence or both; using both\n", v);
    }
    return mode_value;
}

const char *mc_guard_mode_name(enum mc_guard_mode m)
{
    switch (m) {
    case MC_GUARD_NONE:
        return "none";
    case MC_GUARD_POISON:
        return "poison";
    case MC_GUARD_FENCE:
        return "fence";
    case MC_GUARD_BOTH:
        return "both";
    }
    return "?";
}

static unsigned char guard_byte(void)
{
    return (mc_guard_mode() & MC_GUARD_POISON) ? GUARD_BYTE_POISON : GUARD_BYTE_PLAIN;
}

void *mc_guard_alloc(struct mc_guarded *g, size_t bytes)
{
    memset(g, 0, sizeof *g);
    g->slot = -1;
    g->fill = guard_byte();
    g->base = malloc(bytes + 2 * MC_GUARD_BYTES);
    if (g->base == NULL)
        return NULL;
    g->bytes = bytes;
    g->lead = g->tail = MC_GUARD_BYTES;
    g->data = g->base + MC_GUARD_BYTES;
    memset(g->base, g->fill, MC_GUARD_BYTES);
    memset(g->data, 0, bytes);
    memset(g->data + bytes, g->fill, MC_GUARD_BYTES);
    return g->data;
}

/* ---- the fault registry: what mc_guard_describe_fault reads inside a signal handler ---------- */

struct fence {
    atomic_int live;        /* set last (release) once the fields below are complete */
    uintptr_t map, map_end; /* the whole mapping; its first and last MC_GUARD_FENCE_BYTES are PROT_NONE */
    uintptr_t data;
    size_t bytes;
    char name[64];
    char call[128];
};
static struct fence fences[MC_GUARD_MAX_FENCES];

static void copy_str(char *dst, size_t n, const char *src)
{
    size_t i = 0;
    for (; src != NULL && src[i] != '\0' && i + 1 < n; i++)
        dst[i] = src[i];
    dst[i] = '\0';
}

static int fence_register(const struct mc_guarded *g, const char *name, const char *call)
{
    for (int i = 0; i < MC_GUARD_MAX_FENCES; i++) {
        struct fence *f = &fences[i];
        if (atomic_load_explicit(&f->live, memory_order_relaxed))
            continue;
        f->map = (uintptr_t)g->base;
        f->map_end = (uintptr_t)g->base + g->map_bytes;
        f->data = (uintptr_t)g->data;
        f->bytes = g->bytes;
        copy_str(f->name, sizeof f->name, name);
        copy_str(f->call, sizeof f->call, call);
        atomic_store_explicit(&f->live, 1, memory_order_release);
        return i;
    }
    return -1; /* still fenced; a fault in it is reported as a plain crash */
}

static size_t round_up(size_t v, size_t m)
{
    return (v + m - 1) / m * m;
}

static size_t fence_bytes(void)
{
    static size_t f;
    if (f == 0) {
        long page = sysconf(_SC_PAGESIZE);
        f = round_up(MC_GUARD_FENCE_BYTES, page > 0 ? (size_t)page : 4096);
    }
    return f;
}

/* Freed mappings kept for the next buffer of the same size: a check makes thousands of forwards of
 * one shape, and mmap, mprotect, munmap and the first touch of fresh pages cost about 20 us a
 * buffer; a kept one costs a memset. mc_guard_trim unmaps them. */
#define KEEP 32
static struct {
    unsigned char *map;
    size_t total;
} kept[KEEP];
static int n_kept;

void mc_guard_trim(void)
{
    while (n_kept > 0) {
        n_kept--;
        munmap(kept[n_kept].map, kept[n_kept].total);
    }
}

/* [PROT_NONE fence][guard >= MC_GUARD_BYTES][data][guard < align][PROT_NONE fence]: the data ends
 * flush on the second fence up to its alignment, and the first fence catches reads further back than
 * the guard before it (the data cannot end flush on both). */
static void *alloc_fenced(struct mc_guarded *g, size_t bytes, size_t elem_bytes, const char *name,
                          const char *call)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), fence = fence_bytes();
    size_t align = elem_bytes > 1 ? MC_GUARD_ALIGN : 1;
    size_t span = round_up(bytes, align);
    size_t body = round_up(MC_GUARD_BYTES + span, page);
    size_t total = fence + body + fence;
    unsigned char *m = NULL;
    for (int i = n_kept - 1; i >= 0 && m == NULL; i--)
        if (kept[i].total == total) {
            m = kept[i].map;
            kept[i] = kept[--n_kept];
            memset(m + fence, 0, body);
        }
    if (m == NULL) {
        void *map = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map == MAP_FAILED)
            return NULL;
        m = map;
        if (mprotect(m + fence, body, PROT_READ | PROT_WRITE) != 0) {
            munmap(map, total);
            return NULL;
        }
    }
    g->base = m;
    g->map_bytes = total;
    g->bytes = bytes;
    g->data = m + fence + body - span; /* a multiple of align: the end is page-aligned */
    g->lead = body - span;
    g->tail = span - bytes;
    memset(m + fence, g->fill, g->lead); /* the data is zero already */
    memset(g->data + bytes, g->fill, g->tail);
    g->slot = fence_register(g, name, call);
    return g->data;
}

void *mc_guard_alloc_input(struct mc_guarded *g, size_t bytes, size_t elem_bytes, const char *name, const char *call)
{
    if (!(mc_guard_mode() & MC_GUARD_FENCE))
        return mc_guard_alloc(g, bytes);
    memset(g, 0, sizeof *g);
    g->slot = -1;
    g->fill = guard_byte();
    return alloc_fenced(g, bytes, elem_bytes, name, call);
}

/* The layouts above in pages of a backend's host memory: fenced, that of alloc_fenced (its fences
 * made PROT_NONE here, in this process's view of the pages); plain, [guard][data][guard to the end
 * of the last page]. NULL when the backend has no pages to give (or a fence cannot be set). */
static void *alloc_mapped(struct mc_guarded *g, size_t bytes, size_t elem_bytes, int fenced, const char *name,
                          const char *call, const struct mc_guard_mem *mem)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), fence = fenced ? fence_bytes() : 0;
    size_t align = elem_bytes > 1 ? MC_GUARD_ALIGN : 1;
    size_t span = round_up(bytes, align);
    size_t body = round_up(MC_GUARD_BYTES + span + (fenced ? 0 : MC_GUARD_BYTES), page);
    size_t total = fence + body + fence;
    unsigned char *m = mem->map(total);
    if (m == NULL)
        return NULL;
    if (fenced && (mprotect(m, fence, PROT_NONE) != 0 || mprotect(m + fence + body, fence, PROT_NONE) != 0)) {
        mprotect(m, total, PROT_READ | PROT_WRITE);
        mem->unmap(m, total);
        return NULL;
    }
    memset(g, 0, sizeof *g);
    g->slot = -1;
    g->fill = guard_byte();
    g->unmap = mem->unmap;
    g->base = m;
    g->map_bytes = total;
    g->bytes = bytes;
    if (fenced) {
        g->data = m + fence + body - span; /* ends flush on the fence up to the alignment, as alloc_fenced */
        g->lead = body - span;
        g->tail = span - bytes;
    } else {
        g->data = m + MC_GUARD_BYTES;
        g->lead = MC_GUARD_BYTES;
        g->tail = body - MC_GUARD_BYTES - bytes;
    }
    memset(m + fence, g->fill, g->lead);
    memset(g->data, 0, bytes); /* pages given back earlier hold what they held */
    memset(g->data + bytes, g->fill, g->tail);
    if (fenced)
        g->slot = fence_register(g, name, call);
    return g->data;
}

void *mc_guard_alloc_in(struct mc_guarded *g, size_t bytes, const struct mc_guard_mem *mem)
{
    void *p = mem != NULL ? alloc_mapped(g, bytes, 1, 0, NULL, NULL, mem) : NULL;
    return p != NULL ? p : mc_guard_alloc(g, bytes);
}

void *mc_guard_alloc_input_in(struct mc_guarded *g, size_t bytes, size_t elem_bytes, const char *name,
                              const char *call, const struct mc_guard_mem *mem)
{
    void *p = mem != NULL ? alloc_mapped(g, bytes, elem_bytes, (mc_guard_mode() & MC_GUARD_FENCE) != 0, name, call,
                                         mem)
                          : NULL;
    return p != NULL ? p : mc_guard_alloc_input(g, bytes, elem_bytes, name, call);
}

/* First and last touched byte of a guard, or -1 when intact. */
static long touched(const unsigned char *p, long n, unsigned char fill, long *last)
{
    long first = -1;
    for (long i = 0; i < n; i++) {
        if (p[i] != fill) {
            if (first < 0)
                first = i;
            *last = i;
        }
    }
    return first;
}

int mc_guard_check(const struct mc_guarded *g, const char *name, char *buf, size_t len)
{
    if (g->base == NULL)
        return 0;
    long lead = (long)g->lead, last = 0;
    long first = touched(g->data - g->lead, lead, g->fill, &last);
    if (first >= 0) {
        snprintf(buf, len, "out-of-bounds write before the start of '%s' (offsets -%ld .. -%ld)", name, lead - first,
                 lead - last);
        return -1;
    }
    first = touched(g->data + g->bytes, (long)g->tail, g->fill, &last);
    if (first >= 0) {
        snprintf(buf, len, "out-of-bounds write past the end of '%s' (%zu bytes; offsets +%ld .. +%ld after it)",
                 name, g->bytes, first, last);
        return -1;
    }
    return 0;
}

void mc_guard_free(struct mc_guarded *g)
{
    if (g->unmap != NULL) { /* a backend's host memory: every page read-write again, then back to it */
        if (g->slot >= 0)
            atomic_store_explicit(&fences[g->slot].live, 0, memory_order_release);
        mprotect(g->base, g->map_bytes, PROT_READ | PROT_WRITE);
        g->unmap(g->base, g->map_bytes);
    } else if (g->map_bytes != 0) {
        if (g->slot >= 0)
            atomic_store_explicit(&fences[g->slot].live, 0, memory_order_release);
        if (n_kept < KEEP) {
            kept[n_kept].map = g->base;
            kept[n_kept].total = g->map_bytes;
            n_kept++;
        } else {
            munmap(g->base, g->map_bytes);
        }
    } else {
        free(g->base);
    }
    memset(g, 0, sizeof *g);
    g->slot = -1;
}

/* ---- async-signal-safe formatting ------------------------------------------------------------ */

struct text {
    char *buf;
    size_t len, at;
};

static void put(struct text *t, const char *s)
{
    for (; *s != '\0' && t->at + 1 < t->len; s++)
        t->buf[t->at++] = *s;
    t->buf[t->at] = '\0';
}

static void put_size(struct text *t, size_t v)
{
    char d[24];
    int n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    char s[24];
    for (int i = 0; i < n; i++)
        s[i] = d[n - 1 - i];
    s[n] = '\0';
    put(t, s);
}

int mc_guard_describe_fault(const void *addr, enum mc_guard_access access, char *buf, size_t len)
{
    uintptr_t a = (uintptr_t)addr;
    if (len == 0)
        return 0;
    for (int i = 0; i < MC_GUARD_MAX_FENCES; i++) {
        const struct fence *f = &fences[i];
        if (!atomic_load_explicit(&f->live, memory_order_acquire) || a < f->map || a >= f->map_end)
            continue;
        struct text t = {buf, len, 0};
        buf[0] = '\0';
        put(&t, access == MC_GUARD_ACCESS_READ ? "read" : access == MC_GUARD_ACCESS_WRITE ? "write" : "access");
        int after = a >= f->data;
        put(&t, after ? " past the end of '" : " before the start of '");
        put(&t, f->name);
        put(&t, "' (buffer of ");
        put_size(&t, f->bytes);
        put(&t, " bytes, at ");
        if (after) {
            put(&t, "+");
            put_size(&t, a - (f->data + f->bytes));
            put(&t, " after its end)");
        } else {
            put(&t, "-");
            put_size(&t, f->data - a);
            put(&t, " before its start)");
        }
        if (f->call[0] != '\0') {
            put(&t, " during ");
            put(&t, f->call);
        }
        return 1;
    }
    return 0;
}
