/*
 * ref_common.h — what every reference mixer (mamba2.c, mamba1.c, gdn.c, shortconv.c) does the same
 * way behind the backend interface (mixcheck/backend.h): error messages, the descriptor and weight
 * table checks, owned weight copies, the cache (window + state + primed flag) and the argument
 * checks and window/state set-up of forward. A family file keeps its configuration checks, its
 * weight table and its math (its *_impl.inc body, instantiated for float and double).
 *
 * Upstream semantics: none of its own. The cache follows docs/semantics.md §1.3 and §11: one routine over
 * (window, state, segment); an unprimed cache starts from zeros; a forward or an import primes it.
 *
 * Every message starts "<family> reference: " (or "<family> config: " from mc_ref_check_dim), so a
 * family's messages read as if it had written them itself.
 */
#ifndef MC_REFERENCE_REF_COMMON_H
#define MC_REFERENCE_REF_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

/* The inner loops the reference compiles once per instruction set (AVX-512F, AVX2, the build's baseline),
 * picked at load time where the toolchain can (x86-64, glibc, target_clones): the same C, so the same
 * operations in the same order; no clone contracts a multiply-add into an FMA (ISO C, CMAKE_C_EXTENSIONS
 * OFF: -ffp-contract=off), so every clone gives the same bits and the definition does not depend on the
 * machine. Elsewhere the plain function. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define MC_REF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef MC_REF_CLONES
#define MC_REF_CLONES
#endif

/* Sizes above this are refused: no realistic layer comes near, and size products stay far from
 * overflow (the harness applies the same bound to every dimension). */
#define MC_REF_MAX_DIM 65536

/* Most owned weight buffers a model holds (Mamba1 with inner norms and KDA need the most). */
#define MC_REF_MAX_WEIGHTS 24

/* What one weight slot should hold for a configuration. */
struct mc_ref_weight_spec {
    int present; /* implied by the configuration */
    int ndim;
    int64_t dims[MC_MAX_DIMS];
    /* when !present: why it must not be given, the end of "weight 'x' ..."
     * (e.g. "given but the configuration has use_bias = 0") */
    const char *absent_why;
};

/* One family's math over a segment in the model dtype: window [B][C][K] and state (the family's
 * recurrent state; NULL for ShortConv) hold the left context on entry and advance over the real
 * tokens; a failure leaves them unchanged. */
typedef enum mc_backend_status (*mc_ref_forward_fn)(const struct mc_model *m, void *window, void *state,
                                                    const struct mc_forward_args *args, struct mc_msg *msg);

/* What the shared code needs to know of a family: one static instance per family file. */
struct mc_ref_family {
    const char *name;                /* "mamba2": messages start "mamba2 reference: " */
    enum mc_family family;           /* the descriptor family model_create accepts */
    int n_weights;                   /* slots in weight_names */
    const char *const *weight_names; /* [n_weights] upstream (HF) names by the family's slot enum */
    const char *unknown_note;        /* appended to "unknown weight 'x'" ("" for none) */
    const char *window_shape;        /* exported conv_state, for messages: "[B][C][K]" */
    const char *state_shape;         /* exported recurrent_state: "[B][H][P][N]"; NULL: none */
    mc_ref_forward_fn forward_f32;
    mc_ref_forward_fn forward_f64;
};

/* Most stage probes a forward records (Mamba2/Mamba1 and GDN have 6). */
#define MC_REF_MAX_PROBES 8

/* The stage probes of a model (ref_probe.c, backend.h struct mc_probe): the intermediates of its last
 * forward, in the model dtype, recorded while `on`. */
struct mc_ref_probes {
    int on;
    int suspended; /* the packed call records none */
    int count;
    int failed;    /* a backend status when the last forward could not record them */
    struct mc_probe probes[MC_REF_MAX_PROBES];
    void *buf[MC_REF_MAX_PROBES];
    size_t cap[MC_REF_MAX_PROBES];
};

/* The start of every family's struct mc_model: its first member, so that a struct mc_model *
 * converts to a struct mc_ref_model *. */
struct mc_ref_model {
    enum mc_dtype dtype; /* F32 or F64: storage and math */
    size_t elem_bytes;
    int64_t window_elems;        /* per batch row: [C][K] */
    int64_t state_elems;         /* per batch row; 0 = no recurrent state */
    int64_t hidden;              /* D: a token's elements in x and y (the packed call's token stride) */
    void *w[MC_REF_MAX_WEIGHTS]; /* owned copies in the model dtype by the family's enum; NULL when absent */
    struct mc_ref_probes *probes; /* NULL until the first probe_enable */
};

/* The cache of every family. Row b of a cache (a slot of a state pool) is window + b*window_elems and
 * state + b*state_elems elements (mc_ref_cache_row). */
struct mc_cache {
    int64_t batch;
    int primed;   /* a forward or an import has written it */
    void *window; /* [B][C][K] model dtype, the last K pre-conv inputs, oldest first */
    void *state;  /* [B][state_elems] model dtype; NULL without recurrent state */
};

/* Writes the printf-style message into msg (when msg is not NULL) and returns st. */
enum mc_backend_status mc_ref_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* INVALID with "<family> config: '<name>' must be in [1, MC_REF_MAX_DIM] (got v)" unless v is. */
enum mc_backend_status mc_ref_check_dim(const char *family, const char *name, int64_t v, struct mc_msg *msg);

/* Product of spec's dims. */
int64_t mc_ref_spec_elems(const struct mc_ref_weight_spec *spec);

/* model_create's checks before the configuration's: desc and model given (then *model = NULL), the
 * family, dtype f32 or f64 (f16/bf16 UNSUPPORTED, anything else INVALID), a configuration. */
enum mc_backend_status mc_ref_desc_check(const struct mc_ref_family *fam, const struct mc_model_desc *desc,
                                         struct mc_model **model, struct mc_msg *msg);

/* A zeroed model of model_bytes (the family's struct mc_model) with dtype and elem_bytes set; NULL
 * with *st = NOMEM and the message when out of memory, else *st = OK. */
struct mc_model *mc_ref_model_alloc(const struct mc_ref_family *fam, size_t model_bytes, enum mc_dtype dtype,
                                    enum mc_backend_status *st, struct mc_msg *msg);

/* Checks desc->weights against spec [fam->n_weights]: names known, implied by the configuration,
 * given once, of the expected shape, with data; every implied slot given. On success found[slot]
 * (zeroed by the caller) is the weight in each implied slot. missing_note is appended inside
 * "missing weight 'x' (expected shape [..]" ("" for none). */
enum mc_backend_status mc_ref_weights_match(const struct mc_ref_family *fam, const struct mc_model_desc *desc,
                                            const struct mc_ref_weight_spec *spec, const char *missing_note,
                                            const struct mc_weight **found, struct mc_msg *msg);

/* An owned copy of data (spec's element count in the model dtype) into *dst; name is for the
 * out-of-memory message. */
enum mc_backend_status mc_ref_weight_copy(const struct mc_ref_family *fam, const struct mc_model *model,
                                          const char *name, const struct mc_ref_weight_spec *spec, const void *data,
                                          void **dst, struct mc_msg *msg);

/* mc_ref_weight_copy of every found slot into the model's w[slot], in slot order. */
enum mc_backend_status mc_ref_weights_copy(const struct mc_ref_family *fam, struct mc_model *model,
                                           const struct mc_ref_weight_spec *spec, const struct mc_weight **found,
                                           struct mc_msg *msg);

/* ---- backend-interface entry points: the family's ops call these with their family ----------- */

void mc_ref_model_destroy(struct mc_model *model);
void mc_ref_cache_free(struct mc_model *model, struct mc_cache *cache);
enum mc_backend_status mc_ref_cache_alloc(const struct mc_ref_family *fam, struct mc_model *model, int64_t batch,
                                          struct mc_cache **cache, struct mc_msg *msg);
enum mc_backend_status mc_ref_cache_copy(const struct mc_ref_family *fam, struct mc_model *model, struct mc_cache *dst,
                                         const struct mc_cache *src, struct mc_msg *msg);
/* The export dtype (f64 for an f64 model, else f32) is the model dtype. A NULL output is skipped,
 * so a caller may fetch only the window or only the state; without recurrent state,
 * recurrent_state is never written. */
enum mc_backend_status mc_ref_cache_export(const struct mc_ref_family *fam, struct mc_model *model,
                                           const struct mc_cache *cache, void *conv_state, void *recurrent_state,
                                           struct mc_msg *msg);
/* Without recurrent state, recurrent_state is ignored (NULL accepted). Primes the cache. */
enum mc_backend_status mc_ref_cache_import(const struct mc_ref_family *fam, struct mc_model *model,
                                           struct mc_cache *cache, const void *conv_state, const void *recurrent_state,
                                           struct mc_msg *msg);
/* Checks the arguments, then runs fam->forward_f32/_f64 on the cache (zeroed first when not yet
 * primed, primed after a success) or, without a cache, on a zero window and state of its own. */
enum mc_backend_status mc_ref_forward(const struct mc_ref_family *fam, struct mc_model *model, struct mc_cache *cache,
                                      const struct mc_forward_args *args, struct mc_msg *msg);

/* Row `row` of a cache: its window [C][K] and state (NULL without recurrent state), in the model dtype. */
void mc_ref_cache_row(const struct mc_model *model, const struct mc_cache *cache, int64_t row, void **window,
                      void **state);

/* The packed call (backend.h struct mc_packed_args, docs/scenarios.md §1.2), by its definition: the
 * arguments checked first (INVALID with a message, nothing written), then each sequence of nonzero
 * length run alone as a batch of one through fam->forward_f32/_f64 on a copy of its slot's row (zeros
 * when has_initial_state is 0 or the pool was never primed), its outputs written to its token range
 * of y and the row copied back into its slot; no other slot is read or written. A pool that was never
 * primed is zeroed and marked primed by a call with tokens. A failure of the math after the checks
 * leaves the sequences before the failing one written. */
enum mc_backend_status mc_ref_forward_packed(const struct mc_ref_family *fam, struct mc_model *model,
                                             struct mc_cache *pool, const struct mc_packed_args *args,
                                             struct mc_msg *msg);

/* ---- stage probes (ref_probe.c) ----------------------------------------------------------------- */

/* probe_enable / probe_read of the ops (backend.h). */
enum mc_backend_status mc_ref_probe_enable(const struct mc_ref_family *fam, struct mc_model *model, int32_t on,
                                           struct mc_msg *msg);
enum mc_backend_status mc_ref_probe_read(const struct mc_ref_family *fam, struct mc_model *model,
                                         const struct mc_probe **probes, int32_t *count, struct mc_msg *msg);
void mc_ref_probes_free(struct mc_ref_probes *p);
/* Forgets the probes of the previous forward (mc_ref_forward calls it first). */
void mc_ref_probes_reset(const struct mc_model *model);
/* While suspended nothing is recorded (the packed call). */
void mc_ref_probes_suspend(const struct mc_model *model, int suspended);
/* A zeroed buffer of dims [ndim] elements in the model dtype, recorded as probe `name` (a string
 * literal) of this forward; NULL when recording is off (or out of memory: probe_read then says so). */
void *mc_ref_probe_add(const struct mc_model *model, const char *name, int ndim, const int64_t *dims);

/* The reference's matrix products (R_GEMM of ref_instantiate.inc): cblas_sgemm / cblas_dgemm, with the
 * same arguments, except that a product of one or two rows, C = alpha A B^T + beta C with A [M][K] and
 * B [N][K] row-major (a decode step, a forward between two neighbouring golden state positions), runs
 * as one matrix-vector product per row: the general product packs the whole of B on every call, which
 * made a one-token step of a 1024-wide layer three times slower. The sums are over the same terms (their
 * order inside the library may differ, at the last bit of a float64). */
/* (order, ta and tb are the CBLAS enumerators; plain ints here, so that this header need not include
 * <cblas.h>, whose <complex.h> defines I.) */
void mc_ref_gemm_f32(int order, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void mc_ref_gemm_f64(int order, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                     int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc);

#endif
