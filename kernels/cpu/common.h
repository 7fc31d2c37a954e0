/*
 * common.h — shared infrastructure of the optimized CPU backend ("cpu"): storage conversion, a
 * deterministic pthread parallel-for, the fused causal conv over a cached window, and small math and
 * BLAS helpers. Used by every kernels/cpu/<family>.c; nothing here calls into reference/ or the
 * harness (STYLE.md convention 1).
 *
 * Variants provided:
 *   - mc_cpu_to_f32 / mc_cpu_from_f32   whole-buffer f32 <-> {f32, bf16, f16} (round to nearest even)
 *   - mc_cpu_parallel_for              static tasks over a pool of pthreads, caller thread included
 *   - mc_cpu_conv_row, mc_cpu_conv_cols  depthwise causal conv1d, token-major, vectorized over channels
 *                                      (the whole row, or a channel range of it for one thread)
 *   - mc_cpu_softplus                  the torch definition (threshold 20), scalar on libm; the array
 *                                      exp / SiLU / sigmoid of the hot loops are vmath.h
 *   - mc_cpu_sgemm, mc_cpu_linear      thin wrappers over OpenBLAS cblas_sgemm
 *   - mc_cpu_model_desc_check, mc_cpu_forward_check, mc_cpu_check_dim   the argument checks every
 *                                      family opens with (one message format for all)
 *   - mc_cpu_out_bias                  the out_proj bias / padding-row epilogue of a forward
 * The cache every family shares (window + state + primed flag, export / import) is in cache.h.
 *
 * Threads: OpenBLAS keeps its own thread pool; openblas_set_num_threads() is process-global, so the
 * kernels never call it. CI runs with OPENBLAS_NUM_THREADS=1 and the bench sets it to 1 for backend
 * runs; the kernels' own parallelism is mc_cpu_parallel_for over independent tasks ((batch, head)
 * pairs, fixed GEMM tiles: mc_cpu_linear_tiled), each task owning its outputs, so results do not
 * depend on the thread count.
 *
 * Dimension letters: L tokens, C channels, K conv width, M/N/Kd GEMM sizes.
 */
#ifndef MC_KERNELS_CPU_COMMON_H
#define MC_KERNELS_CPU_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

/* Largest conv width the cpu backend accepts (real models use 2..4); model_create refuses wider. */
#define MC_CPU_CONV_MAX_K 64

/* Largest thread count honoured; more is clamped. */
#define MC_CPU_MAX_THREADS 256

/* ---- errors and weights ------------------------------------------------------------------------ */

/* Writes the printf-style message into msg->text (when msg is not NULL) and returns st. */
enum mc_backend_status mc_cpu_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* What one weight slot of a family should hold for a configuration. */
struct mc_cpu_weight_spec {
    const char *name; /* HF name, e.g. "in_proj.weight" */
    int present;      /* implied by the configuration */
    int ndim;
    int64_t dims[MC_MAX_DIMS];
};

/* Matches desc->weights (any order) against spec[0..n_slots) by name and shape and converts each
 * present one from desc->dtype (F32, BF16 or F16) into a malloc'd f32 copy in out[slot] (NULL for
 * absent slots). Unknown, duplicate, missing, mis-shaped or data-less weights are MC_BACKEND_INVALID
 * with a message naming the weight, prefixed by `who` (e.g. "mamba2 cpu"); out of memory is
 * MC_BACKEND_NOMEM. On failure every out[slot] is NULL again. */
enum mc_backend_status mc_cpu_weights_load(const struct mc_model_desc *desc, const struct mc_cpu_weight_spec *spec,
                                           int n_slots, float **out, const char *who, struct mc_msg *msg);

/* Frees out[0..n_slots) of mc_cpu_weights_load and sets them to NULL. */
void mc_cpu_weights_free(float **out, int n_slots);

/* The checks every family's model_create opens with, in this order: desc and model non-NULL (then
 * *model = NULL), desc->family == family, desc->dtype one of f32/bf16/f16 (f64: UNSUPPORTED, others:
 * INVALID), desc->config non-NULL. Messages start with `who` (e.g. "mamba2 cpu"); `family_name`
 * names the expected family ("mamba2"). */
enum mc_backend_status mc_cpu_model_desc_check(const struct mc_model_desc *desc, struct mc_model **model,
                                               enum mc_family family, const char *family_name, const char *who,
                                               struct mc_msg *msg);

/* 1 <= v <= max_dim, else INVALID "<who> config: '<name>' must be in [1, max_dim] (got v)". */
enum mc_backend_status mc_cpu_check_dim(const char *who, const char *name, int64_t v, int max_dim,
                                        struct mc_msg *msg);

/* desc->threads >= 0, else INVALID naming `who`. */
enum mc_backend_status mc_cpu_threads_check(const struct mc_model_desc *desc, const char *who, struct mc_msg *msg);

/* The checks every family's forward opens with, in this order: model and args non-NULL, batch and len
 * >= 1, B*L within int (BLAS), x and y present, cache (when not NULL) of the forward's batch. */
enum mc_backend_status mc_cpu_forward_check(const struct mc_model *model, const struct mc_cache *cache,
                                            const struct mc_forward_args *args, const char *who,
                                            struct mc_msg *msg);

/* ---- storage conversion ------------------------------------------------------------------------ */

/* Scalar conversions. bf16/f16 are IEEE bit patterns; f32 -> bf16/f16 rounds to nearest even, keeps
 * NaN a NaN (quiet) and overflows to ±inf; f16 subnormals are handled both ways. */
float mc_cpu_bf16_to_f32(uint16_t v);
uint16_t mc_cpu_f32_to_bf16(float v);
float mc_cpu_f16_to_f32(uint16_t v);
uint16_t mc_cpu_f32_to_f16(float v);

/* Bytes of one element of a storage dtype the cpu backend handles (f32, bf16, f16); 0 otherwise. */
size_t mc_cpu_dtype_bytes(enum mc_dtype dtype);

/* dst[i] = (float)src[i] for n elements of storage dtype `dtype` (F32, BF16 or F16; F32 is a copy).
 * Returns 0, or -1 for another dtype (dst untouched). */
int mc_cpu_to_f32(enum mc_dtype dtype, const void *src, float *dst, size_t n);

/* dst[i] = src[i] rounded to `dtype` (F32, BF16 or F16) for n elements. Returns 0, or -1 for another
 * dtype. */
int mc_cpu_from_f32(enum mc_dtype dtype, const float *src, void *dst, size_t n);

/* Rounds n floats in place through `dtype` and back (identity for F32): what storing in the model
 * dtype and reading back would give. */
void mc_cpu_round_f32(enum mc_dtype dtype, float *buf, size_t n);

/* ---- threads ------------------------------------------------------------------------------------ */

/* One task of a parallel-for: `task` in [0, n_tasks), `worker` in [0, n_workers) names the thread
 * running it (for per-worker scratch: worker w owns scratch slot w for the duration of the call). */
typedef void (*mc_cpu_task_fn)(void *ctx, int64_t task, int worker);

/* Worker threads to use: `requested` when > 0, else the environment variable MIXCHECK_THREADS when
 * it is a positive integer, else 1; clamped to [1, MC_CPU_MAX_THREADS]. */
int mc_cpu_threads_resolve(int32_t requested);

/* Runs fn(ctx, task, worker) once for every task in [0, n_tasks) on min(n_threads, n_tasks) threads,
 * the caller being worker 0, and returns when all are done. Tasks are handed out in order from a
 * shared counter; each task must write only outputs it owns (no cross-task reductions), which makes
 * results independent of the thread count and of the schedule. If a thread cannot be created the
 * remaining workers (at least the caller) run every task: never fails. Returns the number of
 * workers used (>= 1 when n_tasks > 0), so a caller can size per-worker scratch beforehand with
 * min(n_threads, n_tasks). */
int mc_cpu_parallel_for(int64_t n_tasks, mc_cpu_task_fn fn, void *ctx, int n_threads);

/* ---- fused causal conv ------------------------------------------------------------------------- */

/*
 * Depthwise causal conv1d over one batch row's L tokens, seeded from a cached window (docs/semantics.md
 * §0.4; PyTorch Conv1d(C, C, K, groups=C, padding=K-1), first L outputs, w[K-1] on the current token).
 * For each real token t, in order: the window shifts by one token, x[t] enters as the newest row, and
 *   out[t][c] = act( bias[c] + Σ_{k<K} weight_kc[k][c] · window[k][c] ),  act = SiLU (vmath.h) or identity,
 * summed in k order. A token with mask[t] == 0 never enters the window and its output row is 0.
 *
 * Layouts are token-major so the channel loop vectorizes:
 *   len         L >= 0
 *   channels    C >= 1
 *   kernel      K in [1, MC_CPU_CONV_MAX_K]
 *   x           [L][x_stride]    pre-conv input, channel c of token t at x[t*x_stride + c]
 *   mask        [L] or NULL      0 = padding
 *   window      [K][C]           in/out: the last K pre-conv inputs, oldest row first (the cache's
 *                                [C][K] transposed; see mc_cpu_window_to_ck / _from_ck)
 *   weight_kc   [K][C]           conv1d.weight [C][1][K] transposed (mc_cpu_conv_weight_kc)
 *   bias        [C] or NULL
 *   out         [L][out_stride]  must not overlap x or window
 */
void mc_cpu_conv_row(int64_t len, int64_t channels, int64_t kernel, const float *x, int64_t x_stride,
                     const uint8_t *mask, float *window, const float *weight_kc, const float *bias, int silu,
                     float *out, int64_t out_stride);

/* mc_cpu_conv_row on the channels [c0, c1) only (0 <= c0 < c1 <= channels): x, window, weight_kc,
 * bias and out keep the whole row's layout and strides, and only that range of out and window is
 * read or written, so disjoint ranges of one row can run on different threads, with the same bits
 * per channel as one whole-row call. */
#define MC_CPU_CONV_COLS 512 /* channels per task where a conv is split (a shape-only tiling) */
void mc_cpu_conv_cols(int64_t len, int64_t channels, int64_t c0, int64_t c1, int64_t kernel, const float *x,
                      int64_t x_stride, const uint8_t *mask, float *window, const float *weight_kc, const float *bias,
                      int silu, float *out, int64_t out_stride);

/* The cores' conv (cpu.h, `bench --core`): mc_cpu_conv_row with SiLU over each of `batch` rows of x [B][L][C]
 * (no mask, no bias), row b from its window [B][K][C] into out [B][L][C]; the rows on n_threads threads
 * (mc_cpu_parallel_for), each owning its window and output. */
void mc_cpu_conv_batch(int64_t batch, int64_t len, int64_t channels, int64_t kernel, const float *x, float *window,
                       const float *weight_kc, float *out, int n_threads);

/* weight_kc[k][c] = weight_ck[c][k] for conv1d.weight [C][1][K] already in f32. */
void mc_cpu_conv_weight_kc(int64_t channels, int64_t kernel, const float *weight_ck, float *weight_kc);

/* Cache window layout conversions: out_ck [C][K] (the exported CONV-INV layout) <- win_kc [K][C],
 * and back. */
void mc_cpu_window_to_ck(int64_t channels, int64_t kernel, const float *win_kc, float *out_ck);
void mc_cpu_window_from_ck(int64_t channels, int64_t kernel, const float *in_ck, float *win_kc);

/* The output bias of a forward over `rows` token rows y[rows][width]: y[t][j] += bias[j] on a real token,
 * y[t][j] = bias[j] on padding (mask[t] == 0; mask NULL: every token real); bias NULL counts as 0. */
void mc_cpu_out_bias(int64_t rows, int64_t width, const uint8_t *mask, const float *bias, float *y);

/* ---- math helpers ------------------------------------------------------------------------------ */

/* torch.nn.functional.softplus with beta 1, threshold 20: x > 20 ? x : log1p(exp(x)). */
static inline float mc_cpu_softplus(float v)
{
    return v > 20.0f ? v : log1pf(expf(v));
}

/* ---- BLAS ---------------------------------------------------------------------------------------- */

/* Row-major C[M][N] = alpha · op(A) · op(B) + beta · C with op = transpose when trans_* is nonzero
 * (cblas_sgemm). Sizes and leading dimensions must fit in int (checked by callers at model/forward
 * boundaries); M, N or Kd == 0 is a no-op apart from beta scaling done by BLAS. */
void mc_cpu_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t kd, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* A linear layer over M rows: y[M][out] = x[M][in] · W[out][in]ᵀ + bias[out] (bias may be NULL);
 * ldx / ldy are the row strides of x and y in elements. */
void mc_cpu_linear(int64_t m, int64_t out, int64_t in, const float *x, int64_t ldx, const float *w,
                   const float *bias, float *y, int64_t ldy);

/* mc_cpu_linear split into output tiles run by mc_cpu_parallel_for on n_threads threads, each tile
 * one single sgemm: the kernels' GEMMs scale with their own threads while OpenBLAS runs
 * single-threaded (see "Threads" above). Tiles are at most MC_CPU_LINEAR_TILE rows; the outputs are
 * cut into the fewest tiles of at most MC_CPU_LINEAR_TILE columns, an even count of multiples of 16
 * wide (out_proj 768 → 2 × 384 rather than 512 + 256, so two workers get equal shares). The tiling
 * depends on the shape only, never on n_threads, so neither do the bits. */
#define MC_CPU_LINEAR_TILE 512
void mc_cpu_linear_tiled(int64_t m, int64_t out, int64_t in, const float *x, int64_t ldx, const float *w,
                         const float *bias, float *y, int64_t ldy, int n_threads);

#endif
