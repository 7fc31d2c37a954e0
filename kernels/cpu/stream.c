/*
 * stream.c — long forwards of the cpu backend in token blocks; see stream.h.
 */
#include "stream.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* ---- the block length -------------------------------------------------------------------------- */

static atomic_llong stream_override = -1; /* mc_cpu_stream_set_tokens: -1 = not set */
static pthread_once_t stream_env_once = PTHREAD_ONCE_INIT;
static long long stream_env_tokens = -1; /* MC_CPU_STREAM_ENV: -1 = unset or not a number >= 0 */

static void stream_env_read(void)
{
    const char *env = getenv(MC_CPU_STREAM_ENV);
    if (!env || !*env)
        return;
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(env, &end, 10);
    if (errno == 0 && end && *end == '\0' && v >= 0)
        stream_env_tokens = v;
}

void mc_cpu_stream_set_tokens(int64_t tokens)
{
    atomic_store_explicit(&stream_override, tokens < 0 ? -1 : (long long)tokens, memory_order_relaxed);
}

int64_t mc_cpu_stream_tokens(int64_t chunk)
{
    long long t = atomic_load_explicit(&stream_override, memory_order_relaxed);
    if (t < 0) {
        pthread_once(&stream_env_once, stream_env_read);
        t = stream_env_tokens >= 0 ? stream_env_tokens : MC_CPU_STREAM_TOKENS;
    }
    /* a forward has B·L <= INT_MAX (mc_cpu_forward_check), so a block of INT_MAX tokens never splits */
    if (t == 0 || t >= INT_MAX || chunk >= INT_MAX)
        return INT64_MAX;
    if (chunk > 1)
        t = (t + chunk - 1) / chunk * chunk; /* < 2^32: no overflow */
    return t;
}

/* ---- the streamed forward ---------------------------------------------------------------------- */

/* Appends where a block failed to the family's message. */
static void stream_note_block(struct mc_msg *msg, int64_t t0, int64_t t1, int64_t len, int restored)
{
    if (!msg)
        return;
    char text[MC_MSG_LEN];
    memcpy(text, msg->text, sizeof text);
    text[sizeof text - 1] = '\0';
    snprintf(msg->text, sizeof msg->text, "%.400s (streamed forward: block of tokens [%lld, %lld) of %lld%s)", text,
             (long long)t0, (long long)t1, (long long)len, restored ? "; cache restored" : "");
}

enum mc_backend_status mc_cpu_forward_streamed(struct mc_model *model, struct mc_cache *cache,
                                               const struct mc_forward_args *args, struct mc_msg *msg,
                                               const struct mc_cpu_stream_spec *spec)
{
    if (!spec || !spec->forward || !spec->cache_shape)
        return mc_cpu_fail(msg, MC_BACKEND_INTERNAL, "cpu stream: incomplete family description");
    const int64_t T = spec->block;
    if (!model || !args || T < 1 || args->len <= T)
        return spec->forward(model, cache, args, msg);

    enum mc_backend_status st = mc_cpu_forward_check(model, cache, args, spec->who, msg);
    if (st != MC_BACKEND_OK)
        return st;

    const struct mc_cpu_cache_shape *shape = spec->cache_shape;
    const int64_t B = args->batch, L = args->len;
    const size_t row = (size_t)spec->hidden * spec->elem_bytes; /* bytes of one token of x or y */
    const size_t win_elems = (size_t)B * mc_cpu_cache_window_elems(shape);
    const size_t state_elems = (size_t)B * shape->state_elems;
    struct mc_cache *tmp = NULL, *work = cache;
    float *snap_window = NULL, *snap_state = NULL;
    int snap_primed = 0;
    unsigned char *xb = NULL, *yb = NULL;
    uint8_t *mb = NULL;

    /* everything allocated before the cache is touched */
    if (B > 1) {
        xb = malloc((size_t)(B * T) * row);
        yb = malloc((size_t)(B * T) * row);
        if (args->mask)
            mb = malloc((size_t)(B * T));
    }
    if (cache) {
        snap_window = malloc(win_elems * sizeof(float)); /* C, K >= 1 */
        if (state_elems)
            snap_state = malloc(state_elems * sizeof(float));
    }
    if ((B > 1 && (!xb || !yb || (args->mask && !mb))) || (cache && (!snap_window || (state_elems && !snap_state)))) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM,
                         "%s forward: out of memory for the streamed forward (B=%lld L=%lld, blocks of %lld tokens)",
                         spec->who, (long long)B, (long long)L, (long long)T);
        goto cleanup;
    }
    if (!cache) {
        if ((st = mc_cpu_cache_alloc(shape, spec->who, B, &tmp, msg)) != MC_BACKEND_OK)
            goto cleanup;
        work = tmp;
    } else {
        memcpy(snap_window, cache->window, win_elems * sizeof(float));
        if (state_elems)
            memcpy(snap_state, cache->state, state_elems * sizeof(float));
        snap_primed = cache->primed;
    }

    const unsigned char *x = args->x;
    unsigned char *y = args->y;
    for (int64_t t0 = 0; t0 < L; t0 += T) {
        const int64_t n = L - t0 < T ? L - t0 : T;
        struct mc_forward_args blk = {.batch = B, .len = n};
        if (B == 1) {
            blk.x = x + (size_t)t0 * row;
            blk.y = y + (size_t)t0 * row;
            blk.mask = args->mask ? args->mask + t0 : NULL;
        } else {
            for (int64_t b = 0; b < B; b++) {
                memcpy(xb + (size_t)(b * n) * row, x + (size_t)(b * L + t0) * row, (size_t)n * row);
                if (args->mask)
                    memcpy(mb + b * n, args->mask + b * L + t0, (size_t)n);
            }
            blk.x = xb;
            blk.y = yb;
            blk.mask = args->mask ? mb : NULL;
        }
        st = spec->forward(model, work, &blk, msg);
        if (st != MC_BACKEND_OK) {
            if (cache) {
                memcpy(cache->window, snap_window, win_elems * sizeof(float));
                if (state_elems)
                    memcpy(cache->state, snap_state, state_elems * sizeof(float));
                cache->primed = snap_primed;
            }
            stream_note_block(msg, t0, t0 + n, L, cache != NULL);
            goto cleanup;
        }
        if (B > 1)
            for (int64_t b = 0; b < B; b++)
                memcpy(y + (size_t)(b * L + t0) * row, yb + (size_t)(b * n) * row, (size_t)n * row);
    }

cleanup:
    mc_cpu_cache_free(tmp);
    free(snap_state);
    free(snap_window);
    free(mb);
    free(yb);
    free(xb);
    return st;
}

enum mc_backend_status mc_cpu_core_blocks(const void *args, int64_t batch, int64_t len, int64_t block,
                                          float *window, size_t window_row, int needs_window,
                                          mc_cpu_core_block_fn run, const char *who, struct mc_msg *msg)
{
    float *tmp = NULL;
    if (!window && needs_window) {
        tmp = window = calloc((size_t)batch * window_row, sizeof *window);
        if (!tmp)
            return mc_cpu_fail(msg, MC_BACKEND_NOMEM, "%s: out of memory for B=%lld L=%lld", who, (long long)batch,
                               (long long)len);
    }
    enum mc_backend_status st = MC_BACKEND_OK;
    for (int64_t b = 0; b < batch && st == MC_BACKEND_OK; b++)
        for (int64_t t0 = 0; t0 < len && st == MC_BACKEND_OK; t0 += block)
            st = run(args, b, t0, len - t0 < block ? len - t0 : block, window ? window + (size_t)b * window_row : NULL,
                     msg);
    free(tmp);
    return st;
}

/* ---- the packed call in blocks ----------------------------------------------------------------- */

int64_t mc_cpu_packed_block_tokens(int64_t chunk)
{
    const int64_t t = mc_cpu_stream_tokens(chunk);
    return t >= INT_MAX / MC_CPU_PACKED_ROWS ? INT64_MAX : t * MC_CPU_PACKED_ROWS;
}

enum mc_backend_status mc_cpu_packed_streamed(struct mc_model *model, struct mc_cache *pool,
                                              const struct mc_packed_args *args, struct mc_msg *msg,
                                              mc_cpu_packed_fn fn, const struct mc_cpu_cache_shape *shape,
                                              int64_t hidden, size_t elem_bytes, int64_t block, const char *who)
{
    int64_t T = 0;
    enum mc_backend_status st = mc_cpu_packed_check(model, pool, args, who, &T, msg);
    if (st != MC_BACKEND_OK)
        return st;
    if (T <= block || block < 1)
        return fn(model, pool, args, msg);

    const int64_t n = args->n_seqs;
    const size_t win = mc_cpu_cache_window_elems(shape), se = shape->state_elems, row = (size_t)hidden * elem_bytes;
    int64_t *cu = malloc((size_t)(n + 1) * sizeof *cu), *slots = malloc((size_t)n * sizeof *slots);
    uint8_t *init = malloc((size_t)n);
    float *snap = malloc((size_t)n * (win + se) * sizeof *snap);
    const int primed = pool->primed;
    if (!cu || !slots || !init || !snap) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "%s forward_packed: out of memory for the streamed call (T=%lld)", who,
                         (long long)T);
        goto cleanup;
    }
    for (int64_t i = 0; i < n; i++) {
        const size_t s = (size_t)args->slots[i];
        memcpy(snap + (size_t)i * (win + se), pool->window + s * win, win * sizeof *snap);
        if (se)
            memcpy(snap + (size_t)i * (win + se) + win, pool->state + s * se, se * sizeof *snap);
    }
    int64_t first = 0; /* the first sequence that may overlap the block */
    for (int64_t t0 = 0; t0 < T; t0 += block) {
        const int64_t t1 = T - t0 < block ? T : t0 + block;
        while (first < n && args->cu_seqlens[first + 1] <= t0)
            first++;
        int64_t k = 0;
        cu[0] = 0;
        for (int64_t i = first; i < n && args->cu_seqlens[i] < t1; i++) {
            const int64_t a = args->cu_seqlens[i] > t0 ? args->cu_seqlens[i] : t0;
            const int64_t b = args->cu_seqlens[i + 1] < t1 ? args->cu_seqlens[i + 1] : t1;
            if (b <= a)
                continue;
            slots[k] = args->slots[i];
            init[k] = args->cu_seqlens[i] < t0 ? 1 : args->has_initial_state[i];
            cu[k + 1] = cu[k] + (b - a);
            k++;
        }
        const struct mc_packed_args blk = {.n_seqs = k, .cu_seqlens = cu, .slots = slots, .has_initial_state = init,
                                           .x = (const unsigned char *)args->x + (size_t)t0 * row,
                                           .y = (unsigned char *)args->y + (size_t)t0 * row};
        st = fn(model, pool, &blk, msg);
        if (st != MC_BACKEND_OK) {
            for (int64_t i = 0; i < n; i++) {
                const size_t s = (size_t)args->slots[i];
                memcpy(pool->window + s * win, snap + (size_t)i * (win + se), win * sizeof *snap);
                if (se)
                    memcpy(pool->state + s * se, snap + (size_t)i * (win + se) + win, se * sizeof *snap);
            }
            pool->primed = primed;
            stream_note_block(msg, t0, t1, T, 1);
            goto cleanup;
        }
    }

cleanup:
    free(snap);
    free(init);
    free(slots);
    free(cu);
    return st;
}

enum mc_backend_status mc_cpu_forward_recorded(struct mc_model *model, struct mc_cpu_probes *probes,
                                               struct mc_cache *cache, const struct mc_forward_args *args,
                                               struct mc_msg *msg, const struct mc_cpu_stream_spec *spec)
{
    mc_cpu_probes_reset(probes);
    struct mc_cpu_stream_spec whole = *spec;
    if (mc_cpu_probes_on(probes))
        whole.block = INT64_MAX;
    enum mc_backend_status st = mc_cpu_forward_streamed(model, cache, args, msg, &whole);
    if (st != MC_BACKEND_OK)
        mc_cpu_probes_reset(probes);
    return st;
}
