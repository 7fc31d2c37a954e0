/*
 * stackport.h — a whole-stack backend (backend.h, MC_FAMILY_STACK: a port of an upstream
 * `...ForCausalLM`) reached through its stack entries, with the model golden's configuration and
 * weights (docs/models.md §7). The model checks (stackcheck.c) drive it as they drive the stack
 * engine: token ids in, logits, hidden states and mixer outputs out as float64, one cache for every
 * layer, each layer's cache exported as float64.
 *
 * What crosses the interface is checked here, not trusted: the output buffers are filled with NaN
 * before each call, so a backend that leaves part of them unwritten is seen as NaN by the comparisons.
 */
#ifndef MC_STACKPORT_H
#define MC_STACKPORT_H

#include <stdint.h>

#include "mixcheck/backend.h"
#include "golden/stackgolden.h"

struct mc_stack_port;

/* Creates the backend's model from the golden's config_json and its weights under their checkpoint
 * names, rounded to dtype. The backend's status is returned with its message; MC_BACKEND_NOMEM when
 * memory runs out here. */
enum mc_backend_status mc_stack_port_create(const struct mc_stack_golden *g, enum mc_dtype dtype,
                                            const struct mc_backend_ops *ops, int32_t threads,
                                            struct mc_stack_port **out, struct mc_msg *msg);
void mc_stack_port_destroy(struct mc_stack_port *p);

/* 1 when the backend writes hidden states and mixer outputs (MC_CAP_STACK_HIDDEN). */
int mc_stack_port_has_hidden(const struct mc_stack_port *p);

enum mc_backend_status mc_stack_port_cache_new(struct mc_stack_port *p, int64_t batch, struct mc_cache **c,
                                               struct mc_msg *msg);
/* dst <- src (the backend's cache_copy), both from mc_stack_port_cache_new with the same batch. */
enum mc_backend_status mc_stack_port_cache_copy(struct mc_stack_port *p, struct mc_cache *dst, const struct mc_cache *src,
                                                struct mc_msg *msg);
void mc_stack_port_cache_free(struct mc_stack_port *p, struct mc_cache *c);

/* What a forward gives besides the logits, each NULL when not wanted: hidden [n + 1][B][L][D],
 * mixer_in and mixer_out [n][B][L][D] (backend.h struct mc_stack_args); written only when the backend
 * has MC_CAP_STACK_HIDDEN, left alone otherwise. */
struct mc_stack_port_out {
    double *hidden, *mixer_in, *mixer_out;
};

/* One forward of ids [B][L] (mask [B][L] or NULL) from cache c (NULL: a prefill without cache).
 * logits receives [B][L][V]; out (may be NULL) what else is wanted. */
enum mc_backend_status mc_stack_port_forward(struct mc_stack_port *p, struct mc_cache *c, int64_t batch, int64_t len,
                                             const int64_t *ids, const uint8_t *mask, double *logits,
                                             const struct mc_stack_port_out *out, struct mc_msg *msg);

/* 1 when the backend implements the packed call (MC_CAP_STACK_PACKED). */
int mc_stack_port_has_packed(const struct mc_stack_port *p);

/* The packed call (backend.h struct mc_stack_packed_args) on the pool: ids [T]; logits receives [T][V],
 * hidden (NULL: not wanted) [n + 1][T][D] when the backend has MC_CAP_STACK_HIDDEN. */
enum mc_backend_status mc_stack_port_forward_packed(struct mc_stack_port *p, struct mc_cache *pool, int64_t n_seqs,
                                                    const int64_t *cu_seqlens, const int64_t *slots,
                                                    const uint8_t *has_initial_state, const int64_t *ids,
                                                    double *logits, double *hidden, struct mc_msg *msg);

/* Layer `layer`'s cache of the `batch` rows of c as float64: conv [B][C][K], state [B][...] (NULL when
 * the layer has none). */
enum mc_backend_status mc_stack_port_cache_export(struct mc_stack_port *p, const struct mc_cache *c, int64_t batch,
                                                  int64_t layer, double *conv, double *state, struct mc_msg *msg);

#endif
