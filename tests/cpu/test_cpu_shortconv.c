/*
 * test_cpu_shortconv.c — the cpu LFM2 ShortConv mixer (kernels/cpu/shortconv.c, fused
 * B⊙x → conv → C⊙) against the reference ShortConv (reference/shortconv.c) in f64, through the ops
 * structs, on two small random configurations (D 12, K 3 with biases; D 7, K 4 without), with the
 * shared family checks (cpu_familytest.h): prefill / primed multi-token / L == 1 with left, right and
 * middle padding, split invariance, bitwise thread-count invariance, bf16 / f16 storage, cache round
 * trip, error paths.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "cpu_familytest.h"
#include "reference.h"

/*
 * Tolerances. f32: one conv (same order as the reference) and two sgemms: measured output max abs
 * 1.7e-8; 1e-5 / 1e-4 as for the other families. bf16 / f16: one rounding of the output to the storage
 * dtype (2^-8 / 2^-11 relative) plus margin (measured headroom 0.75 bf16, 0.52 f16); the conv window
 * is f32 and uses the f32 numbers.
 */
static struct ft_family fam;
static struct mc_shortconv_config cfg;
static struct tu_weights ws;

static int setup(int which)
{
    memset(&ws, 0, sizeof ws);
    if (which == 0)
        cfg = (struct mc_shortconv_config){.hidden_size = 12, .conv_kernel = 3, .conv_bias = 1};
    else
        cfg = (struct mc_shortconv_config){.hidden_size = 7, .conv_kernel = 4, .conv_bias = 0};
    const int64_t D = cfg.hidden_size, K = cfg.conv_kernel;
    struct tu_lcg g = {2000 + (uint64_t)which};
    tu_weights_add(&ws, "in_proj.weight", 2, 3 * D, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (cfg.conv_bias)
        tu_weights_add(&ws, "in_proj.bias", 1, 3 * D, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&ws, "conv.weight", 3, D, 1, K, 0.0, 0.5, &g);
    if (cfg.conv_bias)
        tu_weights_add(&ws, "conv.bias", 1, D, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&ws, "out_proj.weight", 2, D, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (cfg.conv_bias)
        tu_weights_add(&ws, "out_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
    tu_weights_round(&ws, MC_DTYPE_F32);
    fam = (struct ft_family){
        .name = which ? "shortconv cfg1" : "shortconv cfg0", .family = MC_FAMILY_SHORTCONV,
        .cpu = mc_cpu_shortconv_ops(), .ref = mc_reference_shortconv_ops(), .config = &cfg, .ws = &ws, .D = D,
        .conv_elems = D * K, .state_elems = 0,
        .f32_atol = 1e-5, .f32_rtol = 1e-4,
        .bf16_atol = 2e-5, .bf16_rtol = 1.0 / 256.0 * 1.25, .f16_atol = 2e-5, .f16_rtol = 1.0 / 2048.0 * 1.5,
    };
    return 0;
}

int main(void)
{
    return ft_run_suite(&fam, setup);
}
