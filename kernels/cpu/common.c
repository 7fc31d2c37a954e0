/*
 * common.c — shared infrastructure of the cpu backend (common.h): storage conversion, the
 * parallel-for, the fused causal conv and the BLAS wrappers.
 */
#include "common.h"

#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "vmath.h"

/* ---- storage conversion ------------------------------------------------------------------------ */

static uint32_t cpu_f32_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static float cpu_bits_f32(uint32_t u)
{
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

float mc_cpu_bf16_to_f32(uint16_t v)
{
    return cpu_bits_f32((uint32_t)v << 16);
}

uint16_t mc_cpu_f32_to_bf16(float v)
{
    const uint32_t u = cpu_f32_bits(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep the sign, force a quiet payload */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* round to nearest even on the 16 dropped bits; overflow carries into the exponent -> inf */
    const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(rounded >> 16);
}

float mc_cpu_f16_to_f32(uint16_t v)
{
    const uint32_t sign = (uint32_t)(v & 0x8000u) << 16;
    const uint32_t exp = (v >> 10) & 0x1fu;
    uint32_t mant = v & 0x3ffu;
    if (exp == 0x1fu) /* inf / NaN */
        return cpu_bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp != 0)
        return cpu_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0)
        return cpu_bits_f32(sign);
    /* subnormal: value = mant * 2^-24, exact in f32 */
    const float mag = (float)mant * 0x1p-24f;
    return cpu_bits_f32(sign | cpu_f32_bits(mag));
}

uint16_t mc_cpu_f32_to_f16(float v)
{
    const uint32_t u = cpu_f32_bits(v);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) /* >= 65520 rounds to inf (65504 is the largest finite) */
        return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u) { /* below 2^-14: f16 subnormal or zero */
        if (abs < 0x33000000u) /* < 2^-25: rounds to zero (2^-25 itself is a tie to even zero) */
            return sign;
        const uint32_t e = abs >> 23;             /* 102..112 */
        const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - e;           /* result = m >> shift, with 24-bit m at 2^(e-150) */
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    /* normal: rebias exponent, round 13 dropped bits to nearest even (a carry may reach inf) */
    const uint32_t rebased = abs - (112u << 23);
    const uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
    return (uint16_t)(sign | (rounded >> 13));
}

size_t mc_cpu_dtype_bytes(enum mc_dtype dtype)
{
    switch (dtype) {
    case MC_DTYPE_F32:
        return sizeof(float);
    case MC_DTYPE_BF16:
    case MC_DTYPE_F16:
        return sizeof(uint16_t);
    default:
        return 0;
    }
}

int mc_cpu_to_f32(enum mc_dtype dtype, const void *src, float *dst, size_t n)
{
    const uint16_t *h = src;
    switch (dtype) {
    case MC_DTYPE_F32:
        if (n)
            memcpy(dst, src, n * sizeof(float));
        return 0;
    case MC_DTYPE_BF16:
        for (size_t i = 0; i < n; i++)
            dst[i] = mc_cpu_bf16_to_f32(h[i]);
        return 0;
    case MC_DTYPE_F16:
        for (size_t i = 0; i < n; i++)
            dst[i] = mc_cpu_f16_to_f32(h[i]);
        return 0;
    default:
        return -1;
    }
}

int mc_cpu_from_f32(enum mc_dtype dtype, const float *src, void *dst, size_t n)
{
    uint16_t *h = dst;
    switch (dtype) {
    case MC_DTYPE_F32:
        if (n)
            memcpy(dst, src, n * sizeof(float));
        return 0;
    case MC_DTYPE_BF16:
        for (size_t i = 0; i < n; i++)
            h[i] = mc_cpu_f32_to_bf16(src[i]);
        return 0;
    case MC_DTYPE_F16:
        for (size_t i = 0; i < n; i++)
            h[i] = mc_cpu_f32_to_f16(src[i]);
        return 0;
    default:
        return -1;
    }
}

void mc_cpu_round_f32(enum mc_dtype dtype, float *buf, size_t n)
{
    if (dtype == MC_DTYPE_BF16) {
        for (size_t i = 0; i < n; i++)
            buf[i] = mc_cpu_bf16_to_f32(mc_cpu_f32_to_bf16(buf[i]));
    } else if (dtype == MC_DTYPE_F16) {
        for (size_t i = 0; i < n; i++)
            buf[i] = mc_cpu_f16_to_f32(mc_cpu_f32_to_f16(buf[i]));
    }
}

/* ---- threads ------------------------------------------------------------------------------------ */

int mc_cpu_threads_resolve(int32_t requested)
{
    long n = requested;
    if (n <= 0) {
        n = 1;
        const char *env = getenv("MIXCHECK_THREADS");
        if (env && *env) {
            char *end = NULL;
            errno = 0;
            const long v = strtol(env, &end, 10);
            if (errno == 0 && end && *end == '\0' && v > 0)
                n = v;
        }
    }
    return n > MC_CPU_MAX_THREADS ? MC_CPU_MAX_THREADS : (int)n;
}

struct cpu_pool {
    mc_cpu_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    atomic_llong next; /* the next task to hand out */
};

struct cpu_worker {
    struct cpu_pool *pool;
    int index;
};

static void cpu_pool_drain(struct cpu_pool *pool, int worker)
{
    for (;;) {
        const long long t = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
        if (t >= pool->n_tasks)
            return;
        pool->fn(pool->ctx, (int64_t)t, worker);
    }
}

static void *cpu_worker_main(void *arg)
{
    struct cpu_worker *w = arg;
    cpu_pool_drain(w->pool, w->index);
    return NULL;
}

int mc_cpu_parallel_for(int64_t n_tasks, mc_cpu_task_fn fn, void *ctx, int n_threads)
{
    if (n_tasks <= 0)
        return 0;
    int64_t want = n_threads < 1 ? 1 : n_threads;
    if (want > MC_CPU_MAX_THREADS)
        want = MC_CPU_MAX_THREADS;
    if (want > n_tasks)
        want = n_tasks;
    struct cpu_pool pool = {.fn = fn, .ctx = ctx, .n_tasks = n_tasks};
    atomic_init(&pool.next, 0);
    if (want == 1) {
        cpu_pool_drain(&pool, 0);
        return 1;
    }
    pthread_t tids[MC_CPU_MAX_THREADS];
    struct cpu_worker workers[MC_CPU_MAX_THREADS];
    int started = 0;
    for (int i = 1; i < (int)want; i++) {
        workers[i] = (struct cpu_worker){.pool = &pool, .index = i};
        if (pthread_create(&tids[i], NULL, cpu_worker_main, &workers[i]) != 0)
            break; /* the workers already started and the caller pick up the rest */
        started = i;
    }
    cpu_pool_drain(&pool, 0);
    for (int i = 1; i <= started; i++)
        pthread_join(tids[i], NULL);
    return (int)want;
}

/* ---- fused causal conv ------------------------------------------------------------------------- */

void mc_cpu_conv_cols(int64_t len, int64_t channels, int64_t c0, int64_t c1, int64_t kernel, const float *x,
                      int64_t x_stride, const uint8_t *mask, float *window, const float *weight_kc, const float *bias,
                      int silu, float *out, int64_t out_stride)
{
    const int64_t C = channels, K = kernel, n = c1 - c0;
    /* hist[k] points at channel c0 of the k-th oldest of the last K real inputs (rows of C channels) */
    const float *hist[MC_CPU_CONV_MAX_K];
    for (int64_t k = 0; k < K; k++)
        hist[k] = window + k * C + c0;
    for (int64_t t = 0; t < len; t++) {
        float *o = out + t * out_stride + c0;
        if (mask && !mask[t]) {
            memset(o, 0, (size_t)n * sizeof *o);
            continue;
        }
        for (int64_t k = 0; k + 1 < K; k++)
            hist[k] = hist[k + 1];
        hist[K - 1] = x + t * x_stride + c0;
        mc_cpu_vtaps(n, K, hist, weight_kc + c0, C, bias ? bias + c0 : NULL, o);
        if (silu)
            mc_cpu_vsilu(o, n);
    }
    /* New window: the rows hist[0..K-1] in order. A row still inside the window sits at an index
     * >= its destination, so copying in increasing order never reads an overwritten row. */
    for (int64_t k = 0; k < K; k++) {
        float *dst = window + k * C + c0;
        if (hist[k] != dst)
            memmove(dst, hist[k], (size_t)n * sizeof *dst);
    }
}

void mc_cpu_conv_row(int64_t len, int64_t channels, int64_t kernel, const float *x, int64_t x_stride,
                     const uint8_t *mask, float *window, const float *weight_kc, const float *bias, int silu,
                     float *out, int64_t out_stride)
{
    mc_cpu_conv_cols(len, channels, 0, channels, kernel, x, x_stride, mask, window, weight_kc, bias, silu, out,
                     out_stride);
}

struct conv_batch {
    int64_t len, channels, kernel;
    const float *x, *weight_kc;
    float *window, *out;
};

static void conv_batch_task(void *ctx, int64_t b, int worker)
{
    (void)worker;
    const struct conv_batch *c = ctx;
    const int64_t L = c->len, C = c->channels, K = c->kernel;
    mc_cpu_conv_row(L, C, K, c->x + b * L * C, C, NULL, c->window + b * K * C, c->weight_kc, NULL, 1,
                    c->out + b * L * C, C);
}

void mc_cpu_conv_batch(int64_t batch, int64_t len, int64_t channels, int64_t kernel, const float *x, float *window,
                       const float *weight_kc, float *out, int n_threads)
{
    struct conv_batch c = {.len = len, .channels = channels, .kernel = kernel, .x = x, .weight_kc = weight_kc,
                           .window = window, .out = out};
    mc_cpu_parallel_for(batch, conv_batch_task, &c, n_threads);
}

void mc_cpu_conv_weight_kc(int64_t channels, int64_t kernel, const float *weight_ck, float *weight_kc)
{
    for (int64_t c = 0; c < channels; c++)
        for (int64_t k = 0; k < kernel; k++)
            weight_kc[k * channels + c] = weight_ck[c * kernel + k];
}

void mc_cpu_window_to_ck(int64_t channels, int64_t kernel, const float *win_kc, float *out_ck)
{
    mc_cpu_conv_weight_kc(kernel, channels, win_kc, out_ck);
}

void mc_cpu_window_from_ck(int64_t channels, int64_t kernel, const float *in_ck, float *win_kc)
{
    mc_cpu_conv_weight_kc(channels, kernel, in_ck, win_kc);
}

void mc_cpu_out_bias(int64_t rows, int64_t width, const uint8_t *mask, const float *bias, float *y)
{
    for (int64_t t = 0; t < rows; t++) {
        const int real_token = !mask || mask[t];
        float *yr = y + t * width;
        for (int64_t j = 0; j < width; j++) {
            const float b = bias ? bias[j] : 0.0f;
            yr[j] = real_token ? yr[j] + b : b;
        }
    }
}

/* ---- BLAS ---------------------------------------------------------------------------------------- */

void mc_cpu_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t kd, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    if (m <= 0 || n <= 0)
        return;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (blasint)m,
                (blasint)n, (blasint)kd, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
}

void mc_cpu_linear(int64_t m, int64_t out, int64_t in, const float *x, int64_t ldx, const float *w,
                   const float *bias, float *y, int64_t ldy)
{
    mc_cpu_sgemm(0, 1, m, out, in, 1.0f, x, ldx, w, in, 0.0f, y, ldy);
    if (bias) {
        for (int64_t r = 0; r < m; r++) {
            float *restrict row = y + r * ldy;
            for (int64_t j = 0; j < out; j++)
                row[j] += bias[j];
        }
    }
}

struct mc_cpu_linear_job {
    int64_t m, out, in, ldx, ldy, col_tiles, tile_rows, tile_cols;
    const float *x, *w, *bias;
    float *y;
};

/* Tile width for `n` outputs: the fewest tiles of at most `max` (an even count, so two workers get
 * equal shares), each a multiple of 16 floats wide; depends on the shape only, never on the threads. */
static int64_t mc_cpu_tile_width(int64_t n, int64_t max)
{
    int64_t tiles = (n + max - 1) / max;
    if (tiles > 1 && tiles % 2)
        tiles++;
    const int64_t w = (n + tiles - 1) / tiles;
    return (w + 15) / 16 * 16;
}

static void mc_cpu_linear_tile_task(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const struct mc_cpu_linear_job *j = ctx;
    const int64_t r0 = task / j->col_tiles * j->tile_rows, c0 = task % j->col_tiles * j->tile_cols;
    const int64_t mr = j->m - r0 < j->tile_rows ? j->m - r0 : j->tile_rows;
    const int64_t nc = j->out - c0 < j->tile_cols ? j->out - c0 : j->tile_cols;
    mc_cpu_linear(mr, nc, j->in, j->x + r0 * j->ldx, j->ldx, j->w + c0 * j->in, j->bias ? j->bias + c0 : NULL,
                  j->y + r0 * j->ldy + c0, j->ldy);
}

void mc_cpu_linear_tiled(int64_t m, int64_t out, int64_t in, const float *x, int64_t ldx, const float *w,
                         const float *bias, float *y, int64_t ldy, int n_threads)
{
    if (m <= 0 || out <= 0)
        return;
    struct mc_cpu_linear_job j = {.m = m, .out = out, .in = in, .ldx = ldx, .ldy = ldy, .x = x, .w = w,
                                  .bias = bias, .y = y};
    j.tile_rows = MC_CPU_LINEAR_TILE;
    j.tile_cols = mc_cpu_tile_width(out, MC_CPU_LINEAR_TILE);
    j.col_tiles = (out + j.tile_cols - 1) / j.tile_cols;
    const int64_t row_tiles = (m + j.tile_rows - 1) / j.tile_rows;
    mc_cpu_parallel_for(row_tiles * j.col_tiles, mc_cpu_linear_tile_task, &j, n_threads);
}

/* ---- errors and weights ------------------------------------------------------------------------ */

enum mc_backend_status mc_cpu_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
{
    if (msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg->text, sizeof msg->text, fmt, ap);
        va_end(ap);
    }
    return st;
}

enum mc_backend_status mc_cpu_model_desc_check(const struct mc_model_desc *desc, struct mc_model **model,
                                               enum mc_family family, const char *family_name, const char *who,
                                               struct mc_msg *msg)
{
    if (!desc || !model)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: model_create needs a descriptor and an output handle", who);
    *model = NULL;
    if (desc->family != family)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: descriptor family is %d, expected %s (%d)", who,
                           (int)desc->family, family_name, (int)family);
    if (mc_cpu_dtype_bytes(desc->dtype) == 0) {
        const int known = desc->dtype == MC_DTYPE_F64;
        return mc_cpu_fail(msg, known ? MC_BACKEND_UNSUPPORTED : MC_BACKEND_INVALID,
                           "%s: dtype %d %s (supported: f32, bf16, f16)", who, (int)desc->dtype,
                           known ? "is not supported" : "is not a known dtype");
    }
    if (!desc->config)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: descriptor has no configuration", who);
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_cpu_check_dim(const char *who, const char *name, int64_t v, int max_dim,
                                        struct mc_msg *msg)
{
    if (v < 1 || v > max_dim)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s config: '%s' must be in [1, %d] (got %lld)", who, name, max_dim,
                           (long long)v);
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_cpu_threads_check(const struct mc_model_desc *desc, const char *who, struct mc_msg *msg)
{
    if (desc->threads < 0)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: threads must be >= 0 (got %d)", who, (int)desc->threads);
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_cpu_forward_check(const struct mc_model *model, const struct mc_cache *cache,
                                            const struct mc_forward_args *args, const char *who,
                                            struct mc_msg *msg)
{
    if (!model || !args)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: forward needs a model and arguments", who);
    if (args->batch < 1 || args->len < 1)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: forward needs batch >= 1 and len >= 1 (got B=%lld L=%lld)",
                           who, (long long)args->batch, (long long)args->len);
    if (args->batch > INT_MAX / args->len)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: B*L = %lld*%lld exceeds the BLAS limit %d", who,
                           (long long)args->batch, (long long)args->len, INT_MAX);
    if (!args->x || !args->y)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: forward needs x [B][L][D] and y [B][L][D]", who);
    if (cache && cache->batch != args->batch)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: cache batch %lld does not match forward batch %lld", who,
                           (long long)cache->batch, (long long)args->batch);
    return MC_BACKEND_OK;
}

void mc_cpu_weights_free(float **out, int n_slots)
{
    for (int s = 0; s < n_slots; s++) {
        free(out[s]);
        out[s] = NULL;
    }
}

static void cpu_format_shape(char *buf, size_t len, int ndim, const int64_t *dims)
{
    size_t used = 0;
    int n = snprintf(buf, len, "[");
    used = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < ndim && used < len; i++) {
        n = snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)dims[i]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

enum mc_backend_status mc_cpu_weights_load(const struct mc_model_desc *desc, const struct mc_cpu_weight_spec *spec,
                                           int n_slots, float **out, const char *who, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    char want[96], got[96];
    const struct mc_weight **found = calloc((size_t)(n_slots > 0 ? n_slots : 1), sizeof *found);
    for (int s = 0; s < n_slots; s++)
        out[s] = NULL;
    if (!found) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "%s: out of memory matching weights", who);
        goto fail;
    }
    if (desc->n_weights < 0 || (desc->n_weights > 0 && !desc->weights)) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: %d weights but no weight array", who, (int)desc->n_weights);
        goto fail;
    }
    for (int32_t i = 0; i < desc->n_weights; i++) {
        const struct mc_weight *w = &desc->weights[i];
        if (!w->name) {
            st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: weight %d has no name", who, (int)i);
            goto fail;
        }
        int slot = -1;
        for (int s = 0; s < n_slots; s++)
            if (strcmp(w->name, spec[s].name) == 0)
                slot = s;
        if (slot < 0) {
            st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: unknown weight '%s'", who, w->name);
            goto fail;
        }
        if (!spec[slot].present) {
            st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: weight '%s' given but the configuration does not use it",
                             who, w->name);
            goto fail;
        }
        if (found[slot]) {
            st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: weight '%s' given twice", who, w->name);
            goto fail;
        }
        cpu_format_shape(want, sizeof want, spec[slot].ndim, spec[slot].dims);
        int same = w->ndim == spec[slot].ndim;
        for (int d = 0; same && d < spec[slot].ndim; d++)
            same = w->dims[d] == spec[slot].dims[d];
        if (!same) {
            if (w->ndim < 0 || w->ndim > MC_MAX_DIMS)
                snprintf(got, sizeof got, "ndim %d", (int)w->ndim);
            else
                cpu_format_shape(got, sizeof got, w->ndim, w->dims);
            st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: weight '%s': expected shape %s, got %s", who, w->name, want,
                             got);
            goto fail;
        }
        if (!w->data) {
            st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: weight '%s' %s has no data", who, w->name, want);
            goto fail;
        }
        found[slot] = w;
    }
    for (int s = 0; s < n_slots; s++) {
        if (spec[s].present && !found[s]) {
            cpu_format_shape(want, sizeof want, spec[s].ndim, spec[s].dims);
            st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: missing weight '%s' (expected shape %s)", who, spec[s].name,
                             want);
            goto fail;
        }
    }
    for (int s = 0; s < n_slots; s++) {
        if (!found[s])
            continue;
        size_t n = 1;
        for (int d = 0; d < spec[s].ndim; d++)
            n *= (size_t)spec[s].dims[d];
        out[s] = malloc(n * sizeof(float));
        if (!out[s]) {
            st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "%s: out of memory copying weight '%s' (%zu floats)", who,
                             spec[s].name, n);
            goto fail;
        }
        if (mc_cpu_to_f32(desc->dtype, found[s]->data, out[s], n) != 0) {
            st = mc_cpu_fail(msg, MC_BACKEND_UNSUPPORTED, "%s: weight dtype %d is not supported", who,
                             (int)desc->dtype);
            goto fail;
        }
    }
    free(found);
    return MC_BACKEND_OK;

fail:
    mc_cpu_weights_free(out, n_slots);
    free(found);
    return st;
}
