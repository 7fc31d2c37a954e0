/*
 * rng.h — the harness's deterministic random source (splitmix64), for random split points,
 * distractor tokens and padding lengths. Same seed, same numbers, on every machine.
 */
#ifndef MC_RNG_H
#define MC_RNG_H

#include <stdint.h>

struct mc_rng {
    uint64_t state;
};

void mc_rng_seed(struct mc_rng *r, uint64_t seed);
uint64_t mc_rng_next(struct mc_rng *r);
/* Uniform in [0, n), n >= 1 (unbiased). */
uint64_t mc_rng_below(struct mc_rng *r, uint64_t n);
/* Uniform in [0, 1) with 53 random bits. */
double mc_rng_uniform(struct mc_rng *r);
/* Standard normal (Box-Muller on two uniforms). */
double mc_rng_normal(struct mc_rng *r);

#endif
