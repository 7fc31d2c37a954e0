/*
 * stream.h — long forwards of the cpu backend in token blocks (every family's ops forward goes
 * through here).
 *
 * A family's forward holds whole-call intermediates (in_proj output, conv output, gates, norm input,
 * f32 copies of x and y in bf16/f16), so memory grows with B·L. mc_cpu_forward_streamed runs a forward
 * of L > T tokens as consecutive forwards over the blocks [t0, t0 + T) on the one carried cache: the
 * "multi-token forward on a primed cache" the harness checks against the goldens (backend.h), so the
 * result is the same computation with the state rounded to f32 at the block boundaries, exactly as
 * between two forwards of the caller's. Intermediates then scale with B·T instead of B·L, and the
 * projections stay GEMMs of B·T rows.
 *
 * What a streamed call keeps of the whole-call contract:
 *   - L <= T: the family forward is called as is (no copy, the same bits as without streaming).
 *   - x, y, mask [B][L][·]: for B == 1 a block is contiguous and passed in place; for B > 1 the block
 *     of every row is gathered into [B][T][·] and y scattered back. A NULL mask stays NULL.
 *   - cache == NULL: the blocks run on a temporary zeroed, unprimed cache, freed at the end.
 *   - failure: the caller's cache (window, state, primed) is snapshotted before the first block and
 *     restored when any block fails, so a failed call leaves it unchanged as a failed single forward
 *     does. The snapshot, the temporary cache and the gather buffers are allocated before anything is
 *     touched: running out of memory there is MC_BACKEND_NOMEM with the cache unchanged. y is
 *     unspecified after a failure.
 *   - argument errors are the family's own (mc_cpu_forward_check, before anything is allocated).
 *
 * The block length: mc_cpu_stream_tokens(chunk), MC_CPU_STREAM_TOKENS (256, see below) unless
 * overridden, rounded up to a multiple of the family's internal chunk length, so for a row without
 * padding every chunk boundary stays where the unstreamed forward puts it (tokens 0, Q, 2Q, ... of
 * the call); a padded row's chunks follow its real tokens, which a block boundary can shift (state
 * rounding only: the math has no chunks).
 */
#ifndef MC_KERNELS_CPU_STREAM_H
#define MC_KERNELS_CPU_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "probe.h"
#include "mixcheck/backend.h"

/*
 * Default block length in tokens: 256. Memory: a family's intermediates take about (proj + C + I + 2·D)
 * floats per token (plus 2·D in bf16/f16), 4–10× the bytes of the token's x and y, so a block holds a
 * few MiB of them at the bench shapes whatever L is. Measured with `mixcheck bench` (f32, B 1,
 * L 4096, run-phase peak RSS over inputs + weights + outputs + cache; the rest is the model's f32
 * weight copies): unstreamed 2.7–4.3×; T 1024: 1.5–1.9×; T 512: 1.29–1.53× (mamba2 1.53, mamba1
 * 1.51, over the 1.5× goal); T 256: 1.17–1.34×. Speed: the projections stay GEMMs of B·T rows and a
 * block holds whole SSD / delta-rule chunks (256 / 64 by default); process CPU time per forward at
 * T 256 and 512 was 0.89–1.0× the unstreamed forward's for every family (blocks stay in cache; wall
 * time on the shared 2-core machine was within its noise), 256 vs 512 within ±6%.
 */
#define MC_CPU_STREAM_TOKENS 256

/* The environment variable that overrides MC_CPU_STREAM_TOKENS for a process (tests, measurements):
 * a positive integer is the block length, 0 turns streaming off; anything else is ignored. Read once. */
#define MC_CPU_STREAM_ENV "MIXCHECK_CPU_STREAM_TOKENS"

/* A family forward with the ops signature (mixcheck/backend.h), run on one block. */
typedef enum mc_backend_status (*mc_cpu_forward_fn)(struct mc_model *model, struct mc_cache *cache,
                                                    const struct mc_forward_args *args, struct mc_msg *msg);

/* What the streamer needs to know of a family. */
struct mc_cpu_stream_spec {
    mc_cpu_forward_fn forward;                      /* the family's whole-call forward */
    int64_t hidden;                                 /* D: elements of one token of x and y */
    size_t elem_bytes;                              /* storage bytes of one element of x and y */
    const struct mc_cpu_cache_shape *cache_shape;   /* for the temporary cache and the snapshot */
    int64_t block;                                  /* T >= 1 tokens per block; see mc_cpu_stream_tokens */
    const char *who;                                /* message prefix, e.g. "mamba2 cpu" */
};

/* The ops forward over spec->forward, in blocks of spec->block tokens (see above). model and args
 * are only dereferenced after the family's own argument checks accepted them. */
enum mc_backend_status mc_cpu_forward_streamed(struct mc_model *model, struct mc_cache *cache,
                                               const struct mc_forward_args *args, struct mc_msg *msg,
                                               const struct mc_cpu_stream_spec *spec);

/* The ops forward of a family with stage probes (probe.h): mc_cpu_forward_streamed with the store
 * `probes` cleared first, and again when the forward fails; while the store records, the call runs
 * as one block (a recording forward is not streamed: its probes cover the whole call). */
enum mc_backend_status mc_cpu_forward_recorded(struct mc_model *model, struct mc_cpu_probes *probes,
                                               struct mc_cache *cache, const struct mc_forward_args *args,
                                               struct mc_msg *msg, const struct mc_cpu_stream_spec *spec);

/* The block length for a family whose internal chunk length is `chunk` (1 or less: none): the
 * process override (mc_cpu_stream_set_tokens, else MC_CPU_STREAM_ENV), else MC_CPU_STREAM_TOKENS,
 * rounded up to a multiple of chunk; INT64_MAX when streaming is off. */
int64_t mc_cpu_stream_tokens(int64_t chunk);

/* The recurrent cores of cpu.h over L > T tokens: each row on its own, in blocks of T tokens on its
 * carried window and state. `run` runs the family's whole core on row b's tokens [t0, t0 + n) with
 * `window` the row's window (NULL when the family core has none to carry). `window` is the caller's
 * [B][window_row] floats, or NULL: then a zeroed temporary one when `needs_window` (MC_BACKEND_NOMEM if
 * it cannot be had), else NULL. Stops at the first failing block and returns its status. */
typedef enum mc_backend_status (*mc_cpu_core_block_fn)(const void *args, int64_t b, int64_t t0, int64_t n,
                                                       float *window, struct mc_msg *msg);
enum mc_backend_status mc_cpu_core_blocks(const void *args, int64_t batch, int64_t len, int64_t block,
                                          float *window, size_t window_row, int needs_window,
                                          mc_cpu_core_block_fn run, const char *who, struct mc_msg *msg);

/* ---- the packed call in blocks (backend.h: forward_packed) ------------------------------------
 *
 * A family's forward_packed holds per-token intermediates over all T packed tokens. The streamed
 * packed call runs the packed axis in blocks of whole chunks: block j holds packed tokens [t0, t1) with
 * t0 a multiple of the block length, itself a multiple of the family's chunk length, so the chunk grid
 * of the packed axis (tokens 0, Q, 2Q, ...) is the same as unstreamed and a chunk never spans two
 * blocks. A block calls the family's packed call on the pieces of the sequences that overlap it, each
 * on its own slot; a piece that continues a sequence of an earlier block has has_initial_state = 1
 * (its slot holds the state and window where the earlier block left it, in f32 as the unstreamed
 * call keeps them, so a row without a chunk across blocks computes the same math). Failure: the slots of the call's non-empty sequences are
 * snapshotted before the first block and restored when a block fails (MC_BACKEND_NOMEM before anything
 * is touched when the snapshot cannot be had), so a failed call leaves the pool as it was. */

/* Block length of a packed call: MC_CPU_PACKED_ROWS rows' worth of the batched block
 * (mc_cpu_stream_tokens(chunk) per row), a multiple of chunk; INT64_MAX when streaming is off. */
#define MC_CPU_PACKED_ROWS 8
int64_t mc_cpu_packed_block_tokens(int64_t chunk);

typedef enum mc_backend_status (*mc_cpu_packed_fn)(struct mc_model *model, struct mc_cache *pool,
                                                   const struct mc_packed_args *args, struct mc_msg *msg);

/* The family's packed call `fn` over the packed axis in blocks of `block` tokens (above). Argument
 * errors are mc_cpu_packed_check's (cache.h) with `who`. */
enum mc_backend_status mc_cpu_packed_streamed(struct mc_model *model, struct mc_cache *pool,
                                              const struct mc_packed_args *args, struct mc_msg *msg,
                                              mc_cpu_packed_fn fn, const struct mc_cpu_cache_shape *shape,
                                              int64_t hidden, size_t elem_bytes, int64_t block, const char *who);

/* ---- the ops entries every family with stage probes writes alike ------------------------------ */

/* Defines a family's ops forward, static, as PREFIX_forward_streamed: `forward_fn` (its whole-call
 * mc_cpu_forward_fn) through mc_cpu_forward_recorded in blocks of mc_cpu_stream_tokens(chunk), with the
 * D, dtype, cache_shape and probes members of the family's model; a NULL model goes to `forward_fn`
 * itself, whose checks answer. `chunk` may read the model as `model` (e.g. model->chunk). */
#define MC_CPU_STREAM_FORWARD(prefix, forward_fn, chunk, who_str)                                                      \
    static enum mc_backend_status prefix##_forward_streamed(struct mc_model *model, struct mc_cache *cache,            \
                                                            const struct mc_forward_args *args, struct mc_msg *msg)    \
    {                                                                                                                  \
        if (!model)                                                                                                    \
            return forward_fn(model, cache, args, msg);                                                                \
        const struct mc_cpu_stream_spec spec = {                                                                       \
            .forward = forward_fn,                                                                                     \
            .hidden = model->D,                                                                                        \
            .elem_bytes = mc_cpu_dtype_bytes(model->dtype),                                                            \
            .cache_shape = &model->cache_shape,                                                                        \
            .block = mc_cpu_stream_tokens(chunk),                                                                      \
            .who = who_str,                                                                                            \
        };                                                                                                             \
        return mc_cpu_forward_recorded(model, model->probes, cache, args, msg, &spec);                                 \
    }

/* Defines a family's ops forward_packed, static, as PREFIX_forward_packed_streamed: its packed call
 * `packed_fn` (an mc_cpu_packed_fn) through mc_cpu_packed_streamed in blocks of
 * mc_cpu_packed_block_tokens(chunk), the probe store cleared first (the packed call records no
 * probes); a NULL model goes to `packed_fn` itself. `chunk` as for MC_CPU_STREAM_FORWARD. */
#define MC_CPU_STREAM_PACKED(prefix, packed_fn, chunk, who_str)                                                        \
    static enum mc_backend_status prefix##_forward_packed_streamed(struct mc_model *model, struct mc_cache *pool,      \
                                                                   const struct mc_packed_args *args,                  \
                                                                   struct mc_msg *msg)                                 \
    {                                                                                                                  \
        if (!model)                                                                                                    \
            return packed_fn(model, pool, args, msg);                                                                  \
        mc_cpu_probes_reset(model->probes);                                                                            \
        return mc_cpu_packed_streamed(model, pool, args, msg, packed_fn, &model->cache_shape, model->D,                \
                                      mc_cpu_dtype_bytes(model->dtype),                                                \
                                      mc_cpu_packed_block_tokens(chunk), who_str);                                     \
    }

/* Test hook: tokens > 0 sets the block length of every later forward in this process, 0 turns
 * streaming off, < 0 returns to the default (MC_CPU_STREAM_ENV, else MC_CPU_STREAM_TOKENS). Safe to
 * call while no forward runs; a forward reads it once at its start. */
void mc_cpu_stream_set_tokens(int64_t tokens);

#endif
