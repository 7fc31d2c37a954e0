/* alloc.c — see alloc.h. */
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>

static long fail_countdown = -1; /* calls left before the one that fails; -1 = disarmed */
static int fail_happened;

/* 1 when this call is the one the test hook fails. */
static int injected_failure(void)
{
    if (fail_countdown < 0)
        return 0;
    if (fail_countdown-- > 0)
        return 0;
    fail_happened = 1; /* the countdown is now -1: disarmed */
    return 1;
}

void *mc_malloc(size_t size)
{
    if (injected_failure())
        return NULL;
    return malloc(size ? size : 1);
}

void *mc_calloc(size_t n, size_t size)
{
    if (injected_failure())
        return NULL;
    if (n == 0 || size == 0)
        n = size = 1;
    return calloc(n, size);
}

void *mc_realloc(void *p, size_t size)
{
    if (injected_failure())
        return NULL;
    return realloc(p, size ? size : 1);
}

char *mc_strdup(const char *s)
{
    size_t len = strlen(s);
    char *d = mc_malloc(len + 1);
    if (d != NULL)
        memcpy(d, s, len + 1);
    return d;
}

void mc_alloc_fail_nth(long n)
{
    fail_countdown = n < 0 ? -1 : n;
    fail_happened = 0;
}

int mc_alloc_failed(void)
{
    return fail_happened;
}
