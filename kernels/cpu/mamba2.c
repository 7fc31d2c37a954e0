/*
 * mamba2.c — the optimized CPU Mamba2 mixer (backend "cpu", device "cpu"): HF `Mamba2Mixer` with
 * mixcheck's semantics of docs/semantics.md §A, the recurrent core as the chunked SSD of §2.4 (what
 * `mamba_chunk_scan_combined` computes) seeded from the cached state. Validated against the
 * sequential reference in tests/cpu/test_cpu_mamba2.c.
 *
 * Files: this one holds the model, the cache and the ops struct; mamba2_forward.c the forward and
 * the core alone (cpu.h: mc_cpu_mamba2_core); mamba2_internal.h what they share.
 *
 * Variants (in mamba2_forward.c):
 *   - m2c_chunk_core   chunked SSD of one (batch row, head) over its real tokens, chunk length Q:
 *                      per chunk (q <= Q tokens, the last one shorter — the same as neutral padding
 *                      with a = 0, x = B = C = 0, so the final state is exact, REC-INV):
 *                        E[l][s]  = Σ_{k=s+1..l} a_k     (stable masked segsum, s <= l)
 *                        G        = Cc·Bcᵀ                (sgemm)          [q][q]; computed once
 *                                   per (row, group, chunk) by m2c_gram_task and shared by the H/G heads
 *                                   of the group (per head when that buffer would pass 256 MiB)
 *                        Y        = (Cc·Sᵀ) ⊙ exp(Acum)   (sgemm, state→output)
 *                        Y       += (G ⊙ exp(E))·Xd       (sgemm, intra-chunk)
 *                        S        = exp(Acum[q-1])·S + Xdᵀ·(exp(E[q-1][·]) ⊙ Bc)   (sgemm, beta = decay:
 *                                   the inter-chunk recurrence as a loop over chunks)
 *                        y        = Y + D·x
 *                      Q = mc_model_desc.chunk_size, else the configuration's chunk_size.
 *   - m2c_step         the direct recurrent step for a row with one real token (decode).
 * Front and back end as the reference: in_proj sgemm over all B·L tokens; fused causal conv over the
 * cached window (common.h), SiLU; dt = clamp(softplus(dt_raw + dt_bias), time_step_limit) in every
 * path; head h reads group h / (H/G); D skip; gated RMSNorm (gate before norm, groups of
 * norm_group_size; the options: the gate after the norm, or no norm); out_proj sgemm.
 *
 * Masks: the real tokens of a row are gathered into a list and the chunked core runs over that list,
 * so any mask pattern (left, right, middle padding) is the unpadded row: a padding token never reaches
 * the window or the state, and its output row is out_proj.bias (zeros without use_bias).
 *
 * Threads: mc_cpu_parallel_for over batch rows (conv) and (batch, head) pairs (core); every task owns
 * its outputs and per-worker scratch, so outputs and caches are bitwise identical for any thread
 * count. Dtypes: weights, x and y stored as f32, bf16 or f16; everything else (compute, cache,
 * cache_export) is f32.
 *
 * Dimension letters: B batch, L tokens, D hidden, H heads, P head dim, N state, G groups, K conv width,
 * I = H*P (named `inner`: <cblas.h> defines I), C = I + 2*G*N conv channels, proj = 2*I + 2*G*N + H,
 * Q chunk length, q the length of one chunk.
 */
#include "cpu.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "cache.h"
#include "common.h"
#include "mamba2_internal.h"
#include "stream.h"

/* ---- model ------------------------------------------------------------------------------------- */

static enum mc_backend_status m2c_config_validate(const struct mc_mamba2_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = mc_cpu_check_dim(M2C_WHO, "hidden_size", c->hidden_size, M2C_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(M2C_WHO, "num_heads", c->num_heads, M2C_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(M2C_WHO, "head_dim", c->head_dim, M2C_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(M2C_WHO, "state_size", c->state_size, M2C_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(M2C_WHO, "n_groups", c->n_groups, M2C_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(M2C_WHO, "conv_kernel", c->conv_kernel, M2C_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(M2C_WHO, "norm_group_size", c->norm_group_size, M2C_MAX_DIM, msg)))
        return st;
    if (c->chunk_size < 0)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu config: 'chunk_size' must be >= 0 (got %lld)",
                           (long long)c->chunk_size);
    if (c->num_heads % c->n_groups != 0)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu config: 'num_heads' (%lld) must be a multiple of 'n_groups' (%lld)",
                           (long long)c->num_heads, (long long)c->n_groups);
    const int64_t inner = c->num_heads * c->head_dim;
    if (inner % c->norm_group_size != 0)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu config: 'num_heads*head_dim' (%lld) must be a multiple of 'norm_group_size' "
                           "(%lld)",
                           (long long)inner, (long long)c->norm_group_size);
    const int64_t proj = 2 * inner + 2 * c->n_groups * c->state_size + c->num_heads;
    if (proj > INT_MAX)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu config: in_proj rows %lld exceed the BLAS limit %d",
                           (long long)proj, INT_MAX);
    if (!(c->layer_norm_epsilon > 0.0) || !isfinite(c->layer_norm_epsilon))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu config: 'layer_norm_epsilon' must be finite and > 0 (got %g)",
                           c->layer_norm_epsilon);
    const double lo = c->time_step_limit[0], hi = c->time_step_limit[1];
    if (isnan(lo) || isnan(hi) || isinf(lo) || lo < 0.0 || hi < lo)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu config: 'time_step_limit' must satisfy 0 <= lo <= hi, lo finite (got [%g, %g])",
                           lo, hi);
    if ((c->use_bias != 0 && c->use_bias != 1) || (c->use_conv_bias != 0 && c->use_conv_bias != 1))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu config: 'use_bias' and 'use_conv_bias' must be 0 or 1 (got %d, %d)",
                           (int)c->use_bias, (int)c->use_conv_bias);
    if ((c->no_gated_norm != 0 && c->no_gated_norm != 1) || (c->norm_before_gate != 0 && c->norm_before_gate != 1) ||
        (c->no_gated_norm && c->norm_before_gate))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu config: 'no_gated_norm' and 'norm_before_gate' must be 0 or 1, not both 1 (got "
                           "%d, %d)",
                           (int)c->no_gated_norm, (int)c->norm_before_gate);
    if (c->conv_kernel > MC_CPU_CONV_MAX_K)
        return mc_cpu_fail(msg, MC_BACKEND_UNSUPPORTED, "mamba2 cpu: conv_kernel %lld is not supported (at most %d)",
                           (long long)c->conv_kernel, MC_CPU_CONV_MAX_K);
    return MC_BACKEND_OK;
}

static void m2c_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    mc_cpu_weights_free(model->w, M2C_COUNT);
    free(model->conv_kc);
    free(model->a_neg);
    mc_cpu_probes_free(model->probes);
    free(model);
}

static enum mc_backend_status m2c_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                               struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_model *m = NULL;

    if ((st = mc_cpu_model_desc_check(desc, model, MC_FAMILY_MAMBA2, "mamba2", M2C_WHO, msg)) != MC_BACKEND_OK)
        goto fail;
    if ((st = m2c_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;
    if (desc->chunk_size < 0) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: chunk_size must be >= 0 (got %lld)",
                         (long long)desc->chunk_size);
        goto fail;
    }
    if ((st = mc_cpu_threads_check(desc, M2C_WHO, msg)) != MC_BACKEND_OK)
        goto fail;

    m = calloc(1, sizeof *m);
    if (!m) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba2 cpu: out of memory for the model");
        goto fail;
    }
    m->dtype = desc->dtype;
    m->cfg = *(const struct mc_mamba2_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->H = m->cfg.num_heads;
    m->P = m->cfg.head_dim;
    m->N = m->cfg.state_size;
    m->G = m->cfg.n_groups;
    m->K = m->cfg.conv_kernel;
    m->inner = m->H * m->P;
    m->GN = m->G * m->N;
    m->C = m->inner + 2 * m->GN;
    m->proj = m->inner + m->C + m->H;
    m->R = m->H / m->G;
    m->gs = m->cfg.norm_group_size;
    m->chunk = desc->chunk_size > 0 ? desc->chunk_size : m->cfg.chunk_size > 0 ? m->cfg.chunk_size : M2C_DEFAULT_CHUNK;
    m->threads = mc_cpu_threads_resolve(desc->threads);
    m->cache_shape = mc_cpu_cache_shape_kc(m->C, m->K, (size_t)(m->H * m->P * m->N),
                                           "conv_state [B][C][K] and recurrent_state [B][H][P][N] (f32)");
    m->lo = (float)m->cfg.time_step_limit[0];
    m->hi = (float)m->cfg.time_step_limit[1];
    m->eps = (float)m->cfg.layer_norm_epsilon;

    const struct mc_cpu_weight_spec spec[M2C_COUNT] = {
        [M2C_IN_PROJ] = {"in_proj.weight", 1, 2, {m->proj, m->D, 0}},
        [M2C_IN_PROJ_BIAS] = {"in_proj.bias", m->cfg.use_bias, 1, {m->proj, 0, 0}},
        [M2C_CONV] = {"conv1d.weight", 1, 3, {m->C, 1, m->K}},
        [M2C_CONV_BIAS] = {"conv1d.bias", m->cfg.use_conv_bias, 1, {m->C, 0, 0}},
        [M2C_DT_BIAS] = {"dt_bias", 1, 1, {m->H, 0, 0}},
        [M2C_A_LOG] = {"A_log", 1, 1, {m->H, 0, 0}},
        [M2C_D] = {"D", 1, 1, {m->H, 0, 0}},
        [M2C_NORM] = {"norm.weight", !m->cfg.no_gated_norm, 1, {m->inner, 0, 0}},
        [M2C_OUT_PROJ] = {"out_proj.weight", 1, 2, {m->D, m->inner, 0}},
        [M2C_OUT_PROJ_BIAS] = {"out_proj.bias", m->cfg.use_bias, 1, {m->D, 0, 0}},
    };
    if ((st = mc_cpu_weights_load(desc, spec, M2C_COUNT, m->w, "mamba2 cpu", msg)) != MC_BACKEND_OK)
        goto fail;
    m->conv_kc = malloc((size_t)(m->K * m->C) * sizeof *m->conv_kc);
    m->a_neg = malloc((size_t)m->H * sizeof *m->a_neg);
    if (!m->conv_kc || !m->a_neg) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba2 cpu: out of memory for the model");
        goto fail;
    }
    mc_cpu_conv_weight_kc(m->C, m->K, m->w[M2C_CONV], m->conv_kc);
    for (int64_t h = 0; h < m->H; h++)
        m->a_neg[h] = -expf(m->w[M2C_A_LOG][h]);
    *model = m;
    return MC_BACKEND_OK;

fail:
    m2c_model_destroy(m);
    return st;
}
/* ---- cache ------------------------------------------------------------------------------------- */

MC_CPU_CACHE_OPS(m2c, M2C_WHO)

/* ---- forward ----------------------------------------------------------------------------------- */

/* The ops forward: mc_mamba2_cpu_forward (mamba2_forward.c) in blocks of whole SSD chunks (stream.h). */
MC_CPU_STREAM_FORWARD(m2c, mc_mamba2_cpu_forward, model->chunk, M2C_WHO)
/* The ops forward_packed: mc_mamba2_cpu_forward_packed over the packed axis in blocks (stream.h). */
MC_CPU_STREAM_PACKED(m2c, mc_mamba2_cpu_forward_packed, model->chunk, M2C_WHO)

MC_CPU_PROBE_OPS(m2c, M2C_WHO)

static const struct mc_backend_ops m2c_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "cpu",
    .device = "cpu",
    .family = MC_FAMILY_MAMBA2,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_BF16) | MC_DTYPE_BIT(MC_DTYPE_F16),
    .caps = MC_CAP_CHUNK_SIZE | MC_CAP_THREADS | MC_CAP_PACKED | MC_CAP_PROBES,
    .model_create = m2c_model_create,
    .model_destroy = m2c_model_destroy,
    .cache_alloc = m2c_cache_alloc,
    .cache_copy = m2c_cache_copy,
    .cache_free = m2c_cache_free,
    .cache_export = m2c_cache_export,
    .cache_import = m2c_cache_import,
    .forward = m2c_forward_streamed,
    .forward_packed = m2c_forward_packed_streamed,
    .probe_enable = m2c_probe_enable,
    .probe_read = m2c_probe_read,
};

const struct mc_backend_ops *mc_cpu_mamba2_ops(void)
{
    return &m2c_ops;
}
