/*
 * guard.h — buffers with guard regions, for everything the harness hands to a backend: a pattern
 * before and after the data is checked after each call, so an out-of-bounds write is reported with
 * the buffer's name and the offsets it touched instead of corrupting the harness.
 */
#ifndef MC_GUARD_H
#define MC_GUARD_H

#include <stddef.h>

#define MC_GUARD_BYTES 1024

struct mc_guarded {
    unsigned char *base; /* [guard][data][guard] */
    size_t bytes;        /* data bytes */
};

/* Allocates `bytes` (>= 0) of zeroed data between two guards; returns the data pointer or NULL. */
void *mc_guard_alloc(struct mc_guarded *g, size_t bytes);
/* 0 when both guards are intact; otherwise -1 and a description such as
 * "12 bytes written after the end of 'y' (offsets +0 .. +11)" in buf. */
int mc_guard_check(const struct mc_guarded *g, const char *name, char *buf, size_t len);
void mc_guard_free(struct mc_guarded *g);

#endif
