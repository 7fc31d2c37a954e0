/*
 * test_cpu_mamba1.c — the cpu Mamba1 mixer (kernels/cpu/mamba1.c, the vectorized selective scan)
 * against the reference Mamba1 (reference/mamba1.c) in f64, through the ops structs, on two small
 * random configurations (with biases, N 5 < the 8 dot-product lanes; without biases, N 16 and 20
 * channels: two channel blocks, one partial), with the shared family checks (cpu_familytest.h):
 * prefill / primed multi-token / L == 1 with left, right and middle padding, split invariance,
 * bitwise thread-count invariance, bf16 / f16 storage, cache round trip, error paths.
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
 * Tolerances. f32: the scan rounds like the f32 reference (one exp per element, a different dot
 * product order): measured output max abs 1.1e-8, states 3e-9 (print_message lines); 1e-5 / 1e-4 is
 * far above that and far below a lost state or a shifted window (>= 1e-2). bf16 / f16: the output is
 * rounded once to the storage dtype, half an ulp = 2^-8 (bf16) / 2^-11 (f16) relative, so rtol is
 * that plus margin and atol covers near-zero outputs (measured headroom 0.68 bf16, 0.48 f16); caches
 * are f32 and use the f32 numbers.
 */
static struct ft_family fam;
static struct mc_mamba1_config cfg;
static struct tu_weights ws;

static int setup(int which)
{
    memset(&ws, 0, sizeof ws);
    if (which == 0)
        cfg = (struct mc_mamba1_config){.hidden_size = 8, .intermediate_size = 12, .state_size = 5,
                                        .conv_kernel = 4, .time_step_rank = 3, .use_bias = 1, .use_conv_bias = 1};
    else
        cfg = (struct mc_mamba1_config){.hidden_size = 6, .intermediate_size = 20, .state_size = 16,
                                        .conv_kernel = 2, .time_step_rank = 2, .use_bias = 0, .use_conv_bias = 0};
    const int64_t D = cfg.hidden_size, I = cfg.intermediate_size, N = cfg.state_size, R = cfg.time_step_rank;
    struct tu_lcg g = {1000 + (uint64_t)which};
    tu_weights_add(&ws, "in_proj.weight", 2, 2 * I, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (cfg.use_bias)
        tu_weights_add(&ws, "in_proj.bias", 1, 2 * I, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&ws, "conv1d.weight", 3, I, 1, cfg.conv_kernel, 0.0, 0.5, &g);
    if (cfg.use_conv_bias)
        tu_weights_add(&ws, "conv1d.bias", 1, I, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&ws, "x_proj.weight", 2, R + 2 * N, I, 0, 0.0, 1.0 / sqrt((double)I), &g);
    tu_weights_add(&ws, "dt_proj.weight", 2, I, R, 0, 0.0, 1.0 / sqrt((double)R), &g);
    tu_weights_add(&ws, "dt_proj.bias", 1, I, 0, 0, -1.0, 1.0, &g);
    tu_weights_add(&ws, "A_log", 2, I, N, 0, 0.3, 0.8, &g);
    tu_weights_add(&ws, "D", 1, I, 0, 0, 1.0, 0.3, &g);
    tu_weights_add(&ws, "out_proj.weight", 2, D, I, 0, 0.0, 1.0 / sqrt((double)I), &g);
    if (cfg.use_bias)
        tu_weights_add(&ws, "out_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
    tu_weights_round(&ws, MC_DTYPE_F32);
    fam = (struct ft_family){
        .name = which ? "mamba1 cfg1" : "mamba1 cfg0", .family = MC_FAMILY_MAMBA1,
        .cpu = mc_cpu_mamba1_ops(), .ref = mc_reference_mamba1_ops(), .config = &cfg, .ws = &ws, .D = D,
        .conv_elems = I * cfg.conv_kernel, .state_elems = I * N,
        .f32_atol = 1e-5, .f32_rtol = 1e-4,
        .bf16_atol = 2e-5, .bf16_rtol = 1.0 / 256.0 * 1.25, .f16_atol = 2e-5, .f16_rtol = 1.0 / 2048.0 * 1.5,
    };
    return 0;
}

int main(void)
{
    return ft_run_suite(&fam, setup);
}
