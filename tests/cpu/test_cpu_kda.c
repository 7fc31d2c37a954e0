/*
 * test_cpu_kda.c — the cpu Kimi Delta Attention mixer (kernels/cpu/kda.c, kda_chunk.c: the chunked
 * per-channel delta rule) against the reference KDA (reference/kda.c, the recurrence) in f64, through
 * the ops structs, on two small random configurations (D 12, H 3, d 4, K 3, chunk 5; D 16, H 2, d 8, K 4,
 * chunk 20: 33 tokens give sub-blocks of 16 inside a chunk and a partial last chunk), with the shared
 * family checks (cpu_familytest.h): prefill / primed multi-token / L == 1 with left, right and middle
 * padding, split invariance, bitwise thread-count invariance, bf16 / f16 storage, cache round trip,
 * error paths.
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
 * Tolerances. f32: the chunked form (UT transform, strsm) against the recurrence: measured output max
 * abs 2e-7; 1e-5 / 1e-4 as for the other families. bf16 / f16: one rounding of the output to the storage
 * dtype plus margin; window and state are f32 and use the f32 numbers.
 */
static struct ft_family fam;
static struct mc_kda_config cfg;
static struct tu_weights ws;

static int setup(int which)
{
    memset(&ws, 0, sizeof ws);
    if (which == 0)
        cfg = (struct mc_kda_config){.hidden_size = 12, .num_heads = 3, .head_dim = 4, .conv_kernel = 3,
                                     .chunk_size = 5, .rms_norm_eps = 1e-6};
    else
        cfg = (struct mc_kda_config){.hidden_size = 16, .num_heads = 2, .head_dim = 8, .conv_kernel = 4,
                                     .chunk_size = 20, .rms_norm_eps = 1e-5};
    const int64_t D = cfg.hidden_size, H = cfg.num_heads, d = cfg.head_dim, inner = H * d, C = 3 * inner;
    struct tu_lcg g = {2800 + (uint64_t)which};
    const double sD = 1.0 / sqrt((double)D), sd = 1.0 / sqrt((double)d);
    tu_weights_add(&ws, "q_proj.weight", 2, inner, D, 0, 0.0, sD, &g);
    tu_weights_add(&ws, "k_proj.weight", 2, inner, D, 0, 0.0, sD, &g);
    tu_weights_add(&ws, "v_proj.weight", 2, inner, D, 0, 0.0, sD, &g);
    tu_weights_add(&ws, "conv1d.weight", 3, C, 1, cfg.conv_kernel, 0.0, 0.5, &g);
    tu_weights_add(&ws, "forget_gate.f_a_proj.weight", 2, d, D, 0, 0.0, sD, &g);
    tu_weights_add(&ws, "forget_gate.f_b_proj.weight", 2, inner, d, 0, 0.0, sd, &g);
    tu_weights_add(&ws, "forget_gate.dt_bias", 1, inner, 0, 0, -2.0, 1.0, &g);
    tu_weights_add(&ws, "forget_gate.A_log", 1, H, 0, 0, 1.0, 1.0, &g);
    ws.w[ws.n - 1].ndim = 4; /* [1][1][H][1] as upstream stores it: H elements either way */
    memcpy(ws.w[ws.n - 1].dims, (const int64_t[MC_MAX_DIMS]){1, 1, H, 1}, sizeof ws.w[ws.n - 1].dims);
    tu_weights_add(&ws, "b_proj.weight", 2, H, D, 0, 0.0, sD, &g);
    tu_weights_add(&ws, "g_a_proj.weight", 2, d, D, 0, 0.0, sD, &g);
    tu_weights_add(&ws, "g_b_proj.weight", 2, inner, d, 0, 0.0, sd, &g);
    tu_weights_add(&ws, "o_norm.weight", 1, d, 0, 0, 1.0, 0.2, &g);
    tu_weights_add(&ws, "o_proj.weight", 2, D, inner, 0, 0.0, 1.0 / sqrt((double)inner), &g);
    tu_weights_round(&ws, MC_DTYPE_F32);
    fam = (struct ft_family){
        .name = which ? "kda cfg1" : "kda cfg0", .family = MC_FAMILY_KDA,
        .cpu = mc_cpu_kda_ops(), .ref = mc_reference_kda_ops(), .config = &cfg, .ws = &ws, .D = D,
        .conv_elems = C * cfg.conv_kernel, .state_elems = H * d * d, .out_bias = "o_proj.bias",
        .f32_atol = 1e-5, .f32_rtol = 1e-4,
        .bf16_atol = 2e-5, .bf16_rtol = 1.0 / 256.0 * 1.25, .f16_atol = 2e-5, .f16_rtol = 1.0 / 2048.0 * 1.5,
        .chunked = 1,
    };
    return 0;
}

int main(void)
{
    return ft_run_suite(&fam, setup);
}
