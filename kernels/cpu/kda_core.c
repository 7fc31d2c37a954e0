/*
 * kda_core.c — the Kimi Delta Attention core alone (cpu.h: mc_cpu_kda_core, for `mixcheck bench --core`):
 * conv + SiLU over q | k | v, then the chunked per-channel gated delta rule of kda_chunk.c (the code the
 * forward runs) for every (batch row, head). No projections, no low-rank f / g projections, no output
 * norm or gate.
 *
 * A call longer than the stream block (stream.h) runs each row in blocks, as the GDN core does.
 * Threads: mc_cpu_parallel_for over batch rows (conv) and (row, head) tasks (core), each owning its
 * outputs: the bits do not depend on the thread count.
 *
 * Dimension letters: B batch, L tokens, H heads, d head dim, I = H·d, C = 3·I conv channels, K conv width.
 */
#include "cpu.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kda_chunk.h"
#include "stream.h"

#define KDAC_DEFAULT_CHUNK 64
#define KDAC_MAX_DIM 65536

struct kdac_run {
    const struct mc_cpu_kda_core_args *a;
    int64_t I, C, chunk;
    const float *qkv;     /* [B][L][C] post-conv */
    int64_t *rows;        /* [B][L]: row b's token rows b·L .. b·L + L - 1 */
    unsigned char *work;  /* [workers][work_bytes] */
    size_t work_bytes;
};

static void kdac_head_task(void *ctx, int64_t task, int worker)
{
    const struct kdac_run *f = ctx;
    const struct mc_cpu_kda_core_args *a = f->a;
    const int64_t H = a->heads, d = a->head_dim, I = f->I, L = a->len, b = task / H, h = task % H;
    const struct mc_kda_core_args ca = {
        .n = L, .d = d, .chunk = f->chunk, .rows = f->rows + b * L,
        .q = f->qkv + h * d, .k = f->qkv + I + h * d, .v = f->qkv + 2 * I + h * d, .ld = f->C,
        .q_scale = (float)(1.0 / sqrt((double)d)),
        .f = a->f + h * d, .ld_f = I,
        .a_neg = a->a_neg[h],
        .b_raw = a->b_raw + h, .ld_b = H,
        .state = a->state + (b * H + h) * d * d,
        .o = a->o + h * d, .ld_o = I,
    };
    if (L == 1)   /* a decode step: the recurrent form */
        mc_kda_recurrent_run(&ca, f->work + (size_t)worker * f->work_bytes);
    else
        mc_kda_chunk_run(&ca, f->work + (size_t)worker * f->work_bytes);
}

/* One block of a long core call (stream.h: mc_cpu_core_blocks): row b, tokens [t0, t0 + n). */
static enum mc_backend_status kdac_core_block(const void *args, int64_t b, int64_t t0, int64_t n, float *window,
                                              struct mc_msg *msg)
{
    const struct mc_cpu_kda_core_args *a = args;
    const int64_t H = a->heads, I = H * a->head_dim, row = b * a->len + t0;
    struct mc_cpu_kda_core_args blk = *a;
    blk.batch = 1;
    blk.len = n;
    blk.qkv = a->qkv + row * 3 * I;
    blk.f = a->f + row * I;
    blk.b_raw = a->b_raw + row * H;
    blk.o = a->o + row * I;
    blk.state = a->state + b * H * a->head_dim * a->head_dim;
    blk.window = window;
    return mc_cpu_kda_core(&blk, msg);
}

enum mc_backend_status mc_cpu_kda_core(const struct mc_cpu_kda_core_args *a, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    float *conv_kc = NULL, *window = NULL, *conv_out = NULL;
    if (!a || !a->qkv || !a->f || !a->a_neg || !a->b_raw || !a->state || !a->o)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "kda cpu core: needs qkv, f, a_neg, b_raw, state and o");
    if (a->batch < 1 || a->len < 1 || a->heads < 1 || a->head_dim < 1 || a->heads > KDAC_MAX_DIM ||
        a->head_dim > KDAC_MAX_DIM || a->conv_kernel < 1 || a->conv_kernel > MC_CPU_CONV_MAX_K || a->chunk < 0 ||
        a->batch > INT_MAX / a->len)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "kda cpu core: bad shape B=%lld L=%lld H=%lld d=%lld K=%lld chunk=%lld",
                           (long long)a->batch, (long long)a->len, (long long)a->heads, (long long)a->head_dim,
                           (long long)a->conv_kernel, (long long)a->chunk);
    const int64_t block = mc_cpu_stream_tokens(a->chunk > 0 ? a->chunk : KDAC_DEFAULT_CHUNK);
    if (a->len > block) /* rows in blocks, as the forward streams them: the conv output stays small */
        return mc_cpu_core_blocks(a, a->batch, a->len, block, a->window,
                                  (size_t)(a->conv_kernel * 3 * a->heads * a->head_dim), a->conv_weight != NULL,
                                  kdac_core_block, "kda cpu core", msg);
    struct kdac_run f = {.a = a};
    const int64_t B = a->batch, L = a->len, K = a->conv_kernel;
    f.I = a->heads * a->head_dim;
    f.C = 3 * f.I;
    f.chunk = a->chunk > 0 ? a->chunk : KDAC_DEFAULT_CHUNK;
    const int threads = mc_cpu_threads_resolve(a->threads);
    const int64_t tasks = B * a->heads, workers = tasks < threads ? tasks : threads;
    f.work_bytes = mc_kda_chunk_work_bytes(f.chunk, a->head_dim);
    if (f.work_bytes < mc_kda_recurrent_work_bytes(a->head_dim))
        f.work_bytes = mc_kda_recurrent_work_bytes(a->head_dim);
    f.work_bytes = (f.work_bytes + 63) & ~(size_t)63;
    f.work = malloc((size_t)workers * f.work_bytes);
    f.rows = malloc((size_t)(B * L) * sizeof *f.rows);
    if (a->conv_weight) {
        conv_kc = a->conv_weight_kc ? NULL : malloc((size_t)(K * f.C) * sizeof *conv_kc);
        conv_out = malloc((size_t)(B * L * f.C) * sizeof *conv_out);
        window = a->window ? a->window : calloc((size_t)(B * K * f.C), sizeof *window);
    }
    if (!f.work || !f.rows || (a->conv_weight && ((!conv_kc && !a->conv_weight_kc) || !conv_out || !window))) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "kda cpu core: out of memory for B=%lld L=%lld", (long long)B,
                         (long long)L);
        goto cleanup;
    }
    for (int64_t r = 0; r < B * L; r++)
        f.rows[r] = r;
    f.qkv = a->qkv;
    if (a->conv_weight) {
        if (!a->conv_weight_kc)
            mc_cpu_conv_weight_kc(f.C, K, a->conv_weight, conv_kc);
        mc_cpu_conv_batch(B, L, f.C, K, a->qkv, window, a->conv_weight_kc ? a->conv_weight_kc : conv_kc, conv_out,
                          threads);
        f.qkv = conv_out;
    }
    mc_cpu_parallel_for(tasks, kdac_head_task, &f, (int)workers);

cleanup:
    if (window != a->window)
        free(window);
    free(conv_out);
    free(conv_kc);
    free(f.rows);
    free(f.work);
    return st;
}
