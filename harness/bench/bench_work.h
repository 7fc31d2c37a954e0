/*
 * bench_work.h — what `mixcheck bench` times: the built-in shape of each family, its FLOP count, and
 * a prepared workload (random weights and inputs from a fixed seed, a model, a cache) that runs one
 * forward — or, with --core, the cpu recurrent core alone (cpu.h mc_cpu_<family>_core), or the
 * plain sequential f64 recurrence written here that the core is validated against.
 *
 * Dimension letters as in mixcheck/backend.h: B batch, L tokens, D hidden, H heads, P head dim,
 * N state, G groups, K conv width, I inner width, C conv channels.
 */
#ifndef MC_BENCH_WORK_H
#define MC_BENCH_WORK_H

#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

enum mc_bench_mode {
    MC_BENCH_LAYER = 0, /* the whole mixer through the backend's forward */
    MC_BENCH_CORE = 1,  /* conv + scan alone (cpu core entry points) */
};

/* What a workload runs. */
enum mc_bench_impl {
    MC_BENCH_IMPL_BACKEND = 0, /* layer mode: ops->forward */
    MC_BENCH_IMPL_CORE = 1,    /* core mode: mc_cpu_<family>_core */
    MC_BENCH_IMPL_PLAIN = 2,   /* core mode: the plain f64 recurrence of bench_work.c */
};

struct mc_bench_shape {
    enum mc_family family;
    int64_t chunk; /* mamba2 / gdn core chunk (0 = the backend's default) */
    union {
        struct mc_mamba2_config m2;
        struct mc_mamba1_config m1;
        struct mc_gdn_config gdn;
        struct mc_shortconv_config sc;
        struct mc_lightning_config la; /* layer mode only: no cpu core entry */
        struct mc_kda_config kda;
    } cfg;
};

/* The built-in shape of a family: mamba2 the mamba2-130m layer, gdn the Qwen3-Next linear layer,
 * mamba1 D 768 / I 1536 / N 16 / R 48, shortconv D 1024 / K 3, lightning MiniMax's heads (hd 128, block
 * 256) at D 2048 with 16 heads, kda the Kimi-Linear-48B linear layer (D 2304, 32 heads of 128, K 4). */
void mc_bench_shape_default(enum mc_family family, struct mc_bench_shape *s);

/* One line naming the shape, e.g. "D 768, H 24 x P 64, N 128, G 1, K 4, chunk 256". */
void mc_bench_shape_describe(const struct mc_bench_shape *s, enum mc_bench_mode mode, char *buf, size_t len);

/* FLOPs per token (2 per multiply-add) of the sequential (token-by-token) algorithm: the model's
 * work, the same number whatever algorithm a backend uses. The formulas are in bench_work.c. */
double mc_bench_flop_per_token(const struct mc_bench_shape *s, enum mc_bench_mode mode);

/* FLOPs per token the cpu backend's chunked algorithm executes (mamba2, gdn; else the sequential
 * count), for docs/performance.md's honesty note: chunked forms do more arithmetic than the recurrence. */
double mc_bench_flop_per_token_chunked(const struct mc_bench_shape *s, enum mc_bench_mode mode);

/* The formula of mc_bench_flop_per_token as text, for the table's footnote. */
const char *mc_bench_flop_formula(enum mc_family family, enum mc_bench_mode mode);

struct mc_bench_work;

/* Prepares a workload of `impl` (ops is the backend for MC_BENCH_IMPL_BACKEND, else ignored) at
 * [batch][len], dtype (layer mode; core mode is f32), `threads` worker threads, inputs and weights
 * from `seed`. 0, or -1 with a message in err. */
int mc_bench_work_init(struct mc_bench_work **w, const struct mc_bench_shape *s, enum mc_bench_impl impl,
                       const struct mc_backend_ops *ops, enum mc_dtype dtype, int64_t batch, int64_t len, int threads,
                       uint64_t seed, char *err, size_t err_len);

/* Untimed: a fresh cache (zero window and state) for the next run. 0 or -1 with a message. */
int mc_bench_work_reset(struct mc_bench_work *w, char *err, size_t err_len);

/* Timed: one prefill over the whole [batch][len]. 0 or -1 with a message. */
int mc_bench_work_run(struct mc_bench_work *w, char *err, size_t err_len);

/* Bytes of the inputs, weights, outputs and cache of the workload (in their storage dtypes). */
size_t mc_bench_work_footprint_bytes(const struct mc_bench_work *w);

void mc_bench_work_free(struct mc_bench_work *w);

/* The packed call (`mixcheck bench --packed`, backend.h: forward_packed) on a layer workload: the
 * same B·L tokens of x cut into n_seqs >= 1 sequences of mixed lengths (mc_bench_packed_lengths),
 * each on its own slot of a pool of 2·n_seqs rows (sparse, reversed order), every other sequence
 * continuing from its slot (has_initial_state = 1). The backend must set MC_CAP_PACKED. 0 or -1 with a
 * message. */
int mc_bench_work_packed_init(struct mc_bench_work *w, int64_t n_seqs, char *err, size_t err_len);

/* Untimed: a fresh pool for the next packed run. Timed: one forward_packed over all B·L tokens. */
int mc_bench_work_packed_reset(struct mc_bench_work *w, char *err, size_t err_len);
int mc_bench_work_packed_run(struct mc_bench_work *w, char *err, size_t err_len);

/* The sequence lengths of the packed workload: T tokens over n sequences in the fixed proportions
 * 1 : 5 : 2 : 7 : 3 : 1 : 6 : 4 (cycled), the remainder on the last; every length >= 0, sum T. */
void mc_bench_packed_lengths(int64_t total, int64_t n, int64_t *lens);

/* Validates the cpu core of a family against the plain f64 recurrence at a small shape (several
 * chunks, a partial last chunk, B = 2, G > 1 where the family has groups, continued from a primed
 * window and state). 0 when every element of y and of the final state is within
 * 1e-4 + 1e-3·|expected|; -1 with the worst element in msg otherwise. */
int mc_bench_core_validate(enum mc_family family, int threads, char *msg, size_t msg_len);

#endif
