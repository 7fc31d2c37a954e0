/*
 * alloc.h — the one allocator of the loaders: the YAML layer (yamldoc, yamlread), the case and
 * tolerance-profile schemas, the HDF5 read layer (h5read) and the golden schema all allocate here
 * and nowhere else, so that a test can fail any one of their allocations (STYLE.md convention 10).
 *
 * The functions behave as their C library namesakes, except that a zero size is rounded up to one
 * byte (a successful call never returns NULL) and that the test hook below can make one call fail.
 * Memory is released with free(). Allocations made inside libyaml and HDF5 do not pass here.
 */
#ifndef MC_ALLOC_H
#define MC_ALLOC_H

#include <stddef.h>

void *mc_malloc(size_t size);
void *mc_calloc(size_t n, size_t size);
void *mc_realloc(void *p, size_t size); /* on failure p is left allocated, as with realloc */
char *mc_strdup(const char *s);

/*
 * Test hook, for tests only: mc_alloc_fail_nth(n) with n >= 0 makes the allocation n calls from
 * now fail (0 = the next one) and only that one; n < 0 disarms. mc_alloc_failed() says whether the
 * armed failure has happened since the last mc_alloc_fail_nth. Not thread-safe; when disarmed
 * each allocation costs one predictable branch.
 */
void mc_alloc_fail_nth(long n);
int mc_alloc_failed(void);

#endif
