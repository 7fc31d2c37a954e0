/* rng.c — see rng.h. */
#include "base/rng.h"

#include <math.h>

void mc_rng_seed(struct mc_rng *r, uint64_t seed)
{
    r->state = seed ^ 0x6a09e667f3bcc909ull;
}

uint64_t mc_rng_next(struct mc_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t mc_rng_below(struct mc_rng *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = mc_rng_next(r);
    } while (x >= limit);
    return x % n;
}

double mc_rng_uniform(struct mc_rng *r)
{
    return (double)(mc_rng_next(r) >> 11) * 0x1.0p-53;
}

double mc_rng_normal(struct mc_rng *r)
{
    double u1 = 1.0 - mc_rng_uniform(r); /* (0, 1] so the log is finite */
    double u2 = mc_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}
