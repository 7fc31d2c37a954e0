/*
 * family.h — what the harness knows about each mixer family independently of any implementation:
 * its configuration attributes (HF names, as goldens store them), the parameters a configuration
 * implies (HF names and shapes), and the shapes of its cache. Owned here, used by the golden reader
 * (validation), the scenario engine (buffer sizes) and reports (index names).
 */
#ifndef MC_FAMILY_H
#define MC_FAMILY_H

#include <stddef.h>

#include "base/error.h"
#include "mixcheck/backend.h"

#define MC_FAMILY_MAX_WEIGHTS 16
#define MC_FAMILY_COUNT 8 /* families 1..MC_FAMILY_COUNT (enum mc_family; MC_FAMILY_STACK is no mixer family) */

struct mc_family_config {
    enum mc_family family;
    union {
        struct mc_mamba2_config mamba2;
        struct mc_mamba1_config mamba1;
        struct mc_gdn_config gdn;
        struct mc_shortconv_config shortconv;
        struct mc_attention_config attention;
        struct mc_lightning_config lightning;
        struct mc_kda_config kda;
    } u;
};

enum mc_field_kind {
    MC_FIELD_INT,         /* int64_t */
    MC_FIELD_BOOL,        /* int32_t 0/1 */
    MC_FIELD_DOUBLE,      /* double */
    MC_FIELD_DOUBLE_PAIR, /* double[2] */
    MC_FIELD_GDN_LAYOUT,  /* int32_t enum mc_gdn_layout, stored as the string "qwen3_5" / "qwen3_next" */
    MC_FIELD_QK_NORM,     /* int32_t enum mc_qk_norm, stored as the string "none" / "rms" / "zero_centred" */
};

/* One configuration attribute: its HF name and where it lives inside the family's config struct. An
 * optional attribute (an option appended to a family after its first goldens) reads as 0 when a golden
 * does not store it, 0 being the behaviour before the option. */
struct mc_config_field {
    const char *name;
    enum mc_field_kind kind;
    size_t offset;
    int optional;
};

/* One parameter tensor a configuration implies: HF name and shape. */
struct mc_weight_spec {
    const char *name;
    int ndim;
    int64_t dims[MC_MAX_DIMS];
};

/* Cache shape of one batch row, and the hidden size. */
struct mc_family_shape {
    int64_t hidden;        /* D */
    int64_t conv_channels; /* C */
    int64_t conv_kernel;   /* K */
    int state_ndim;        /* dims of the recurrent state after the batch dim; 0 = none */
    int64_t state_dims[3];
    const char *state_dim_names[3];
    int64_t chunk_size;    /* the configuration's chunk length, 0 when the family has none */
};

const char *mc_family_name(enum mc_family family);
/* Parses "mamba2", "mamba1", "gdn", "shortconv", "attention", "lightning", "kda"; returns 0 on success, -1 when
 * unknown. */
int mc_family_from_name(const char *name, enum mc_family *family);

/* The known family names joined as "mamba2, mamba1, gdn, shortconv, attention, lightning or kda" (for messages). */
const char *mc_family_names_text(void);

/* The q/k norm names of MC_FIELD_QK_NORM: the enum value for a name (-1 when unknown), and back. */
int mc_qk_norm_from_name(const char *name);
const char *mc_qk_norm_name(int32_t qk_norm);

/* The attribute table of a family (every entry required but the optional ones). NULL for an unknown family. */
const struct mc_config_field *mc_family_config_fields(enum mc_family family, size_t *count);

/* Checks sizes are positive and divisibility rules hold; the message names the attribute. */
enum mc_err_code mc_family_config_validate(const struct mc_family_config *cfg, struct mc_error *err);

/* Fills out[] with the parameters the (validated) configuration implies; returns their count. */
int mc_family_weight_specs(const struct mc_family_config *cfg, struct mc_weight_spec out[MC_FAMILY_MAX_WEIGHTS]);

void mc_family_shape(const struct mc_family_config *cfg, struct mc_family_shape *shape);

/* Elements of one row of the recurrent state (product of state_dims; 0 when none). */
int64_t mc_family_state_elems(const struct mc_family_shape *shape);

#endif
