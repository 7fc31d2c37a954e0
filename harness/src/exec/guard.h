/*
 * guard.h — buffers with guard regions, for everything the harness hands to a backend.
 *
 * Writes: a pattern before and after the data is checked after each call, so an out-of-bounds write
 * is reported with the buffer's name and the offsets it touched instead of corrupting the harness.
 *
 * Reads, two mechanisms (MIXCHECK_GUARD_MODE, read once: both (default), poison, fence, none):
 *   poison  the guard pattern is 0xff bytes, NaN in every storage dtype (f64, f32, f16, bf16), so an
 *           element read from a guard and used poisons the output and the comparator fails the
 *           check. A read whose value is discarded, or a mask byte (no NaN), goes unseen.
 *   fence   read-only inputs (mc_guard_alloc_input: x, mask, weights) end against
 *           MC_GUARD_FENCE_BYTES of PROT_NONE pages, so a read past the end faults at once (as many
 *           lie before the guard in front of the data: the data cannot end flush on both sides);
 *           mc_guard_describe_fault turns the address into "read past the end of 'x' ..." for the
 *           fault handler of isolate.c, which reports it as the check's error. Without isolation
 *           the fault still ends the run (after printing that). Freed mappings are reused.
 *   none    the old 0xa5 pattern and no fence (reads go unseen), kept to measure the other two.
 * Data alignment: multi-byte dtypes start on 16 bytes (what malloc gave every buffer before the
 * fence, so a port that came to rely on it keeps working): when the byte count is not a multiple
 * of 16, the few bytes between the end and the fence are a guard (poison, in the default mode); in
 * the bundled suite that is 12-14% of the x buffers (the in-tree backends also pass with element
 * alignment only). The mask (1-byte elements) ends flush on the fence: poison cannot mark a byte,
 * so the fence is its only read check.
 */
#ifndef MC_GUARD_H
#define MC_GUARD_H

#include <stddef.h>

#define MC_GUARD_BYTES 1024          /* guard pattern on each side (before the start, at least) */
#define MC_GUARD_ALIGN 16            /* data alignment for multi-byte elements */
#define MC_GUARD_FENCE_BYTES 65536   /* PROT_NONE bytes on each side of a fenced buffer */
#define MC_GUARD_MAX_FENCES 256      /* fenced buffers live at once that a fault can be traced to */

enum mc_guard_mode { MC_GUARD_NONE = 0, MC_GUARD_POISON = 1, MC_GUARD_FENCE = 2, MC_GUARD_BOTH = 3 };

struct mc_guarded {
    unsigned char *base; /* the allocation (malloc or mmap); NULL when none */
    unsigned char *data;
    size_t bytes;        /* data bytes */
    size_t lead, tail;   /* guard pattern bytes before and after the data */
    size_t map_bytes;    /* fenced: the whole mapping; 0 for malloc */
    int slot;            /* fenced: index in the fault registry, or -1 */
    unsigned char fill;  /* the guard byte */
    void (*unmap)(void *p, size_t bytes); /* from a backend's host memory (mc_guard_mem): how it goes back */
};

/* Where a buffer's pages come from when not the harness's own: a backend's host memory (struct
 * mc_backend_ops host_map / host_unmap). The same layout, guards and fences as the harness's own,
 * in pages of `map`; when `map` returns NULL the buffer is the harness's own after all. */
struct mc_guard_mem {
    void *(*map)(size_t bytes);
    void (*unmap)(void *p, size_t bytes);
};

/* The mode from MIXCHECK_GUARD_MODE (read on first use; an unknown value warns once and means both). */
enum mc_guard_mode mc_guard_mode(void);
const char *mc_guard_mode_name(enum mc_guard_mode m);

/* Allocates `bytes` (>= 0) of zeroed data between two guards; returns the data pointer or NULL. */
void *mc_guard_alloc(struct mc_guarded *g, size_t bytes);
/* The same for a buffer the backend only reads, of elements of `elem_bytes`: fenced when the mode
 * says so. `name` ("x", a weight's name) and `call` ("forward(rows 0..1, tokens 0..15)") are copied
 * for the fault diagnosis. NULL when memory (or a mapping) runs out. */
void *mc_guard_alloc_input(struct mc_guarded *g, size_t bytes, size_t elem_bytes, const char *name, const char *call);
/* mc_guard_alloc and mc_guard_alloc_input in the pages of `mem` (NULL: the harness's own). */
void *mc_guard_alloc_in(struct mc_guarded *g, size_t bytes, const struct mc_guard_mem *mem);
void *mc_guard_alloc_input_in(struct mc_guarded *g, size_t bytes, size_t elem_bytes, const char *name,
                              const char *call, const struct mc_guard_mem *mem);
/* 0 when both guards are intact; otherwise -1 and a description such as
 * "out-of-bounds write past the end of 'y' (12 bytes; offsets +0 .. +11 after it)" in buf. */
int mc_guard_check(const struct mc_guarded *g, const char *name, char *buf, size_t len);
/* Frees the buffer; a fenced one's mapping is kept for reuse (up to a few) until mc_guard_trim. */
void mc_guard_free(struct mc_guarded *g);
/* Unmaps the fenced mappings kept for reuse. */
void mc_guard_trim(void);

enum mc_guard_access { MC_GUARD_ACCESS_UNKNOWN = 0, MC_GUARD_ACCESS_READ = 1, MC_GUARD_ACCESS_WRITE = 2 };
/* Async-signal-safe (a fixed table, no allocation, no stdio): when addr lies in the fence of a live
 * fenced buffer, writes e.g. "read past the end of 'x' (buffer of 4096 bytes, at +0 after its end)
 * during forward(rows 0..1, tokens 0..15)" into buf (NUL-terminated, truncated to len) and returns
 * 1; else returns 0. */
int mc_guard_describe_fault(const void *addr, enum mc_guard_access access, char *buf, size_t len);

#endif
