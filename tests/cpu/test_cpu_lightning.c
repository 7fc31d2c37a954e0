/*
 * test_cpu_lightning.c — the cpu lightning attention mixer (kernels/cpu/lightning.c, the block form per
 * (row, head)) against the reference lightning attention (reference/lightning.c, the token-by-token
 * recurrence) in f64, through the ops structs, on two small random configurations (D 12, H 3, hd 4,
 * block 5, the middle layer of 3; D 16, H 2, hd 8, block 8, layer 0 of 1), with the shared family
 * checks (cpu_familytest.h): prefill / primed multi-token / L == 1 with left, right and middle padding
 * (33 tokens: several blocks and a partial one), split invariance, bitwise thread-count invariance,
 * bf16 / f16 storage, cache round trip, error paths.
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
 * Tolerances. f32: the block form sums in another order than the recurrence; states reach ~10 here
 * (slowly decaying heads), measured output max abs 3e-7, state 2e-6: 1e-5 / 1e-4 as for the other
 * families. bf16 / f16: one rounding of the output to the storage dtype (2^-8 / 2^-11 relative) plus
 * margin; the state is f32 and uses the f32 numbers.
 */
static struct ft_family fam;
static struct mc_lightning_config cfg;
static struct tu_weights ws;

static int setup(int which)
{
    memset(&ws, 0, sizeof ws);
    if (which == 0)
        cfg = (struct mc_lightning_config){.hidden_size = 12, .num_attention_heads = 3, .head_dim = 4,
                                           .block_size = 5, .layer_idx = 1, .num_hidden_layers = 3,
                                           .norm_eps = 1e-6};
    else
        cfg = (struct mc_lightning_config){.hidden_size = 16, .num_attention_heads = 2, .head_dim = 8,
                                           .block_size = 8, .layer_idx = 0, .num_hidden_layers = 1,
                                           .norm_eps = 1e-5};
    const int64_t D = cfg.hidden_size, inner = cfg.num_attention_heads * cfg.head_dim;
    struct tu_lcg g = {2700 + (uint64_t)which};
    tu_weights_add(&ws, "qkv_proj.weight", 2, 3 * inner, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    tu_weights_add(&ws, "output_gate.weight", 2, inner, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    tu_weights_add(&ws, "norm.weight", 1, inner, 0, 0, 1.0, 0.2, &g);
    tu_weights_add(&ws, "out_proj.weight", 2, D, inner, 0, 0.0, 1.0 / sqrt((double)inner), &g);
    tu_weights_round(&ws, MC_DTYPE_F32);
    fam = (struct ft_family){
        .name = which ? "lightning cfg1" : "lightning cfg0", .family = MC_FAMILY_LIGHTNING,
        .cpu = mc_cpu_lightning_ops(), .ref = mc_reference_lightning_ops(), .config = &cfg, .ws = &ws, .D = D,
        .conv_elems = 1, .state_elems = cfg.num_attention_heads * cfg.head_dim * cfg.head_dim,
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
