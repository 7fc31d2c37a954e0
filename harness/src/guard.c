/* guard.c — see guard.h. */
#include "guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_BYTE 0xa5

void *mc_guard_alloc(struct mc_guarded *g, size_t bytes)
{
    g->bytes = bytes;
    g->base = malloc(bytes + 2 * MC_GUARD_BYTES);
    if (g->base == NULL)
        return NULL;
    memset(g->base, GUARD_BYTE, MC_GUARD_BYTES);
    memset(g->base + MC_GUARD_BYTES, 0, bytes);
    memset(g->base + MC_GUARD_BYTES + bytes, GUARD_BYTE, MC_GUARD_BYTES);
    return g->base + MC_GUARD_BYTES;
}

/* First and last touched byte of a guard, or -1 when intact. */
static long touched(const unsigned char *p, long n, long *last)
{
    long first = -1;
    for (long i = 0; i < n; i++) {
        if (p[i] != GUARD_BYTE) {
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
    long last = 0;
    long first = touched(g->base, MC_GUARD_BYTES, &last);
    if (first >= 0) {
        snprintf(buf, len, "out-of-bounds write before the start of '%s' (offsets -%ld .. -%ld)", name,
                 (long)MC_GUARD_BYTES - first, (long)MC_GUARD_BYTES - last);
        return -1;
    }
    first = touched(g->base + MC_GUARD_BYTES + g->bytes, MC_GUARD_BYTES, &last);
    if (first >= 0) {
        snprintf(buf, len, "out-of-bounds write past the end of '%s' (%zu bytes; offsets +%ld .. +%ld after it)",
                 name, g->bytes, first, last);
        return -1;
    }
    return 0;
}

void mc_guard_free(struct mc_guarded *g)
{
    free(g->base);
    g->base = NULL;
    g->bytes = 0;
}
