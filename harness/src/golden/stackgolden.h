/*
 * stackgolden.h — reader of model-level goldens (golden/README.md "Model goldens", docs/models.md §2):
 * a whole stack's configuration (model_type and the upstream config.json), its weights under the
 * checkpoint names, token ids with a left-padding mask, and the float64 expected logits, residual
 * stream (hidden states), per-layer caches and greedy continuation of golden/stacks.py.
 *
 * As golden.h: every rank and shape is derived from the configuration before reading, NaN/Inf are
 * refused, token ids must be in [0, vocab), a link outside the layout is refused, and the root
 * `content_sha256` must equal the checksum of what was read. Problems are MC_ERR_INPUT naming the
 * file and the dataset or attribute.
 */
#ifndef MC_STACKGOLDEN_H
#define MC_STACKGOLDEN_H

#include <stdint.h>

#include "base/error.h"
#include "golden/golden.h"
#include "family/stackconfig.h"

struct mc_stack_weight {
    char *name; /* checkpoint name, e.g. "backbone.layers.0.mixer.in_proj.weight" */
    struct mc_array value;
};

struct mc_stack_layer_states {
    struct mc_array conv_state;      /* [T][B][C][K] */
    struct mc_array recurrent_state; /* [T][B][state dims...]; ndim 0 when the layer has none */
};

struct mc_stack_golden {
    char *path;
    char *name;                   /* root `name` */
    char *config_json;            /* /config config_json */
    struct mc_stack_config config;
    int64_t batch, len;           /* B, L */
    struct mc_stack_weight *weights;
    int n_weights;
    int64_t *input_ids;           /* [B][L] */
    uint8_t *mask;                /* [B][L] 0/1 */
    struct mc_array logits;       /* [B][L][V] */
    struct mc_array hidden;       /* [n_layers + 1][B][L][D] */
    struct mc_array mixer_outputs; /* [n_layers][B][L][D]: each layer's mixer output (localisation) */
    int64_t *state_positions;     /* [T] */
    int64_t n_positions;
    struct mc_stack_layer_states *layers; /* [n_layers] */
    int64_t greedy_steps;         /* G */
    int64_t *greedy_tokens;       /* [B][G] */
    struct mc_array greedy_logits; /* [B][G][V] */
    /* each compared tensor's magnitude over the golden, what an atol_scale is in units of
     * (case/tolerance.h): the prompt's and the greedy steps' logits, the residual stream at every level,
     * every layer's conv windows and states */
    double logits_max, hidden_max, conv_max, state_max;
    char content_sha256[MC_SHA256_HEX_LEN + 1];
};

/* 1 when the file at path is a golden whose root `kind` is "model" (0 for anything else, errors included). */
int mc_stack_golden_is_model(const char *path);

enum mc_err_code mc_stack_golden_load(const char *path, struct mc_stack_golden *g, struct mc_error *err);
void mc_stack_golden_free(struct mc_stack_golden *g);

/* The weight called `name`, or NULL. */
const struct mc_array *mc_stack_golden_weight(const struct mc_stack_golden *g, const char *name);

#endif
