/*
 * test_cpu_attention.c — the cpu attention layer (kernels/cpu/attention.c) against the reference
 * attention (reference/attention.c) in f64, through the ops structs, on two small random configurations
 * (Qwen3-Next-like: GQA 4/2, partial rotary 0.5, zero-centred q/k norms, output gate, biases;
 * LFM2-like: GQA 3/1, full rotary, plain RMSNorm q/k norms, no biases; then two of Inkling's options, §12.9:
 * sliding GQA 2/1 of hd 8, a window of 3 and relative extent 3, short convs of kernel 3, no rotary, scale 1/hd;
 * full GQA 4/2 of hd 6, relative extent 8, d_rel 3, short convs of kernel 2), with the shared family checks
 * (cpu_familytest.h): prefill / primed multi-token / L == 1 with left, right and middle padding, split
 * invariance, bitwise thread-count invariance, bf16 / f16 storage, cache round trip (the count and the
 * KV slots), error paths.
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
 * Tolerances. f32: the same token loop as the reference with the RoPE angles from a table (both
 * round cos/sin of a double angle once), the exp of vmath.h and sgemm projections: 1e-5 / 1e-4 as
 * for the other families (measured output max abs 8.8e-8, state 5.4e-7). bf16 / f16: one rounding of the output
 * to storage (2^-8 / 2^-11 relative) plus margin (measured headroom 0.64 bf16, 0.54 f16); the KV cache
 * is f32 and uses the f32 numbers.
 * cache_length 70 holds the round trip's two forwards of 33 tokens.
 */
static struct ft_family fam;
static struct mc_attention_config cfg;
static struct tu_weights ws;

static int setup(int which)
{
    memset(&ws, 0, sizeof ws);
    if (which == 0)
        cfg = (struct mc_attention_config){.hidden_size = 12, .num_attention_heads = 4, .num_key_value_heads = 2,
                                           .head_dim = 8, .cache_length = 70, .partial_rotary_factor = 0.5,
                                           .rope_theta = 10000.0, .rms_norm_eps = 1e-6,
                                           .qk_norm = MC_QK_NORM_ZERO_CENTRED, .attn_output_gate = 1,
                                           .attention_bias = 1};
    else if (which == 1)
        cfg = (struct mc_attention_config){.hidden_size = 10, .num_attention_heads = 3, .num_key_value_heads = 1,
                                           .head_dim = 6, .cache_length = 70, .partial_rotary_factor = 1.0,
                                           .rope_theta = 1000000.0, .rms_norm_eps = 1e-5, .qk_norm = MC_QK_NORM_RMS,
                                           .attn_output_gate = 0, .attention_bias = 0};
    else if (which == 2) /* Inkling's sliding layer */
        cfg = (struct mc_attention_config){.hidden_size = 12, .num_attention_heads = 2, .num_key_value_heads = 1,
                                           .head_dim = 8, .cache_length = 70, .rms_norm_eps = 1e-6,
                                           .qk_norm = MC_QK_NORM_RMS, .no_rope = 1, .softmax_scale = 1.0 / 8.0,
                                           .sconv_kernel = 3, .rel_dim = 2, .rel_extent = 3, .sliding_window = 3};
    else /* Inkling's full layer */
        cfg = (struct mc_attention_config){.hidden_size = 10, .num_attention_heads = 4, .num_key_value_heads = 2,
                                           .head_dim = 6, .cache_length = 70, .rms_norm_eps = 1e-6,
                                           .qk_norm = MC_QK_NORM_RMS, .no_rope = 1, .softmax_scale = 1.0 / 6.0,
                                           .sconv_kernel = 2, .rel_dim = 3, .rel_extent = 8};
    const int64_t D = cfg.hidden_size, hd = cfg.head_dim, qd = cfg.num_attention_heads * hd;
    const int64_t kvd = cfg.num_key_value_heads * hd, qrows = cfg.attn_output_gate ? 2 * qd : qd;
    const int bias = cfg.attention_bias;
    struct tu_lcg g = {3000 + (uint64_t)which};
    tu_weights_add(&ws, "q_proj.weight", 2, qrows, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (bias)
        tu_weights_add(&ws, "q_proj.bias", 1, qrows, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&ws, "k_proj.weight", 2, kvd, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (bias)
        tu_weights_add(&ws, "k_proj.bias", 1, kvd, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&ws, "v_proj.weight", 2, kvd, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (bias)
        tu_weights_add(&ws, "v_proj.bias", 1, kvd, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&ws, "o_proj.weight", 2, D, qd, 0, 0.0, 1.0 / sqrt((double)qd), &g);
    if (bias)
        tu_weights_add(&ws, "o_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
    const double centre = cfg.qk_norm == MC_QK_NORM_RMS ? 1.0 : 0.0;
    tu_weights_add(&ws, "q_norm.weight", 1, hd, 0, 0, centre, 0.3, &g);
    tu_weights_add(&ws, "k_norm.weight", 1, hd, 0, 0, centre, 0.3, &g);
    const int64_t K = cfg.sconv_kernel;
    if (K > 0) {
        tu_weights_add(&ws, "k_sconv.conv1d.weight", 3, kvd, 1, K, 0.0, 1.0 / sqrt((double)K), &g);
        tu_weights_add(&ws, "v_sconv.conv1d.weight", 3, kvd, 1, K, 0.0, 1.0 / sqrt((double)K), &g);
        tu_weights_add(&ws, "out_sconv.conv1d.weight", 3, D, 1, K, 0.0, 1.0 / sqrt((double)K), &g);
    }
    if (cfg.rel_dim > 0) {
        tu_weights_add(&ws, "r_proj.weight", 2, cfg.num_attention_heads * cfg.rel_dim, D, 0, 0.0, 1.0 / sqrt((double)D),
                       &g);
        tu_weights_add(&ws, "rel_logits_proj.proj", 2, cfg.rel_dim, cfg.rel_extent, 0, 0.0, 0.5, &g);
    }
    tu_weights_round(&ws, MC_DTYPE_F32);
    fam = (struct ft_family){
        .name = which == 0 ? "attention cfg0" : which == 1 ? "attention cfg1" : which == 2 ? "attention inkling sliding"
                                                                                        : "attention inkling full", .family = MC_FAMILY_ATTENTION,
        .cpu = mc_cpu_attention_ops(), .ref = mc_reference_attention_ops(), .config = &cfg, .ws = &ws, .D = D,
        .conv_elems = K > 0 ? (1 + 2 * kvd + D) * K : 1, .state_elems = 2 * kvd * cfg.cache_length, .out_bias = "o_proj.bias",
        .f32_atol = 1e-5, .f32_rtol = 1e-4,
        .bf16_atol = 2e-5, .bf16_rtol = 1.0 / 256.0 * 1.5, .f16_atol = 2e-5, .f16_rtol = 1.0 / 2048.0 * 1.5,
    };
    return 0;
}

static int base; /* 0: the first two configurations, 2: Inkling's */

static int setup_from(int which)
{
    return setup(base + which);
}

int main(void)
{
    int rc = ft_run_suite(&fam, setup_from);
    base = 2;
    return rc | ft_run_suite(&fam, setup_from);
}
