/*
 * cpu_familytest.h — the checks every cpu family shares, written once and run by test_cpu_mamba1.c
 * and test_cpu_shortconv.c on their own configurations: cpu (f32, bf16, f16) against the reference
 * in f64 over prefill, primed multi-token and L == 1 forwards with left / right / middle padding,
 * split invariance, bitwise thread-count invariance, the cache round trip and common error paths.
 */
#ifndef MC_TESTS_CPU_FAMILYTEST_H
#define MC_TESTS_CPU_FAMILYTEST_H

#include "cpu_testutil.h"

struct ft_family {
    const char *name;
    enum mc_family family;
    const struct mc_backend_ops *cpu, *ref;
    const void *config;
    struct tu_weights *ws; /* f32-exact values */
    int64_t D, conv_elems, state_elems;
    const char *out_bias;  /* the output projection's bias name (a pad's output); NULL: "out_proj.bias" */
    /* tolerances: f32 against f64; half storage output rtol/atol per dtype */
    double f32_atol, f32_rtol, bf16_atol, bf16_rtol, f16_atol, f16_rtol;
    int chunked; /* the cpu backend announces MC_CAP_CHUNK_SIZE (an internal chunk length of its own) */
};

void ft_vs_reference(const struct ft_family *f);
void ft_thread_invariance(const struct ft_family *f);
void ft_half_storage(const struct ft_family *f);
void ft_cache_roundtrip(const struct ft_family *f);
void ft_errors(const struct ft_family *f);

/* The whole shared suite as a cmocka group, for a test program's main: ft_vs_reference,
 * ft_thread_invariance and ft_half_storage on configurations 0 and 1, ft_cache_roundtrip on 1,
 * ft_errors (plus MC_CAP_CHUNK_SIZE exactly when f->chunked) on 0. setup(which) fills *f for configuration `which` and
 * returns 0; each test's teardown frees f->ws. Returns cmocka's exit status. */
int ft_run_suite(struct ft_family *f, int (*setup)(int which));

#endif
