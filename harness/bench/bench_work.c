/*
 * bench_work.c — the shapes, FLOP counts and workloads of `mixcheck bench` (bench_work.h).
 *
 * Variants of a workload:
 *   - backend   the whole mixer through ops->forward (a prefill from a fresh cache), weights and x
 *               in the storage dtype;
 *   - core      the cpu recurrent core alone, mc_cpu_<family>_core (kernels/cpu/cpu.h), f32;
 *   - plain     the same core as a plain token-by-token f64 recurrence written here from the spec
 *               (docs/semantics.md): the oracle the cpu core is validated against before it is timed, and the
 *               baseline of the core's speed ratio.
 * Weights and inputs are uniform draws from a fixed seed at the scales of the upstream inits:
 * projections and conv U(±fan_in^-1/2), dt log-uniform in [0.001, 0.1] (stored as softplus^-1 in
 * dt_bias), A_log = log U(1, 16) (Mamba2, GDN) or log(n+1) (Mamba1, S4D-real), D and norm weights 1,
 * x uniform with unit variance. No golden: bench checks correctness through the cases (the gate in
 * bench.c) and, for the core, through mc_bench_core_validate.
 */
#include "bench_work.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h" /* kernels/cpu: mc_cpu_from_f32, mc_cpu_dtype_bytes, mc_cpu_conv_weight_kc */
#include "cpu.h"

#define BW_MAX_WEIGHTS 13
#define BW_MAX_TOK 3

/* ---- shapes and FLOP counts ---------------------------------------------------------------------- */

void mc_bench_shape_default(enum mc_family family, struct mc_bench_shape *s)
{
    memset(s, 0, sizeof *s);
    s->family = family;
    switch (family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
        break;
    case MC_FAMILY_MAMBA2: /* mamba2-130m: D 768, expand 2, 24 heads of 64, N 128, one group */
        s->cfg.m2 = (struct mc_mamba2_config){.hidden_size = 768, .num_heads = 24, .head_dim = 64, .state_size = 128,
                                              .n_groups = 1, .conv_kernel = 4, .chunk_size = 256,
                                              .norm_group_size = 1536, .layer_norm_epsilon = 1e-5,
                                              .time_step_limit = {0.0, INFINITY}, .use_bias = 0,
                                              .use_conv_bias = 1};
        s->chunk = 256; /* the model's chunk_size; --chunk Q sets another SSD chunk length */
        break;
    case MC_FAMILY_GDN: /* Qwen3-Next linear attention layer */
        s->cfg.gdn = (struct mc_gdn_config){.hidden_size = 2048, .num_key_heads = 16, .num_value_heads = 32,
                                            .key_head_dim = 128, .value_head_dim = 128, .conv_kernel = 4,
                                            .chunk_size = 64, .rms_norm_eps = 1e-6,
                                            .layout = MC_GDN_LAYOUT_QWEN3_NEXT};
        s->chunk = 64;
        break;
    case MC_FAMILY_MAMBA1: /* mamba-130m */
        s->cfg.m1 = (struct mc_mamba1_config){.hidden_size = 768, .intermediate_size = 1536, .state_size = 16,
                                              .conv_kernel = 4, .time_step_rank = 48, .use_bias = 0,
                                              .use_conv_bias = 1};
        break;
    case MC_FAMILY_SHORTCONV: /* LFM2-350M-like */
        s->cfg.sc = (struct mc_shortconv_config){.hidden_size = 1024, .conv_kernel = 3, .conv_bias = 0};
        break;
    case MC_FAMILY_LIGHTNING: /* MiniMax-Text-01's heads (hd 128, block 256), 16 of its 64, at D 2048 */
        s->cfg.la = (struct mc_lightning_config){.hidden_size = 2048, .num_attention_heads = 16, .head_dim = 128,
                                                 .block_size = 256, .layer_idx = 0, .num_hidden_layers = 80,
                                                 .norm_eps = 1e-6};
        s->chunk = 256;
        break;
    case MC_FAMILY_KDA: /* Kimi-Linear-48B-A3B linear attention layer */
        s->cfg.kda = (struct mc_kda_config){.hidden_size = 2304, .num_heads = 32, .head_dim = 128, .conv_kernel = 4,
                                            .chunk_size = 64, .rms_norm_eps = 1e-5};
        s->chunk = 64;
        break;
    case MC_FAMILY_ATTENTION: /* not benchmarked: bench refuses the family (bench.c) */
        break;
    }
}

void mc_bench_shape_describe(const struct mc_bench_shape *s, enum mc_bench_mode mode, char *buf, size_t len)
{
    const int core = mode == MC_BENCH_CORE;
    switch (s->family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
        break;
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = &s->cfg.m2;
        char d[32] = "", q[48] = "chunked SSD, the configuration's Q";
        if (!core)
            snprintf(d, sizeof d, "D %lld, ", (long long)c->hidden_size);
        if (s->chunk > 0)
            snprintf(q, sizeof q, "chunked SSD Q %lld", (long long)s->chunk);
        snprintf(buf, len, "%sH %lld x P %lld, N %lld, G %lld, K %lld, %s", d, (long long)c->num_heads,
                 (long long)c->head_dim, (long long)c->state_size, (long long)c->n_groups, (long long)c->conv_kernel, q);
        break;
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = &s->cfg.gdn;
        char d[32] = "";
        if (!core)
            snprintf(d, sizeof d, "D %lld, ", (long long)c->hidden_size);
        snprintf(buf, len, "%sHk %lld / Hv %lld of %lld/%lld, K %lld, chunk %lld", d, (long long)c->num_key_heads,
                 (long long)c->num_value_heads, (long long)c->key_head_dim, (long long)c->value_head_dim,
                 (long long)c->conv_kernel, (long long)s->chunk);
        break;
    }
    case MC_FAMILY_MAMBA1: {
        const struct mc_mamba1_config *c = &s->cfg.m1;
        snprintf(buf, len, "D %lld, I %lld, N %lld, R %lld, K %lld", (long long)c->hidden_size,
                 (long long)c->intermediate_size, (long long)c->state_size, (long long)c->time_step_rank,
                 (long long)c->conv_kernel);
        break;
    }
    case MC_FAMILY_SHORTCONV:
        snprintf(buf, len, "D %lld, K %lld", (long long)s->cfg.sc.hidden_size, (long long)s->cfg.sc.conv_kernel);
        break;
    case MC_FAMILY_LIGHTNING: {
        const struct mc_lightning_config *c = &s->cfg.la;
        snprintf(buf, len, "D %lld, H %lld x hd %lld, block %lld", (long long)c->hidden_size,
                 (long long)c->num_attention_heads, (long long)c->head_dim, (long long)s->chunk);
        break;
    }
    case MC_FAMILY_KDA: {
        const struct mc_kda_config *c = &s->cfg.kda;
        snprintf(buf, len, "D %lld, H %lld x d %lld, K %lld, chunk %lld", (long long)c->hidden_size,
                 (long long)c->num_heads, (long long)c->head_dim, (long long)c->conv_kernel, (long long)s->chunk);
        break;
    }
    case MC_FAMILY_ATTENTION: /* not benchmarked: bench refuses the family (bench.c) */
        break;
    }
}

/*
 * FLOPs per token, 2 per multiply-add, 1 per lone multiply or add. Counted: the projections (GEMMs),
 * the depthwise conv, and the recurrence. Not counted (each O(width) per token, together < 1 % at
 * the built-in shapes): activations, softplus, exp, gates' elementwise products, D skip, norms.
 *
 * mamba2   in_proj 2·D·(2I + 2GN + H) + conv 2·K·C + core 5·H·P·N + out_proj 2·I·D
 *            core per (head, p, n): s = exp(dt·A)·s + (dt·x)·B  (mul + fma: 3), y += C·s (fma: 2)
 *            I = H·P, C = I + 2GN
 * gdn      in_proj 2·D·(2·Hk·dk + 2·Hv·dv + 2·Hv) + conv 2·K·C + core 7·Hv·dk·dv + out_proj 2·Hv·dv·D
 *            core per (value head, i, j): S·exp(g) (1), m = Sᵀk (2), S += k·δᵀ (2), o = Sᵀq (2)
 *            C = 2·Hk·dk + Hv·dv
 * mamba1   in_proj 2·D·2I + conv 2·K·I + x_proj 2·I·(R + 2N) + dt_proj 2·R·I + scan 6·I·N
 *            + out_proj 2·I·D;  scan per (i, n): δ·A (1), s = e·s + (δu)·B (3), y += C·s (2)
 * shortconv in_proj 2·D·3D + B⊙x (D) + conv 2·K·D + C⊙ (D) + out_proj 2·D·D
 * lightning qkv_proj 2·D·3I + output_gate 2·D·I + core 5·H·hd² + out_proj 2·I·D
 *            core per (head, i, j): S = λ·S + k·v (mul + fma: 3), o += S·q (fma: 2); I = H·hd
 * kda      proj 2·D·(3I + 2d + H) + f_b, g_b 2·2·d·I + conv 2·K·3I + core 7·H·d² + o_proj 2·I·D
 *            core per (head, i, j) as gdn's; I = H·d
 * --core counts the conv and core terms only (lightning has no core entry: layer mode only).
 */
double mc_bench_flop_per_token(const struct mc_bench_shape *s, enum mc_bench_mode mode)
{
    const int core = mode == MC_BENCH_CORE;
    switch (s->family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
        break;
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = &s->cfg.m2;
        const double D = (double)c->hidden_size, H = (double)c->num_heads, P = (double)c->head_dim;
        const double N = (double)c->state_size, G = (double)c->n_groups, K = (double)c->conv_kernel;
        const double I = H * P, C = I + 2 * G * N;
        const double conv_core = 2 * K * C + 5 * H * P * N;
        return core ? conv_core : 2 * D * (2 * I + 2 * G * N + H) + conv_core + 2 * I * D;
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = &s->cfg.gdn;
        const double D = (double)c->hidden_size, Hk = (double)c->num_key_heads, Hv = (double)c->num_value_heads;
        const double dk = (double)c->key_head_dim, dv = (double)c->value_head_dim, K = (double)c->conv_kernel;
        const double C = 2 * Hk * dk + Hv * dv;
        const double conv_core = 2 * K * C + 7 * Hv * dk * dv;
        return core ? conv_core : 2 * D * (2 * Hk * dk + 2 * Hv * dv + 2 * Hv) + conv_core + 2 * Hv * dv * D;
    }
    case MC_FAMILY_MAMBA1: {
        const struct mc_mamba1_config *c = &s->cfg.m1;
        const double D = (double)c->hidden_size, I = (double)c->intermediate_size, N = (double)c->state_size;
        const double K = (double)c->conv_kernel, R = (double)c->time_step_rank;
        const double conv_core = 2 * K * I + 6 * I * N;
        return core ? conv_core : 2 * D * 2 * I + conv_core + 2 * I * (R + 2 * N) + 2 * R * I + 2 * I * D;
    }
    case MC_FAMILY_SHORTCONV: {
        const double D = (double)s->cfg.sc.hidden_size, K = (double)s->cfg.sc.conv_kernel;
        const double conv_core = 2 * D + 2 * K * D;
        return core ? conv_core : 2 * D * 3 * D + conv_core + 2 * D * D;
    }
    case MC_FAMILY_LIGHTNING: {
        const struct mc_lightning_config *c = &s->cfg.la;
        const double D = (double)c->hidden_size, H = (double)c->num_attention_heads, hd = (double)c->head_dim;
        const double I = H * hd, core_t = 5 * H * hd * hd;
        return core ? core_t : 2 * D * 3 * I + 2 * D * I + core_t + 2 * I * D;
    }
    case MC_FAMILY_KDA: {
        const struct mc_kda_config *c = &s->cfg.kda;
        const double D = (double)c->hidden_size, H = (double)c->num_heads, d = (double)c->head_dim;
        const double K = (double)c->conv_kernel, I = H * d, conv_core = 2 * K * 3 * I + 7 * H * d * d;
        return core ? conv_core : 2 * D * (3 * I + 2 * d + H) + 4 * d * I + conv_core + 2 * I * D;
    }
    case MC_FAMILY_ATTENTION: /* not benchmarked: bench refuses the family (bench.c) */
        break;
    }
    return 0.0;
}

/*
 * The chunked forms' executed count (per token, chunk Q, same conventions; the q×q products are
 * full sgemms, the masked half included):
 * mamba2 core per head: C·Bᵀ 2·Q·N/(H/G) (shared by a group's heads) + state→output 2·P·N
 *          + intra-chunk 2·Q·P + chunk state 2·P·N + decay 2·Q·N/Q... (B scaling N) ≈ 4PN + 2QP + 2QN·G/H + N
 * gdn core per value head (Q = chunk): [q;k]·kᵀ 4·Q·dk/r (per key head) + triangular solve
 *          Q·(dk+dv) + [W;Q]·S 4·dk·dv + P·Vn 2·Q·dv + state 2·dk·dv + scaling dk·dv
 */
double mc_bench_flop_per_token_chunked(const struct mc_bench_shape *s, enum mc_bench_mode mode)
{
    const double seq = mc_bench_flop_per_token(s, mode);
    switch (s->family) {
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = &s->cfg.m2;
        const double H = (double)c->num_heads, P = (double)c->head_dim, N = (double)c->state_size;
        const double G = (double)c->n_groups, Q = (double)s->chunk;
        if (s->chunk <= 0)
            return seq;
        return seq - 5 * H * P * N + H * (4 * P * N + 2 * Q * P + 2 * Q * N * G / H + N);
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = &s->cfg.gdn;
        const double Hk = (double)c->num_key_heads, Hv = (double)c->num_value_heads;
        const double dk = (double)c->key_head_dim, dv = (double)c->value_head_dim;
        const double Q = (double)(s->chunk > 0 ? s->chunk : 64);
        return seq - 7 * Hv * dk * dv + Hk * 4 * Q * dk + Hv * (Q * (dk + dv) + 7 * dk * dv + 2 * Q * dv);
    }
    default:
        return seq;
    }
}

const char *mc_bench_flop_formula(enum mc_family family, enum mc_bench_mode mode)
{
    const int core = mode == MC_BENCH_CORE;
    switch (family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
        break;
    case MC_FAMILY_MAMBA2:
        return core ? "2KC + 5HPN" : "2D(2I+2GN+H) + 2KC + 5HPN + 2ID";
    case MC_FAMILY_GDN:
        return core ? "2KC + 7Hv*dk*dv" : "2D(2Hk*dk+2Hv*dv+2Hv) + 2KC + 7Hv*dk*dv + 2Hv*dv*D";
    case MC_FAMILY_MAMBA1:
        return core ? "2KI + 6IN" : "4DI + 2KI + 2I(R+2N) + 2RI + 6IN + 2ID";
    case MC_FAMILY_SHORTCONV:
        return core ? "2D + 2KD" : "6D^2 + 2D + 2KD + 2D^2";
    case MC_FAMILY_LIGHTNING:
        return core ? "5H*hd^2" : "6DI + 2DI + 5H*hd^2 + 2ID";
    case MC_FAMILY_KDA:
        return core ? "6KI + 7H*d^2" : "2D(3I+2d+H) + 4dI + 6KI + 7H*d^2 + 2ID";
    case MC_FAMILY_ATTENTION: /* not benchmarked: bench refuses the family (bench.c) */
        break;
    }
    return "";
}

/* ---- random draws ------------------------------------------------------------------------------- */

static uint64_t bw_next(uint64_t *st)
{
    uint64_t z = (*st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double bw_unit(uint64_t *st) /* [0, 1) */
{
    return (double)(bw_next(st) >> 11) * 0x1.0p-53;
}

enum bw_init {
    BW_UNIFORM,   /* U(-scale, scale) */
    BW_CONST,     /* scale */
    BW_DT,        /* log-uniform in [0.001, 0.1] */
    BW_DT_BIAS,   /* softplus^-1 of a BW_DT draw */
    BW_NEG_A,     /* -U(1, 16) */
    BW_A_LOG,     /* log U(1, 16) */
    BW_A_LOG_S4D, /* log(n + 1) along the last dim (Mamba1) */
    BW_UNIT01,    /* U(0, 1) */
};

static void bw_fill(float *dst, size_t n, enum bw_init init, double scale, int64_t last_dim, uint64_t *st)
{
    for (size_t i = 0; i < n; i++) {
        double v = 0.0;
        switch (init) {
        case BW_UNIFORM:
            v = (2.0 * bw_unit(st) - 1.0) * scale;
            break;
        case BW_CONST:
            v = scale;
            break;
        case BW_DT:
        case BW_DT_BIAS:
            v = exp(log(0.001) + bw_unit(st) * (log(0.1) - log(0.001)));
            if (init == BW_DT_BIAS)
                v = v + log(-expm1(-v)); /* softplus^-1 */
            break;
        case BW_NEG_A:
            v = -(1.0 + 15.0 * bw_unit(st));
            break;
        case BW_A_LOG:
            v = log(1.0 + 15.0 * bw_unit(st));
            break;
        case BW_A_LOG_S4D:
            v = log((double)(i % (size_t)last_dim) + 1.0);
            break;
        case BW_UNIT01:
            v = bw_unit(st);
            break;
        }
        dst[i] = (float)v;
    }
}

/* ---- workloads ---------------------------------------------------------------------------------- */

struct bw_weight_spec {
    const char *name;
    int ndim;
    int64_t dims[MC_MAX_DIMS];
    enum bw_init init;
    double scale;
};

struct mc_bench_work {
    struct mc_bench_shape s;
    enum mc_bench_impl impl;
    const struct mc_backend_ops *ops;
    enum mc_dtype dtype;
    int64_t B, L;
    int threads;
    size_t footprint;
    /* backend */
    struct mc_model *model;
    struct mc_cache *cache;
    void *x, *y;
    /* core / plain: per-token inputs [B][L][tok_w[i]], parameters, window, state, output */
    float *tok[BW_MAX_TOK];
    int64_t tok_w[BW_MAX_TOK];
    int n_tok;
    float *conv_w;  /* [C][K] */
    float *conv_kc; /* [K][C] the same, transposed once (KDA's core takes it: a decode step would spend a third
                     * of its time transposing them) */
    float *a, *d;  /* family-specific shapes */
    int64_t C, K, state_elems, y_w;
    float *window, *state, *out;       /* core: f32 */
    double *pwindow, *pstate, *pout;   /* plain: f64 */
    /* packed: the B·L tokens of x as n_packed sequences on a pool of 2·n_packed rows */
    int64_t n_packed;
    int64_t *cu, *slots;
    uint8_t *has_init;
    struct mc_cache *pool;
};

static int bw_fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bw_fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

static int bw_weight_specs(const struct mc_bench_shape *s, struct bw_weight_spec *w)
{
    int n = 0;
#define W(nm, nd, d0, d1, d2, in, sc) w[n++] = (struct bw_weight_spec){nm, nd, {d0, d1, d2}, in, sc}
#define W4(nm, d0, d1, d2, d3, in, sc) w[n++] = (struct bw_weight_spec){nm, 4, {d0, d1, d2, d3}, in, sc}
    switch (s->family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
        break;
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = &s->cfg.m2;
        const int64_t I = c->num_heads * c->head_dim, GN = c->n_groups * c->state_size, C = I + 2 * GN;
        const int64_t proj = 2 * I + 2 * GN + c->num_heads, D = c->hidden_size, K = c->conv_kernel;
        W("in_proj.weight", 2, proj, D, 0, BW_UNIFORM, 1.0 / sqrt((double)D));
        W("conv1d.weight", 3, C, 1, K, BW_UNIFORM, 1.0 / sqrt((double)K));
        W("conv1d.bias", 1, C, 0, 0, BW_UNIFORM, 1.0 / sqrt((double)K));
        W("dt_bias", 1, c->num_heads, 0, 0, BW_DT_BIAS, 0);
        W("A_log", 1, c->num_heads, 0, 0, BW_A_LOG, 0);
        W("D", 1, c->num_heads, 0, 0, BW_CONST, 1.0);
        W("norm.weight", 1, I, 0, 0, BW_CONST, 1.0);
        W("out_proj.weight", 2, D, I, 0, BW_UNIFORM, 1.0 / sqrt((double)I));
        break;
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = &s->cfg.gdn;
        const int64_t kd = c->num_key_heads * c->key_head_dim, vd = c->num_value_heads * c->value_head_dim;
        const int64_t C = 2 * kd + vd, D = c->hidden_size, K = c->conv_kernel, Hv = c->num_value_heads;
        W("in_proj_qkvz.weight", 2, C + vd, D, 0, BW_UNIFORM, 1.0 / sqrt((double)D));
        W("in_proj_ba.weight", 2, 2 * Hv, D, 0, BW_UNIFORM, 1.0 / sqrt((double)D));
        W("conv1d.weight", 3, C, 1, K, BW_UNIFORM, 1.0 / sqrt((double)K));
        W("dt_bias", 1, Hv, 0, 0, BW_DT_BIAS, 0);
        W("A_log", 1, Hv, 0, 0, BW_A_LOG, 0);
        W("norm.weight", 1, c->value_head_dim, 0, 0, BW_CONST, 1.0);
        W("out_proj.weight", 2, D, vd, 0, BW_UNIFORM, 1.0 / sqrt((double)vd));
        break;
    }
    case MC_FAMILY_MAMBA1: {
        const struct mc_mamba1_config *c = &s->cfg.m1;
        const int64_t I = c->intermediate_size, D = c->hidden_size, N = c->state_size, R = c->time_step_rank;
        const int64_t K = c->conv_kernel;
        W("in_proj.weight", 2, 2 * I, D, 0, BW_UNIFORM, 1.0 / sqrt((double)D));
        W("conv1d.weight", 3, I, 1, K, BW_UNIFORM, 1.0 / sqrt((double)K));
        W("conv1d.bias", 1, I, 0, 0, BW_UNIFORM, 1.0 / sqrt((double)K));
        W("x_proj.weight", 2, R + 2 * N, I, 0, BW_UNIFORM, 1.0 / sqrt((double)I));
        W("dt_proj.weight", 2, I, R, 0, BW_UNIFORM, 1.0 / sqrt((double)R));
        W("dt_proj.bias", 1, I, 0, 0, BW_DT_BIAS, 0);
        W("A_log", 2, I, N, 0, BW_A_LOG_S4D, 0);
        W("D", 1, I, 0, 0, BW_CONST, 1.0);
        W("out_proj.weight", 2, D, I, 0, BW_UNIFORM, 1.0 / sqrt((double)I));
        break;
    }
    case MC_FAMILY_SHORTCONV: {
        const int64_t D = s->cfg.sc.hidden_size, K = s->cfg.sc.conv_kernel;
        W("in_proj.weight", 2, 3 * D, D, 0, BW_UNIFORM, 1.0 / sqrt((double)D));
        W("conv.weight", 3, D, 1, K, BW_UNIFORM, 1.0 / sqrt((double)K));
        W("out_proj.weight", 2, D, D, 0, BW_UNIFORM, 1.0 / sqrt((double)D));
        break;
    }
    case MC_FAMILY_LIGHTNING: {
        const struct mc_lightning_config *c = &s->cfg.la;
        const int64_t I = c->num_attention_heads * c->head_dim, D = c->hidden_size;
        W("qkv_proj.weight", 2, 3 * I, D, 0, BW_UNIFORM, 1.0 / sqrt((double)D));
        W("output_gate.weight", 2, I, D, 0, BW_UNIFORM, 1.0 / sqrt((double)D));
        W("norm.weight", 1, I, 0, 0, BW_CONST, 1.0);
        W("out_proj.weight", 2, D, I, 0, BW_UNIFORM, 1.0 / sqrt((double)I));
        break;
    }
    case MC_FAMILY_KDA: {
        const struct mc_kda_config *c = &s->cfg.kda;
        const int64_t d = c->head_dim, H = c->num_heads, I = H * d, D = c->hidden_size, K = c->conv_kernel;
        const double sD = 1.0 / sqrt((double)D), sd = 1.0 / sqrt((double)d);
        W("q_proj.weight", 2, I, D, 0, BW_UNIFORM, sD);
        W("k_proj.weight", 2, I, D, 0, BW_UNIFORM, sD);
        W("v_proj.weight", 2, I, D, 0, BW_UNIFORM, sD);
        W("conv1d.weight", 3, 3 * I, 1, K, BW_UNIFORM, 1.0 / sqrt((double)K));
        W("forget_gate.f_a_proj.weight", 2, d, D, 0, BW_UNIFORM, sD);
        W("forget_gate.f_b_proj.weight", 2, I, d, 0, BW_UNIFORM, sd);
        W("forget_gate.dt_bias", 1, I, 0, 0, BW_DT_BIAS, 0);
        W4("forget_gate.A_log", 1, 1, H, 1, BW_A_LOG, 0);
        W("b_proj.weight", 2, H, D, 0, BW_UNIFORM, sD);
        W("g_a_proj.weight", 2, d, D, 0, BW_UNIFORM, sD);
        W("g_b_proj.weight", 2, I, d, 0, BW_UNIFORM, sd);
        W("o_norm.weight", 1, d, 0, 0, BW_CONST, 1.0);
        W("o_proj.weight", 2, D, I, 0, BW_UNIFORM, 1.0 / sqrt((double)I));
        break;
    }
    case MC_FAMILY_ATTENTION: /* not benchmarked: bench refuses the family (bench.c) */
        break;
    }
#undef W4
#undef W
    return n;
}

static size_t bw_elems(const struct bw_weight_spec *w)
{
    size_t n = 1;
    for (int d = 0; d < w->ndim; d++)
        n *= (size_t)w->dims[d];
    return n;
}

/* Stores n floats in dtype (f64 widened, f32 as is, bf16/f16 rounded); malloc'd, NULL on no memory. */
static void *bw_store(enum mc_dtype dtype, const float *src, size_t n)
{
    const size_t es = dtype == MC_DTYPE_F64 ? sizeof(double) : mc_cpu_dtype_bytes(dtype);
    void *dst = malloc(n * es > 0 ? n * es : 1);
    if (!dst)
        return NULL;
    if (dtype == MC_DTYPE_F64) {
        for (size_t i = 0; i < n; i++)
            ((double *)dst)[i] = src[i];
    } else {
        mc_cpu_from_f32(dtype, src, dst, n);
    }
    return dst;
}

static size_t bw_dtype_bytes(enum mc_dtype dtype)
{
    return dtype == MC_DTYPE_F64 ? sizeof(double) : mc_cpu_dtype_bytes(dtype);
}

/* Conv channels, conv width and cache elements of the backend's cache (window + state). */
static void bw_cache_dims(const struct mc_bench_shape *s, int64_t *C, int64_t *K, int64_t *state_elems)
{
    switch (s->family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
        break;
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = &s->cfg.m2;
        *C = c->num_heads * c->head_dim + 2 * c->n_groups * c->state_size;
        *K = c->conv_kernel;
        *state_elems = c->num_heads * c->head_dim * c->state_size;
        break;
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = &s->cfg.gdn;
        *C = 2 * c->num_key_heads * c->key_head_dim + c->num_value_heads * c->value_head_dim;
        *K = c->conv_kernel;
        *state_elems = c->num_value_heads * c->key_head_dim * c->value_head_dim;
        break;
    }
    case MC_FAMILY_MAMBA1:
        *C = s->cfg.m1.intermediate_size;
        *K = s->cfg.m1.conv_kernel;
        *state_elems = s->cfg.m1.intermediate_size * s->cfg.m1.state_size;
        break;
    case MC_FAMILY_SHORTCONV:
        *C = s->cfg.sc.hidden_size;
        *K = s->cfg.sc.conv_kernel;
        *state_elems = 0;
        break;
    case MC_FAMILY_LIGHTNING:
        *C = 1; /* the count of real tokens */
        *K = 1;
        *state_elems = s->cfg.la.num_attention_heads * s->cfg.la.head_dim * s->cfg.la.head_dim;
        break;
    case MC_FAMILY_KDA:
        *C = 3 * s->cfg.kda.num_heads * s->cfg.kda.head_dim;
        *K = s->cfg.kda.conv_kernel;
        *state_elems = s->cfg.kda.num_heads * s->cfg.kda.head_dim * s->cfg.kda.head_dim;
        break;
    case MC_FAMILY_ATTENTION: /* not benchmarked: bench refuses the family (bench.c) */
        break;
    }
}

static int64_t bw_hidden(const struct mc_bench_shape *s)
{
    switch (s->family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
        break;
    case MC_FAMILY_MAMBA2:
        return s->cfg.m2.hidden_size;
    case MC_FAMILY_GDN:
        return s->cfg.gdn.hidden_size;
    case MC_FAMILY_MAMBA1:
        return s->cfg.m1.hidden_size;
    case MC_FAMILY_SHORTCONV:
        return s->cfg.sc.hidden_size;
    case MC_FAMILY_LIGHTNING:
        return s->cfg.la.hidden_size;
    case MC_FAMILY_KDA:
        return s->cfg.kda.hidden_size;
    case MC_FAMILY_ATTENTION: /* not benchmarked: bench refuses the family (bench.c) */
        break;
    }
    return 0;
}

static int bw_init_backend(struct mc_bench_work *w, uint64_t *rng, char *err, size_t err_len)
{
    struct bw_weight_spec spec[BW_MAX_WEIGHTS];
    struct mc_weight weights[BW_MAX_WEIGHTS];
    void *store[BW_MAX_WEIGHTS] = {0};
    const int n = bw_weight_specs(&w->s, spec);
    int rc = -1;
    size_t weight_bytes = 0;
    const size_t es = bw_dtype_bytes(w->dtype);
    for (int i = 0; i < n; i++) {
        const size_t ne = bw_elems(&spec[i]);
        float *tmp = malloc(ne * sizeof *tmp);
        if (!tmp) {
            bw_fail(err, err_len, "out of memory for weight %s", spec[i].name);
            goto done;
        }
        bw_fill(tmp, ne, spec[i].init, spec[i].scale, spec[i].dims[spec[i].ndim - 1], rng);
        store[i] = bw_store(w->dtype, tmp, ne);
        free(tmp);
        if (!store[i]) {
            bw_fail(err, err_len, "out of memory for weight %s", spec[i].name);
            goto done;
        }
        weights[i] = (struct mc_weight){.name = spec[i].name, .ndim = spec[i].ndim, .data = store[i]};
        memcpy(weights[i].dims, spec[i].dims, sizeof spec[i].dims);
        weight_bytes += ne * es;
    }
    const struct mc_model_desc desc = {.family = w->s.family,
                                       .dtype = w->dtype,
                                       .config = &w->s.cfg,
                                       .weights = weights,
                                       .n_weights = n,
                                       .chunk_size = w->s.chunk,
                                       .threads = w->threads};
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = w->ops->model_create(&desc, &w->model, &msg);
    if (st != MC_BACKEND_OK) {
        bw_fail(err, err_len, "%s model_create: %s", w->ops->name, msg.text);
        goto done;
    }
    /* the weights now live in the model (backends copy them); the bench's copies go */
    const size_t nx = (size_t)(w->B * w->L * bw_hidden(&w->s));
    float *tmp = malloc(nx * sizeof *tmp);
    if (!tmp) {
        bw_fail(err, err_len, "out of memory for x");
        goto done;
    }
    bw_fill(tmp, nx, BW_UNIFORM, sqrt(3.0), 0, rng);
    w->x = bw_store(w->dtype, tmp, nx);
    free(tmp);
    w->y = malloc(nx * es);
    if (!w->x || !w->y) {
        bw_fail(err, err_len, "out of memory for x and y");
        goto done;
    }
    memset(w->y, 0, nx * es);
    bw_cache_dims(&w->s, &w->C, &w->K, &w->state_elems);
    w->footprint = weight_bytes + 2 * nx * es + (size_t)(w->B * (w->C * w->K + w->state_elems)) * sizeof(float);
    rc = 0;
done:
    for (int i = 0; i < n; i++)
        free(store[i]);
    return rc;
}

/* Core inputs: the per-token tensors and parameters of each family's core. */
static int bw_init_core(struct mc_bench_work *w, uint64_t *rng, char *err, size_t err_len)
{
    const struct mc_bench_shape *s = &w->s;
    int64_t a_n = 0, d_n = 0;
    enum bw_init tok_init[BW_MAX_TOK] = {BW_UNIFORM, BW_UNIFORM, BW_UNIFORM};
    bw_cache_dims(s, &w->C, &w->K, &w->state_elems);
    switch (s->family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
        break;
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = &s->cfg.m2;
        w->n_tok = 2;
        w->tok_w[0] = w->C;
        w->tok_w[1] = c->num_heads;
        tok_init[1] = BW_DT;
        a_n = d_n = c->num_heads;
        w->y_w = c->num_heads * c->head_dim;
        break;
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = &s->cfg.gdn;
        w->n_tok = 3;
        w->tok_w[0] = w->C;
        w->tok_w[1] = c->num_value_heads; /* g */
        w->tok_w[2] = c->num_value_heads; /* beta */
        tok_init[1] = BW_DT;              /* scaled by -A below */
        tok_init[2] = BW_UNIT01;
        a_n = c->num_value_heads;
        w->y_w = c->num_value_heads * c->value_head_dim;
        break;
    }
    case MC_FAMILY_MAMBA1: {
        const struct mc_mamba1_config *c = &s->cfg.m1;
        w->n_tok = 3;
        w->tok_w[0] = c->intermediate_size;
        w->tok_w[1] = c->intermediate_size; /* delta */
        w->tok_w[2] = 2 * c->state_size;    /* B | C */
        tok_init[1] = BW_DT;
        a_n = c->intermediate_size * c->state_size;
        d_n = c->intermediate_size;
        w->y_w = c->intermediate_size;
        break;
    }
    case MC_FAMILY_SHORTCONV:
        w->n_tok = 1;
        w->tok_w[0] = 3 * s->cfg.sc.hidden_size;
        w->y_w = s->cfg.sc.hidden_size;
        break;
    case MC_FAMILY_KDA: {
        const struct mc_kda_config *c = &s->cfg.kda;
        w->n_tok = 3;
        w->tok_w[0] = w->C;                         /* q | k | v */
        w->tok_w[1] = c->num_heads * c->head_dim; /* f: softplus(f) = dt */
        w->tok_w[2] = c->num_heads;               /* b_raw */
        tok_init[1] = BW_DT_BIAS;
        a_n = c->num_heads; /* a_neg = -A */
        w->y_w = c->num_heads * c->head_dim;
        break;
    }
    case MC_FAMILY_ATTENTION: /* not benchmarked: bench refuses the family (bench.c) */
    case MC_FAMILY_LIGHTNING: /* layer mode only: no cpu core entry (bench.c refuses --core) */
        break;
    }
    size_t bytes = 0;
    const size_t BL = (size_t)(w->B * w->L);
    for (int i = 0; i < w->n_tok; i++) {
        const size_t n = BL * (size_t)w->tok_w[i];
        w->tok[i] = malloc(n * sizeof(float));
        if (!w->tok[i])
            return bw_fail(err, err_len, "out of memory for the core inputs");
        bw_fill(w->tok[i], n, tok_init[i], 1.0, 0, rng);
        bytes += n * sizeof(float);
    }
    w->conv_w = malloc((size_t)(w->C * w->K) * sizeof(float));
    w->a = malloc((size_t)(a_n > 0 ? a_n : 1) * sizeof(float));
    w->d = malloc((size_t)(d_n > 0 ? d_n : 1) * sizeof(float));
    if (!w->conv_w || !w->a || !w->d)
        return bw_fail(err, err_len, "out of memory for the core parameters");
    bw_fill(w->conv_w, (size_t)(w->C * w->K), BW_UNIFORM, 1.0 / sqrt((double)w->K), 0, rng);
    if (s->family == MC_FAMILY_KDA) {
        w->conv_kc = malloc((size_t)(w->C * w->K) * sizeof(float));
        if (!w->conv_kc)
            return bw_fail(err, err_len, "out of memory for the core parameters");
        mc_cpu_conv_weight_kc(w->C, w->K, w->conv_w, w->conv_kc);
    }
    if (s->family == MC_FAMILY_MAMBA1) {
        bw_fill(w->a, (size_t)a_n, BW_A_LOG_S4D, 0, s->cfg.m1.state_size, rng);
        for (int64_t i = 0; i < a_n; i++)
            w->a[i] = -expf(w->a[i]);
    } else {
        bw_fill(w->a, (size_t)a_n, BW_NEG_A, 0, 0, rng);
    }
    bw_fill(w->d, (size_t)d_n, BW_CONST, 1.0, 0, rng);
    if (s->family == MC_FAMILY_GDN) { /* g = A·dt: log decays of realistic size */
        const int64_t Hv = s->cfg.gdn.num_value_heads;
        for (size_t t = 0; t < BL; t++)
            for (int64_t h = 0; h < Hv; h++)
                w->tok[1][t * (size_t)Hv + (size_t)h] *= w->a[h];
    }
    bytes += (size_t)(w->C * w->K + a_n + d_n) * sizeof(float);
    const size_t win = (size_t)(w->B * w->K * w->C), st = (size_t)(w->B * w->state_elems), yn = BL * (size_t)w->y_w;
    if (w->impl == MC_BENCH_IMPL_CORE) {
        w->window = calloc(win, sizeof(float));
        w->state = calloc(st > 0 ? st : 1, sizeof(float));
        w->out = calloc(yn, sizeof(float));
        if (!w->window || !w->state || !w->out)
            return bw_fail(err, err_len, "out of memory for the core outputs");
        bytes += (win + st + yn) * sizeof(float);
    } else {
        w->pwindow = calloc(win, sizeof(double));
        w->pstate = calloc(st > 0 ? st : 1, sizeof(double));
        w->pout = calloc(yn, sizeof(double));
        if (!w->pwindow || !w->pstate || !w->pout)
            return bw_fail(err, err_len, "out of memory for the plain recurrence's outputs");
        bytes += (win + st + yn) * sizeof(double);
    }
    w->footprint = bytes;
    return 0;
}

int mc_bench_work_init(struct mc_bench_work **out, const struct mc_bench_shape *s, enum mc_bench_impl impl,
                       const struct mc_backend_ops *ops, enum mc_dtype dtype, int64_t batch, int64_t len, int threads,
                       uint64_t seed, char *err, size_t err_len)
{
    *out = NULL;
    struct mc_bench_work *w = calloc(1, sizeof *w);
    if (!w)
        return bw_fail(err, err_len, "out of memory");
    w->s = *s;
    w->impl = impl;
    w->ops = ops;
    w->dtype = impl == MC_BENCH_IMPL_BACKEND ? dtype : MC_DTYPE_F32;
    w->B = batch;
    w->L = len;
    w->threads = threads;
    uint64_t rng = seed;
    const int rc = impl == MC_BENCH_IMPL_BACKEND ? bw_init_backend(w, &rng, err, err_len)
                                                 : bw_init_core(w, &rng, err, err_len);
    if (rc != 0) {
        mc_bench_work_free(w);
        return -1;
    }
    *out = w;
    return 0;
}

int mc_bench_work_reset(struct mc_bench_work *w, char *err, size_t err_len)
{
    if (w->impl == MC_BENCH_IMPL_BACKEND) {
        if (w->cache)
            w->ops->cache_free(w->model, w->cache);
        w->cache = NULL;
        struct mc_msg msg = {{0}};
        if (w->ops->cache_alloc(w->model, w->B, &w->cache, &msg) != MC_BACKEND_OK)
            return bw_fail(err, err_len, "%s cache_alloc: %s", w->ops->name, msg.text);
        return 0;
    }
    const size_t win = (size_t)(w->B * w->K * w->C), st = (size_t)(w->B * w->state_elems);
    if (w->impl == MC_BENCH_IMPL_CORE) {
        memset(w->window, 0, win * sizeof(float));
        memset(w->state, 0, st * sizeof(float));
    } else {
        memset(w->pwindow, 0, win * sizeof(double));
        memset(w->pstate, 0, st * sizeof(double));
    }
    return 0;
}

/* ---- the cores: cpu entry points and plain f64 recurrences --------------------------------------- */

/* One call of the cpu core over tok[i] = [B][len][tok_w[i]] (any len: validation splits a sequence). */
static enum mc_backend_status bw_core_call(const struct mc_bench_shape *s, int64_t B, int64_t len, int threads,
                                           float *const tok[], const float *conv_w, const float *conv_kc,
                                           const float *a, const float *d,
                                           float *window, float *state, float *y, struct mc_msg *msg)
{
    switch (s->family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
        break;
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = &s->cfg.m2;
        const struct mc_cpu_mamba2_core_args ca = {
            .batch = B, .len = len, .heads = c->num_heads, .head_dim = c->head_dim, .state_size = c->state_size,
            .groups = c->n_groups, .conv_kernel = c->conv_kernel, .chunk = s->chunk, .threads = threads,
            .xbc = tok[0], .conv_weight = conv_w, .dt = tok[1], .a = a, .d = d, .window = window, .state = state,
            .y = y};
        return mc_cpu_mamba2_core(&ca, msg);
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = &s->cfg.gdn;
        const struct mc_cpu_gdn_core_args ca = {
            .batch = B, .len = len, .key_heads = c->num_key_heads, .value_heads = c->num_value_heads,
            .key_dim = c->key_head_dim, .value_dim = c->value_head_dim, .conv_kernel = c->conv_kernel,
            .chunk = s->chunk, .threads = threads, .qkv = tok[0], .conv_weight = conv_w, .g = tok[1],
            .beta = tok[2], .window = window, .state = state, .o = y};
        return mc_cpu_gdn_core(&ca, msg);
    }
    case MC_FAMILY_MAMBA1: {
        const struct mc_mamba1_config *c = &s->cfg.m1;
        const struct mc_cpu_mamba1_core_args ca = {
            .batch = B, .len = len, .channels = c->intermediate_size, .state_size = c->state_size,
            .conv_kernel = c->conv_kernel, .threads = threads, .x = tok[0], .conv_weight = conv_w,
            .delta = tok[1], .a = a, .bc = tok[2], .d = d, .window = window, .state = state, .y = y};
        return mc_cpu_mamba1_core(&ca, msg);
    }
    case MC_FAMILY_SHORTCONV: {
        const struct mc_cpu_shortconv_core_args ca = {
            .batch = B, .len = len, .hidden = s->cfg.sc.hidden_size, .conv_kernel = s->cfg.sc.conv_kernel,
            .threads = threads, .bcx = tok[0], .conv_weight = conv_w, .window = window, .y = y};
        return mc_cpu_shortconv_core(&ca, msg);
    }
    case MC_FAMILY_KDA: {
        const struct mc_kda_config *c = &s->cfg.kda;
        const struct mc_cpu_kda_core_args ca = {
            .batch = B, .len = len, .heads = c->num_heads, .head_dim = c->head_dim, .conv_kernel = c->conv_kernel,
            .chunk = s->chunk, .threads = threads, .qkv = tok[0], .conv_weight = conv_w, .conv_weight_kc = conv_kc, .f = tok[1], .a_neg = a,
            .b_raw = tok[2], .window = window, .state = state, .o = y};
        (void)d;
        return mc_cpu_kda_core(&ca, msg);
    }
    case MC_FAMILY_ATTENTION: /* not benchmarked: bench refuses the family (bench.c) */
    case MC_FAMILY_LIGHTNING: /* layer mode only: no cpu core entry (bench.c refuses --core) */
        break;
    }
    return MC_BACKEND_INVALID;
}

static double bw_silu(double v)
{
    return v / (1.0 + exp(-v));
}

/* The depthwise causal conv of one token: the window [K][C] shifts, row enters, out[c] = Σ_k
 * w[c][k]·window[k][c] (SiLU when silu). */
static void bw_plain_conv(int64_t C, int64_t K, const float *row, const float *conv_w, double *window, int silu,
                          double *out)
{
    memmove(window, window + C, (size_t)((K - 1) * C) * sizeof *window);
    for (int64_t c = 0; c < C; c++)
        window[(K - 1) * C + c] = row[c];
    for (int64_t c = 0; c < C; c++) {
        double acc = 0.0;
        for (int64_t k = 0; k < K; k++)
            acc += (double)conv_w[c * K + k] * window[k * C + c];
        out[c] = silu ? bw_silu(acc) : acc;
    }
}

/* One token of one delta-rule head on its state S [dk][dv]: row i of S <- S_i·decay[i] (GDN: one decay for every
 * row; KDA: one per key channel); m = Sᵀk̂ (row by row); δ = β(v - m), kept in m; S += k̂δᵀ; o = Sᵀq̂ with the
 * updated state. Sums run over i ascending; the column loops vectorise. */
static void bw_plain_delta_step(double *restrict S, int64_t dk, int64_t dv, const double *restrict decay, double beta,
                              const double *restrict kn, const double *restrict qn, const double *restrict v,
                              double *restrict m, double *restrict o)
{
    for (int64_t j = 0; j < dv; j++)
        m[j] = 0.0;
    for (int64_t i = 0; i < dk; i++) {
        double *restrict si = S + i * dv;
        const double di = decay[i];
        for (int64_t j = 0; j < dv; j++) {
            si[j] *= di;
            m[j] += si[j] * kn[i];
        }
    }
    for (int64_t j = 0; j < dv; j++) {
        m[j] = beta * (v[j] - m[j]);
        o[j] = 0.0;
    }
    for (int64_t i = 0; i < dk; i++) {
        double *restrict si = S + i * dv;
        for (int64_t j = 0; j < dv; j++) {
            si[j] += kn[i] * m[j];
            o[j] += si[j] * qn[i];
        }
    }
}

/* The l2-normed q̂ = q/sqrt(Σq² + 1e-6)·d^-1/2 and k̂ = k/sqrt(Σk² + 1e-6) of one head's q and k [d] (GDN, KDA). */
static void bw_plain_qk(const double *q, const double *k, int64_t d, double *qn, double *kn)
{
    double sq = 0.0, sk = 0.0;
    for (int64_t i = 0; i < d; i++) {
        sq += q[i] * q[i];
        sk += k[i] * k[i];
    }
    const double iq = 1.0 / sqrt(sq + 1e-6) / sqrt((double)d), ik = 1.0 / sqrt(sk + 1e-6);
    for (int64_t i = 0; i < d; i++) {
        qn[i] = q[i] * iq;
        kn[i] = k[i] * ik;
    }
}

/* Tokens whose conv outputs the plain recurrence holds at once: a head's (channel's) state then stays in
 * cache while the span's tokens pass through it, instead of the whole state being swept once a token. */
#define BW_PLAIN_SPAN 64

/*
 * The plain token-by-token recurrence of a family's core (docs/semantics.md §2.3, §3.3, §4.4, §5), f64,
 * over tok[i] = [B][len][tok_w[i]]; window [B][K][C], state, y [B][len][y_w] in f64. The conv runs over
 * BW_PLAIN_SPAN tokens into scratch, then each head (channel) advances its own state over those tokens
 * in order: every state element sees the same operations in the same order as a token-outer loop.
 * scratch holds BW_PLAIN_SPAN·(C + D) + 2·dk doubles (bw_plain_scratch).
 */
static void bw_plain_call(const struct mc_bench_shape *s, int64_t B, int64_t len, float *const tok[],
                          const float *conv_w, const float *a, const float *d, double *window, double *state,
                          double *y, double *scratch)
{
    int64_t C, K, st_el;
    bw_cache_dims(s, &C, &K, &st_el);
    double *u = scratch; /* [span][C]: the conv outputs of the span's tokens */
    for (int64_t b = 0; b < B; b++) {
        double *win = window + b * K * C, *S = state + b * st_el;
        for (int64_t t0 = 0; t0 < len; t0 += BW_PLAIN_SPAN) {
            const int64_t n = len - t0 < BW_PLAIN_SPAN ? len - t0 : BW_PLAIN_SPAN, row0 = b * len + t0;
            switch (s->family) {
            case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
                break;
            case MC_FAMILY_MAMBA2: {
                const struct mc_mamba2_config *c = &s->cfg.m2;
                const int64_t H = c->num_heads, P = c->head_dim, N = c->state_size, R = H / c->n_groups;
                const int64_t I = H * P, GN = c->n_groups * N;
                for (int64_t t = 0; t < n; t++)
                    bw_plain_conv(C, K, tok[0] + (row0 + t) * C, conv_w, win, 1, u + t * C);
                for (int64_t h = 0; h < H; h++) {
                    for (int64_t t = 0; t < n; t++) {
                        const double *ut = u + t * C;
                        const double dt = tok[1][(row0 + t) * H + h], dA = exp(dt * (double)a[h]);
                        const double *Bg = ut + I + (h / R) * N, *Cg = ut + I + GN + (h / R) * N;
                        double *yr = y + (row0 + t) * I;
                        for (int64_t p = 0; p < P; p++) {
                            double *sp = S + (h * P + p) * N, acc = 0.0;
                            const double dx = dt * ut[h * P + p];
                            for (int64_t q = 0; q < N; q++) {
                                sp[q] = dA * sp[q] + dx * Bg[q];
                                acc += sp[q] * Cg[q];
                            }
                            yr[h * P + p] = acc + (double)d[h] * ut[h * P + p];
                        }
                    }
                }
                break;
            }
            case MC_FAMILY_GDN: {
                const struct mc_gdn_config *c = &s->cfg.gdn;
                const int64_t Hk = c->num_key_heads, Hv = c->num_value_heads, dk = c->key_head_dim;
                const int64_t dv = c->value_head_dim, r = Hv / Hk, kd = Hk * dk;
                double *qn = u + BW_PLAIN_SPAN * C, *kn = qn + dk, *m = kn + dk, *decay = m + dv;
                for (int64_t t = 0; t < n; t++)
                    bw_plain_conv(C, K, tok[0] + (row0 + t) * C, conv_w, win, 1, u + t * C);
                for (int64_t h = 0; h < Hv; h++) {
                    const int64_t hk = h / r;
                    double *Sh = S + h * dk * dv;
                    for (int64_t t = 0; t < n; t++) {
                        const int64_t row = row0 + t;
                        const double *ut = u + t * C;
                        bw_plain_qk(ut + hk * dk, ut + kd + hk * dk, dk, qn, kn);
                        const double g = exp((double)tok[1][row * Hv + h]), beta = tok[2][row * Hv + h];
                        for (int64_t i = 0; i < dk; i++)
                            decay[i] = g;
                        const double *v = ut + 2 * kd + h * dv;
                        bw_plain_delta_step(Sh, dk, dv, decay, beta, kn, qn, v, m, y + row * Hv * dv + h * dv);
                    }
                }
                break;
            }
            case MC_FAMILY_MAMBA1: {
                const struct mc_mamba1_config *c = &s->cfg.m1;
                const int64_t I = c->intermediate_size, N = c->state_size;
                for (int64_t t = 0; t < n; t++)
                    bw_plain_conv(C, K, tok[0] + (row0 + t) * C, conv_w, win, 1, u + t * C);
                for (int64_t i = 0; i < I; i++) {
                    double *si = S + i * N;
                    for (int64_t t = 0; t < n; t++) {
                        const int64_t row = row0 + t;
                        const double dd = tok[1][row * I + i], ui = u[t * C + i];
                        const float *Bm = tok[2] + row * 2 * N, *Cm = Bm + N;
                        double acc = 0.0;
                        for (int64_t q = 0; q < N; q++) {
                            si[q] = exp(dd * (double)a[i * N + q]) * si[q] + dd * ui * (double)Bm[q];
                            acc += si[q] * (double)Cm[q];
                        }
                        y[row * I + i] = acc + (double)d[i] * ui;
                    }
                }
                break;
            }
            case MC_FAMILY_SHORTCONV: {
                const int64_t D = s->cfg.sc.hidden_size;
                float *bx = (float *)(u + C); /* D floats after the conv output */
                for (int64_t t = 0; t < n; t++) {
                    const float *bcx = tok[0] + (row0 + t) * 3 * D;
                    for (int64_t j = 0; j < D; j++)
                        bx[j] = bcx[j] * bcx[2 * D + j];
                    bw_plain_conv(C, K, bx, conv_w, win, 0, u);
                    for (int64_t j = 0; j < D; j++)
                        y[(row0 + t) * D + j] = (double)bcx[D + j] * u[j];
                }
                break;
            }
            case MC_FAMILY_KDA: {
                /* docs/semantics.md §14: q̂ = q/sqrt(Σq² + eps)·d^-1/2, k̂ = k/sqrt(Σk² + eps); channel c of head h
                 * decays by exp(a_neg[h]·softplus(f_c)); β = σ(b); then the delta rule of GDN */
                const struct mc_kda_config *c = &s->cfg.kda;
                const int64_t H = c->num_heads, dh = c->head_dim, I = H * dh;
                double *qn = u + BW_PLAIN_SPAN * C, *kn = qn + dh, *m = kn + dh, *decay = m + dh;
                for (int64_t t = 0; t < n; t++)
                    bw_plain_conv(C, K, tok[0] + (row0 + t) * C, conv_w, win, 1, u + t * C);
                for (int64_t h = 0; h < H; h++) {
                    double *Sh = S + h * dh * dh;
                    for (int64_t t = 0; t < n; t++) {
                        const int64_t row = row0 + t;
                        const double *ut = u + t * C;
                        bw_plain_qk(ut + h * dh, ut + I + h * dh, dh, qn, kn);
                        for (int64_t i = 0; i < dh; i++) {
                            const double fv = tok[1][row * I + h * dh + i];
                            const double sp = fv > 20.0 ? fv : log1p(exp(fv));
                            decay[i] = exp((double)a[h] * sp);
                        }
                        const double beta = 1.0 / (1.0 + exp(-(double)tok[2][row * H + h]));
                        bw_plain_delta_step(Sh, dh, dh, decay, beta, kn, qn, ut + 2 * I + h * dh, m, y + row * I + h * dh);
                    }
                }
                break;
            }
            case MC_FAMILY_ATTENTION: /* not benchmarked: bench refuses the family (bench.c) */
            case MC_FAMILY_LIGHTNING:
                break;
            }
        }
    }
}

static size_t bw_plain_scratch(const struct mc_bench_shape *s)
{
    int64_t C, K, st;
    bw_cache_dims(s, &C, &K, &st);
    const int64_t dk = s->family == MC_FAMILY_GDN ? s->cfg.gdn.key_head_dim
                     : s->family == MC_FAMILY_KDA ? s->cfg.kda.head_dim : 0;
    const int64_t dv = s->family == MC_FAMILY_GDN ? s->cfg.gdn.value_head_dim
                     : s->family == MC_FAMILY_KDA ? s->cfg.kda.head_dim : 0;
    return (size_t)(BW_PLAIN_SPAN * C + 2 * C + 3 * dk + dv + 1); /* q̂, k̂, the row decays; m */
}

int mc_bench_work_run(struct mc_bench_work *w, char *err, size_t err_len)
{
    struct mc_msg msg = {{0}};
    if (w->impl == MC_BENCH_IMPL_BACKEND) {
        const struct mc_forward_args args = {.batch = w->B, .len = w->L, .x = w->x, .mask = NULL, .y = w->y};
        if (w->ops->forward(w->model, w->cache, &args, &msg) != MC_BACKEND_OK)
            return bw_fail(err, err_len, "%s forward: %s", w->ops->name, msg.text);
        return 0;
    }
    if (w->impl == MC_BENCH_IMPL_CORE) {
        if (bw_core_call(&w->s, w->B, w->L, w->threads, w->tok, w->conv_w, w->conv_kc, w->a, w->d, w->window, w->state, w->out,
                         &msg) != MC_BACKEND_OK)
            return bw_fail(err, err_len, "cpu core: %s", msg.text);
        return 0;
    }
    double *scratch = malloc(bw_plain_scratch(&w->s) * sizeof *scratch);
    if (!scratch)
        return bw_fail(err, err_len, "out of memory for the plain recurrence");
    bw_plain_call(&w->s, w->B, w->L, w->tok, w->conv_w, w->a, w->d, w->pwindow, w->pstate, w->pout, scratch);
    free(scratch);
    return 0;
}

size_t mc_bench_work_footprint_bytes(const struct mc_bench_work *w)
{
    return w->footprint;
}

void mc_bench_packed_lengths(int64_t total, int64_t n, int64_t *lens)
{
    static const int64_t weight[8] = {1, 5, 2, 7, 3, 1, 6, 4};
    int64_t sum = 0, used = 0;
    for (int64_t i = 0; i < n; i++)
        sum += weight[i % 8];
    for (int64_t i = 0; i < n; i++) {
        lens[i] = i == n - 1 ? total - used : total * weight[i % 8] / sum;
        used += lens[i];
    }
}

int mc_bench_work_packed_init(struct mc_bench_work *w, int64_t n_seqs, char *err, size_t err_len)
{
    if (w->impl != MC_BENCH_IMPL_BACKEND || n_seqs < 1)
        return bw_fail(err, err_len, "the packed workload needs a layer workload and n_seqs >= 1");
    if (!(w->ops->caps & MC_CAP_PACKED) || !w->ops->forward_packed)
        return bw_fail(err, err_len, "%s does not implement forward_packed (MC_CAP_PACKED)", w->ops->name);
    w->n_packed = n_seqs;
    w->cu = calloc((size_t)n_seqs + 1, sizeof *w->cu);
    w->slots = calloc((size_t)n_seqs, sizeof *w->slots);
    w->has_init = calloc((size_t)n_seqs, sizeof *w->has_init);
    int64_t *lens = calloc((size_t)n_seqs, sizeof *lens);
    if (!w->cu || !w->slots || !w->has_init || !lens) {
        free(lens);
        return bw_fail(err, err_len, "out of memory for the packed arguments");
    }
    mc_bench_packed_lengths(w->B * w->L, n_seqs, lens);
    for (int64_t i = 0; i < n_seqs; i++) {
        w->cu[i + 1] = w->cu[i] + lens[i];
        w->slots[i] = 2 * n_seqs - 1 - 2 * i;
        w->has_init[i] = (uint8_t)(i % 2);
    }
    free(lens);
    return 0;
}

int mc_bench_work_packed_reset(struct mc_bench_work *w, char *err, size_t err_len)
{
    if (w->pool)
        w->ops->cache_free(w->model, w->pool);
    w->pool = NULL;
    struct mc_msg msg = {{0}};
    if (w->ops->cache_alloc(w->model, 2 * w->n_packed, &w->pool, &msg) != MC_BACKEND_OK)
        return bw_fail(err, err_len, "%s cache_alloc (pool of %lld): %s", w->ops->name, (long long)(2 * w->n_packed),
                       msg.text);
    return 0;
}

int mc_bench_work_packed_run(struct mc_bench_work *w, char *err, size_t err_len)
{
    struct mc_msg msg = {{0}};
    const struct mc_packed_args args = {.n_seqs = w->n_packed, .cu_seqlens = w->cu, .slots = w->slots,
                                        .has_initial_state = w->has_init, .x = w->x, .y = w->y};
    if (w->ops->forward_packed(w->model, w->pool, &args, &msg) != MC_BACKEND_OK)
        return bw_fail(err, err_len, "%s forward_packed: %s", w->ops->name, msg.text);
    return 0;
}

void mc_bench_work_free(struct mc_bench_work *w)
{
    if (!w)
        return;
    if (w->pool)
        w->ops->cache_free(w->model, w->pool);
    free(w->cu);
    free(w->slots);
    free(w->has_init);
    if (w->cache)
        w->ops->cache_free(w->model, w->cache);
    if (w->model)
        w->ops->model_destroy(w->model);
    free(w->x);
    free(w->y);
    for (int i = 0; i < BW_MAX_TOK; i++)
        free(w->tok[i]);
    free(w->conv_w);
    free(w->conv_kc);
    free(w->a);
    free(w->d);
    free(w->window);
    free(w->state);
    free(w->out);
    free(w->pwindow);
    free(w->pstate);
    free(w->pout);
    free(w);
}

/* ---- core validation ----------------------------------------------------------------------------- */

/* Small shapes with several chunks, a partial one, B = 2 and, where the family has them, groups. */
static void bw_small_shape(enum mc_family family, struct mc_bench_shape *s)
{
    mc_bench_shape_default(family, s);
    switch (family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
        break;
    case MC_FAMILY_MAMBA2:
        s->cfg.m2.num_heads = 6;
        s->cfg.m2.head_dim = 8;
        s->cfg.m2.state_size = 16;
        s->cfg.m2.n_groups = 2;
        break;
    case MC_FAMILY_GDN:
        s->cfg.gdn.num_key_heads = 2;
        s->cfg.gdn.num_value_heads = 4;
        s->cfg.gdn.key_head_dim = 16;
        s->cfg.gdn.value_head_dim = 8;
        break;
    case MC_FAMILY_MAMBA1:
        s->cfg.m1.intermediate_size = 40;
        s->cfg.m1.state_size = 16;
        break;
    case MC_FAMILY_SHORTCONV:
        s->cfg.sc.hidden_size = 24;
        break;
    case MC_FAMILY_KDA:
        s->cfg.kda.num_heads = 3;
        s->cfg.kda.head_dim = 16;
        break;
    case MC_FAMILY_ATTENTION: /* not benchmarked: bench refuses the family (bench.c) */
    case MC_FAMILY_LIGHTNING: /* layer mode only: no cpu core entry (bench.c refuses --core) */
        break;
    }
}

/* Copies tokens [t0, t0+n) of [B][L][w] into [B][n][w]. */
static void bw_slice(const float *src, float *dst, int64_t B, int64_t L, int64_t t0, int64_t n, int64_t w)
{
    for (int64_t b = 0; b < B; b++)
        memcpy(dst + b * n * w, src + (b * L + t0) * w, (size_t)(n * w) * sizeof *dst);
}

static int bw_core_validate_one(enum mc_family family, int64_t chunk, int threads, char *msg, size_t msg_len);

int mc_bench_core_validate(enum mc_family family, int threads, char *msg, size_t msg_len)
{
    /* the chunked cores at Q 16 (a chunk boundary inside the first and the last call) */
    return bw_core_validate_one(family, 16, threads, msg, msg_len);
}

static int bw_core_validate_one(enum mc_family family, int64_t chunk, int threads, char *msg, size_t msg_len)
{
    struct mc_bench_shape s;
    bw_small_shape(family, &s);
    s.chunk = chunk;
    /* 21 = one chunk + 5, then one token (a decode step: the cores' recurrent form), then 31 */
    const int64_t B = 2, L = 53, n_parts = 3, t0s[3] = {0, 21, 22}, ns[3] = {21, 1, 31};
    struct mc_bench_work *core = NULL, *plain = NULL;
    float *seg[BW_MAX_TOK] = {0}, *yseg = NULL;
    int rc = -1;
    char err[256];
    if (mc_bench_work_init(&core, &s, MC_BENCH_IMPL_CORE, NULL, MC_DTYPE_F32, B, L, threads, 7, err, sizeof err) ||
        mc_bench_work_init(&plain, &s, MC_BENCH_IMPL_PLAIN, NULL, MC_DTYPE_F32, B, L, 1, 7, err, sizeof err)) {
        bw_fail(msg, msg_len, "%s", err);
        goto done;
    }
    /* the plain recurrence over the whole sequence; the core in three calls, each continuing from the window
     * and state the one before left */
    if (mc_bench_work_run(plain, err, sizeof err) != 0) {
        bw_fail(msg, msg_len, "%s", err);
        goto done;
    }
    for (int i = 0; i < core->n_tok; i++) {
        seg[i] = malloc((size_t)(B * L * core->tok_w[i]) * sizeof(float));
        if (!seg[i]) {
            bw_fail(msg, msg_len, "out of memory");
            goto done;
        }
    }
    yseg = malloc((size_t)(B * L * core->y_w) * sizeof(float));
    if (!yseg) {
        bw_fail(msg, msg_len, "out of memory");
        goto done;
    }
    for (int part = 0; part < n_parts; part++) {
        for (int i = 0; i < core->n_tok; i++)
            bw_slice(core->tok[i], seg[i], B, L, t0s[part], ns[part], core->tok_w[i]);
        struct mc_msg m = {{0}};
        if (bw_core_call(&s, B, ns[part], threads, seg, core->conv_w, core->conv_kc, core->a, core->d, core->window, core->state, yseg,
                         &m) != MC_BACKEND_OK) {
            bw_fail(msg, msg_len, "cpu core: %s", m.text);
            goto done;
        }
        for (int64_t b = 0; b < B; b++)
            memcpy(core->out + (b * L + t0s[part]) * core->y_w, yseg + b * ns[part] * core->y_w,
                   (size_t)(ns[part] * core->y_w) * sizeof(float));
    }
    /* compare y, then the state */
    struct {
        const char *name;
        const float *got;
        const double *want;
        size_t n;
    } t[2] = {{"y", core->out, plain->pout, (size_t)(B * L * core->y_w)},
              {"state", core->state, plain->pstate, (size_t)(B * core->state_elems)}};
    for (int k = 0; k < 2; k++) {
        double worst = 0.0;
        size_t wi = 0;
        for (size_t i = 0; i < t[k].n; i++) {
            const double e = fabs((double)t[k].got[i] - t[k].want[i]) / (1e-4 + 1e-3 * fabs(t[k].want[i]));
            if (!(e <= worst)) { /* a NaN is the worst */
                worst = e;
                wi = i;
                if (isnan(e))
                    break;
            }
        }
        if (!(worst <= 1.0)) {
            bw_fail(msg, msg_len,
                    "cpu core differs from the plain recurrence: %s[%zu] = %.9g, expected %.9g (headroom %.3g > 1, "
                    "tolerance 1e-4 + 1e-3*|expected|)",
                    t[k].name, wi, (double)t[k].got[wi], t[k].want[wi], worst);
            goto done;
        }
    }
    rc = 0;
done:
    for (int i = 0; i < BW_MAX_TOK; i++)
        free(seg[i]);
    free(yseg);
    mc_bench_work_free(core);
    mc_bench_work_free(plain);
    return rc;
}
