/*
 * test_golden.c — the golden reader (harness/src/golden/golden.c).
 *
 * A writer here builds a small valid Mamba2 golden with the HDF5 C API (mixed float32/float64,
 * chunked+shuffle+gzip datasets, fixed and variable-length strings) and stamps its content_sha256
 * (stamp(), from the values it wrote); the round trip checks every value and attribute exactly. Each malformed variant is that golden with one defect applied by a
 * mutator, and must be refused with MC_ERR_INPUT, a message naming the file and the dataset or
 * attribute, the golden struct left zeroed and no HDF5 object left open. Goldens checked in under
 * golden/<family>/ must all load.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "golden/golden.h"
#include "golden/stackgolden.h"

#define TB 2
#define TL 5
#define TT 3

/* The values the writer puts into the valid golden. */
struct model {
    struct mc_family_config cfg;
    struct mc_family_shape sh;
    struct mc_weight_spec specs[MC_FAMILY_MAX_WEIGHTS];
    int n_specs;
    double *weights[MC_FAMILY_MAX_WEIGHTS];
    double *hidden; /* [B][L][D] */
    uint8_t mask[TB * TL];
    double *output; /* [B][L][D] */
    int64_t positions[TT];
    double *conv; /* [T][B][C][K] */
    double *rec;  /* [T][B][H][P][N] */
};

struct bad_case;

struct fixture {
    const struct bad_case *bc;
    char dir[64];
    char path[128];
    struct model m;
};

static int64_t dims_elems(int ndim, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= dims[i];
    return n;
}

/* Exactly representable in float32 as well. */
static double small_value(int64_t i, int salt)
{
    return (double)((i * 37 + salt * 11) % 97 - 48) / 64.0;
}

static double *filled(int64_t n, int salt, int f32_exact)
{
    double *a = malloc((size_t)n * sizeof *a);
    assert_non_null(a);
    for (int64_t i = 0; i < n; i++)
        a[i] = f32_exact ? small_value(i, salt) : sin(0.1 * (double)i + salt) / 3.0;
    return a;
}

static void mamba2_config(struct mc_family_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->family = MC_FAMILY_MAMBA2;
    struct mc_mamba2_config *c = &cfg->u.mamba2;
    c->hidden_size = 8;
    c->num_heads = 2;
    c->head_dim = 4;
    c->state_size = 4;
    c->n_groups = 1;
    c->conv_kernel = 4;
    c->chunk_size = 4;
    c->norm_group_size = 8;
    c->layer_norm_epsilon = 1e-5;
    c->time_step_limit[0] = 0.0;
    c->time_step_limit[1] = INFINITY;
    c->use_bias = 1;
    c->use_conv_bias = 1;
}

/* The values of a golden for cfg (B = TB, L = TL, positions {0, 2, L}). */
static void model_init(struct model *m, const struct mc_family_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    struct mc_error err = {0};
    assert_int_equal(mc_family_config_validate(&m->cfg, &err), MC_ERR_NONE);
    mc_family_shape(&m->cfg, &m->sh);
    m->n_specs = mc_family_weight_specs(&m->cfg, m->specs);
    for (int i = 0; i < m->n_specs; i++)
        m->weights[i] = filled(dims_elems(m->specs[i].ndim, m->specs[i].dims), i, 1);
    int64_t D = m->sh.hidden;
    m->hidden = filled(TB * TL * D, 100, 1);
    for (int i = 0; i < TB * TL; i++)
        m->mask[i] = !(i >= TL + 3); /* row 1 right-padded by two */
    m->output = filled(TB * TL * D, 200, 0);
    m->positions[0] = 0;
    m->positions[1] = 2;
    m->positions[2] = TL;
    m->conv = filled(TT * TB * m->sh.conv_channels * m->sh.conv_kernel, 300, 0);
    if (m->sh.state_ndim > 0)
        m->rec = filled(TT * TB * mc_family_state_elems(&m->sh), 400, 0);
}

static void model_free(struct model *m)
{
    for (int i = 0; i < m->n_specs; i++)
        free(m->weights[i]);
    free(m->hidden);
    free(m->output);
    free(m->conv);
    free(m->rec);
}

/* ---- writer ------------------------------------------------------------------------------------ */

static void attr_write(hid_t file, const char *obj, const char *name, hid_t ftype, hid_t mtype, int n,
                       const void *data)
{
    hsize_t dim = (hsize_t)n;
    hid_t space = n == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dim, NULL);
    assert_true(space >= 0);
    if (H5Aexists_by_name(file, obj, name, H5P_DEFAULT) > 0)
        assert_true(H5Adelete_by_name(file, obj, name, H5P_DEFAULT) >= 0);
    hid_t a = H5Acreate_by_name(file, obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, mtype, data) >= 0);
    H5Aclose(a);
    H5Sclose(space);
}

static void attr_write_i64(hid_t file, const char *obj, const char *name, int64_t v)
{
    attr_write(file, obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, 0, &v);
}

static void attr_write_f64(hid_t file, const char *obj, const char *name, double v)
{
    attr_write(file, obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 0, &v);
}

/* Variable-length UTF-8 (h5py's default) or fixed-length ASCII. */
static void attr_write_str(hid_t file, const char *obj, const char *name, const char *value, int vlen)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (vlen) {
        H5Tset_size(t, H5T_VARIABLE);
        H5Tset_cset(t, H5T_CSET_UTF8);
        attr_write(file, obj, name, t, t, 0, &value);
    } else {
        H5Tset_size(t, strlen(value));
        H5Tset_strpad(t, H5T_STR_NULLPAD);
        attr_write(file, obj, name, t, t, 0, value);
    }
    H5Tclose(t);
}

/* h5py's numpy bool: an enum over int8 with FALSE = 0, TRUE = 1. */
static void attr_write_bool_enum(hid_t file, const char *obj, const char *name, int v)
{
    hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    int8_t f = 0, tr = 1, val = (int8_t)v;
    H5Tenum_insert(t, "FALSE", &f);
    H5Tenum_insert(t, "TRUE", &tr);
    attr_write(file, obj, name, t, t, 0, &val);
    H5Tclose(t);
}

/* data == NULL: a chunked dataset with nothing written (its header may claim any size). */
static void dataset_write(hid_t file, const char *name, hid_t ftype, hid_t mtype, int ndim, const int64_t *dims,
                          const void *data, int compress)
{
    hsize_t hd[MC_MAX_DIMS], chunk[MC_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        hd[i] = (hsize_t)dims[i];
        chunk[i] = hd[i] < 64 ? hd[i] : 64;
    }
    if (H5Lexists(file, name, H5P_DEFAULT) > 0)
        assert_true(H5Ldelete(file, name, H5P_DEFAULT) >= 0);
    hid_t space = H5Screate_simple(ndim, hd, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    if (compress || data == NULL)
        H5Pset_chunk(dcpl, ndim, chunk);
    if (compress) {
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, 4);
    }
    hid_t ds = H5Dcreate2(file, name, ftype, space, lcpl, dcpl, H5P_DEFAULT);
    assert_true(ds >= 0);
    if (data != NULL)
        assert_true(H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(ds);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    H5Sclose(space);
}

static void stamp(const char *path, const struct model *m, int with_mask);

static void golden_write(const char *path, const struct model *m)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    attr_write_str(f, "/", "format", MC_GOLDEN_FORMAT, 1);
    attr_write_i64(f, "/", "format_version", MC_GOLDEN_FORMAT_VERSION);
    attr_write_str(f, "/", "family", mc_family_name(m->cfg.family), 1);
    attr_write_str(f, "/", "generator", "golden/generate.py", 0);
    attr_write_str(f, "/", "generator_version", "0.1.0", 0);
    attr_write_i64(f, "/", "seed", 1234);
    attr_write_str(f, "/", "numpy_version", "2.0.0", 1);

    hid_t grp = H5Gcreate2(f, "/config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(grp >= 0);
    H5Gclose(grp);
    size_t count = 0;
    const struct mc_config_field *fields = mc_family_config_fields(m->cfg.family, &count);
    for (size_t i = 0; i < count; i++) {
        const char *src = (const char *)&m->cfg.u + fields[i].offset;
        switch (fields[i].kind) {
        case MC_FIELD_INT:
            attr_write(f, "/config", fields[i].name, H5T_STD_I64LE, H5T_NATIVE_INT64, 0, src);
            break;
        case MC_FIELD_BOOL:
            attr_write(f, "/config", fields[i].name, H5T_STD_I32LE, H5T_NATIVE_INT32, 0, src);
            break;
        case MC_FIELD_DOUBLE:
            attr_write(f, "/config", fields[i].name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 0, src);
            break;
        case MC_FIELD_DOUBLE_PAIR:
            attr_write(f, "/config", fields[i].name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2, src);
            break;
        case MC_FIELD_GDN_LAYOUT:
            attr_write_str(f, "/config", fields[i].name,
                           *(const int32_t *)src == MC_GDN_LAYOUT_QWEN3_NEXT ? "qwen3_next" : "qwen3_5", 1);
            break;
        case MC_FIELD_QK_NORM:
            attr_write_str(f, "/config", fields[i].name, mc_qk_norm_name(*(const int32_t *)src), 1);
            break;
        }
    }
    for (int i = 0; i < m->n_specs; i++) {
        char name[256];
        snprintf(name, sizeof name, "/weights/%s", m->specs[i].name);
        dataset_write(f, name, i % 2 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, m->specs[i].ndim,
                      m->specs[i].dims, m->weights[i], i % 3 == 0);
    }
    int64_t D = m->sh.hidden, C = m->sh.conv_channels, K = m->sh.conv_kernel;
    dataset_write(f, "/inputs/hidden_states", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, 3, (int64_t[]){TB, TL, D},
                  m->hidden, 1);
    dataset_write(f, "/inputs/attention_mask", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, (int64_t[]){TB, TL}, m->mask, 0);
    dataset_write(f, "/expected/output", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 3, (int64_t[]){TB, TL, D}, m->output, 1);
    dataset_write(f, "/expected/state_positions", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, (int64_t[]){TT}, m->positions,
                  0);
    dataset_write(f, "/expected/conv_state", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 4, (int64_t[]){TT, TB, C, K}, m->conv,
                  0);
    if (m->sh.state_ndim > 0) {
        int64_t rd[MC_MAX_DIMS] = {TT, TB};
        for (int i = 0; i < m->sh.state_ndim; i++)
            rd[2 + i] = m->sh.state_dims[i];
        dataset_write(f, "/expected/recurrent_state", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2 + m->sh.state_ndim, rd,
                      m->rec, 1);
    }
    assert_true(H5Fclose(f) >= 0);
    stamp(path, m, 1);
}

/* Records /content_sha256 for the model's values (with or without its attention mask), computed from
 * a golden struct that points at them, as the generator would. */
static void stamp(const char *path, const struct model *m, int with_mask)
{
    struct mc_golden g;
    struct mc_golden_weight w[MC_FAMILY_MAX_WEIGHTS];
    memset(&g, 0, sizeof g);
    int64_t D = m->sh.hidden, C = m->sh.conv_channels, K = m->sh.conv_kernel;
    for (int i = 0; i < m->n_specs; i++) {
        w[i].name = (char *)m->specs[i].name;
        w[i].value.ndim = m->specs[i].ndim;
        memcpy(w[i].value.dims, m->specs[i].dims, sizeof w[i].value.dims);
        w[i].value.data = m->weights[i];
    }
    g.weights = w;
    g.n_weights = m->n_specs;
    g.batch = TB;
    g.len = TL;
    g.hidden_states = (struct mc_array){3, {TB, TL, D}, m->hidden};
    g.mask = with_mask ? (uint8_t *)m->mask : NULL;
    g.output = (struct mc_array){3, {TB, TL, D}, m->output};
    g.state_positions = (int64_t *)m->positions;
    g.n_positions = TT;
    g.conv_state = (struct mc_array){4, {TT, TB, C, K}, m->conv};
    if (m->sh.state_ndim > 0) {
        g.recurrent_state = (struct mc_array){2 + m->sh.state_ndim, {TT, TB}, m->rec};
        for (int i = 0; i < m->sh.state_ndim; i++)
            g.recurrent_state.dims[2 + i] = m->sh.state_dims[i];
    }
    char hex[MC_SHA256_HEX_LEN + 1];
    mc_golden_content_sha256(&g, hex);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    attr_write_str(f, "/", "content_sha256", hex, 1);
    assert_true(H5Fclose(f) >= 0);
}

/* ---- mutators: each applies one defect to the valid golden at path ------------------------------ */

static hid_t open_rw(const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    return f;
}

static void close_rw(hid_t f)
{
    assert_true(H5Fclose(f) >= 0);
}

static void poke(const char *path, const char *name, int64_t flat, double value)
{
    hid_t f = open_rw(path);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    assert_true(ds >= 0);
    hid_t space = H5Dget_space(ds);
    hssize_t n = H5Sget_simple_extent_npoints(space);
    double *buf = malloc((size_t)n * sizeof *buf);
    assert_non_null(buf);
    assert_true(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    buf[flat] = value;
    assert_true(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    free(buf);
    H5Sclose(space);
    H5Dclose(ds);
    close_rw(f);
}

static void replace(const char *path, const char *name, hid_t ftype, int ndim, const int64_t *dims, int with_data)
{
    double *data = with_data ? filled(dims_elems(ndim, dims), 7, 1) : NULL;
    hid_t f = open_rw(path);
    dataset_write(f, name, ftype, H5T_NATIVE_DOUBLE, ndim, dims, data, 0);
    close_rw(f);
    free(data);
}

static void replace_i64(const char *path, const char *name, int64_t n, const int64_t *values)
{
    hid_t f = open_rw(path);
    dataset_write(f, name, H5T_STD_I64LE, H5T_NATIVE_INT64, 1, &n, values, 0);
    close_rw(f);
}

static void set_attr_i64(const char *path, const char *obj, const char *name, int64_t v)
{
    hid_t f = open_rw(path);
    attr_write_i64(f, obj, name, v);
    close_rw(f);
}

static void set_attr_f64(const char *path, const char *obj, const char *name, double v)
{
    hid_t f = open_rw(path);
    attr_write_f64(f, obj, name, v);
    close_rw(f);
}

static void set_attr_str(const char *path, const char *obj, const char *name, const char *v)
{
    hid_t f = open_rw(path);
    attr_write_str(f, obj, name, v, 1);
    close_rw(f);
}

static void delete_attr(const char *path, const char *obj, const char *name)
{
    hid_t f = open_rw(path);
    assert_true(H5Adelete_by_name(f, obj, name, H5P_DEFAULT) >= 0);
    close_rw(f);
}

static void delete_link(const char *path, const char *name)
{
    hid_t f = open_rw(path);
    assert_true(H5Ldelete(f, name, H5P_DEFAULT) >= 0);
    close_rw(f);
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, n, fp), n);
    fclose(fp);
}

static void mut_not_hdf5(const char *p, const struct model *m)
{
    const char text[] = "this is a text file, not a golden\n";
    write_bytes(p, text, sizeof text - 1);
}

static void mut_empty(const char *p, const struct model *m)
{
    write_bytes(p, "", 0);
}

static void mut_truncated(const char *p, const struct model *m)
{
    FILE *fp = fopen(p, "rb");
    assert_non_null(fp);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    assert_true(n > 4096 && n < sizeof buf);
    write_bytes(p, buf, n / 2);
}

static void mut_missing_file(const char *p, const struct model *m)
{
    assert_int_equal(unlink(p), 0);
}

static void mut_missing_config_attr(const char *p, const struct model *m)
{
    delete_attr(p, "/config", "state_size");
}

static void mut_missing_config_group(const char *p, const struct model *m)
{
    delete_link(p, "/config");
}

static void mut_format_string(const char *p, const struct model *m)
{
    set_attr_str(p, "/", "format", "something-else");
}

static void mut_format_missing(const char *p, const struct model *m)
{
    delete_attr(p, "/", "format");
}

static void mut_format_version(const char *p, const struct model *m)
{
    set_attr_i64(p, "/", "format_version", 2);
}

static void mut_family(const char *p, const struct model *m)
{
    set_attr_str(p, "/", "family", "mamba3");
}

static void mut_family_not_string(const char *p, const struct model *m)
{
    set_attr_i64(p, "/", "family", 2);
}

static void mut_missing_seed(const char *p, const struct model *m)
{
    delete_attr(p, "/", "seed");
}

static void mut_missing_weight(const char *p, const struct model *m)
{
    delete_link(p, "/weights/D");
}

static void mut_extra_weight(const char *p, const struct model *m)
{
    replace(p, "/weights/foo.weight", H5T_IEEE_F32LE, 1, (int64_t[]){4}, 1);
}

static void mut_weight_shape(const char *p, const struct model *m)
{
    replace(p, "/weights/in_proj.weight", H5T_IEEE_F32LE, 2, (int64_t[]){26, 7}, 1);
}

/* Stage probes (/probes, optional): a mis-shaped one and one the family does not define. */
static void mut_probe_shape(const char *p, const struct model *m)
{
    (void)m;
    replace(p, "/probes/dt", H5T_IEEE_F64LE, 3, (int64_t[]){TB, TL, 3}, 1);
}

static void mut_probe_rank(const char *p, const struct model *m)
{
    (void)m;
    replace(p, "/probes/B", H5T_IEEE_F64LE, 3, (int64_t[]){TB, TL, 4}, 1);
}

static void mut_probe_unknown(const char *p, const struct model *m)
{
    (void)m;
    replace(p, "/probes/beta", H5T_IEEE_F64LE, 3, (int64_t[]){TB, TL, 2}, 1);
}

static void mut_weight_rank(const char *p, const struct model *m)
{
    replace(p, "/weights/conv1d.weight", H5T_IEEE_F64LE, 2, (int64_t[]){16, 4}, 1);
}

static void mut_weight_int(const char *p, const struct model *m)
{
    replace(p, "/weights/A_log", H5T_STD_I32LE, 1, (int64_t[]){2}, 1);
}

static void mut_output_f32(const char *p, const struct model *m)
{
    replace(p, "/expected/output", H5T_IEEE_F32LE, 3, (int64_t[]){TB, TL, 8}, 1);
}

static void mut_nan_expected(const char *p, const struct model *m)
{
    poke(p, "/expected/output", (1 * TL + 3) * 8 + 5, NAN);
}

static void mut_inf_weight(const char *p, const struct model *m)
{
    poke(p, "/weights/dt_bias", 1, INFINITY);
}

static void mut_nan_hidden(const char *p, const struct model *m)
{
    poke(p, "/inputs/hidden_states", 0, NAN);
}

static void mut_inf_recurrent(const char *p, const struct model *m)
{
    poke(p, "/expected/recurrent_state", 1, -INFINITY);
}

static void mut_mask_2(const char *p, const struct model *m)
{
    poke(p, "/inputs/attention_mask", 1 * TL + 2, 2.0);
}

static void mut_mask_float(const char *p, const struct model *m)
{
    replace(p, "/inputs/attention_mask", H5T_IEEE_F32LE, 2, (int64_t[]){TB, TL}, 1);
}

static void mut_mask_shape(const char *p, const struct model *m)
{
    int64_t dims[2] = {TB, TL + 1};
    uint8_t ones[TB * (TL + 1)];
    memset(ones, 1, sizeof ones);
    hid_t f = open_rw(p);
    dataset_write(f, "/inputs/attention_mask", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, dims, ones, 0);
    close_rw(f);
}

static void mut_positions_not_increasing(const char *p, const struct model *m)
{
    replace_i64(p, "/expected/state_positions", 3, (int64_t[]){0, 3, 3});
}

static void mut_position_past_len(const char *p, const struct model *m)
{
    replace_i64(p, "/expected/state_positions", 3, (int64_t[]){0, 2, TL + 1});
}

static void mut_position_negative(const char *p, const struct model *m)
{
    replace_i64(p, "/expected/state_positions", 3, (int64_t[]){-1, 2, TL});
}

static void mut_positions_float(const char *p, const struct model *m)
{
    replace(p, "/expected/state_positions", H5T_IEEE_F64LE, 1, (int64_t[]){3}, 1);
}

static void mut_conv_shape(const char *p, const struct model *m)
{
    replace(p, "/expected/conv_state", H5T_IEEE_F64LE, 4, (int64_t[]){TT, TB, 16, 3}, 1);
}

static void mut_recurrent_missing(const char *p, const struct model *m)
{
    delete_link(p, "/expected/recurrent_state");
}

static void mut_config_contradicts_weights(const char *p, const struct model *m)
{
    set_attr_i64(p, "/config", "hidden_size", 16);
}

static void mut_config_invalid(const char *p, const struct model *m)
{
    set_attr_i64(p, "/config", "n_groups", 3);
}

static void mut_absurd_batch_len(const char *p, const struct model *m)
{
    replace(p, "/inputs/hidden_states", H5T_IEEE_F32LE, 3, (int64_t[]){4096, 1000000, 8}, 0);
}

static void mut_batch_out_of_range(const char *p, const struct model *m)
{
    replace(p, "/inputs/hidden_states", H5T_IEEE_F32LE, 3, (int64_t[]){4097, 1, 8}, 0);
}

static void mut_hidden_scalar(const char *p, const struct model *m)
{
    hid_t f = open_rw(p);
    assert_true(H5Ldelete(f, "/inputs/hidden_states", H5P_DEFAULT) >= 0);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t ds = H5Dcreate2(f, "/inputs/hidden_states", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(ds >= 0);
    H5Dclose(ds);
    H5Sclose(space);
    close_rw(f);
}

static void mut_bool_float(const char *p, const struct model *m)
{
    set_attr_f64(p, "/config", "use_bias", 1.0);
}

static void mut_bool_2(const char *p, const struct model *m)
{
    set_attr_i64(p, "/config", "use_conv_bias", 2);
}

static void mut_int_float(const char *p, const struct model *m)
{
    set_attr_f64(p, "/config", "hidden_size", 8.0);
}

static void mut_pair_nan(const char *p, const struct model *m)
{
    double v[2] = {0.0, NAN};
    hid_t f = open_rw(p);
    attr_write(f, "/config", "time_step_limit", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2, v);
    close_rw(f);
}

static void mut_pair_scalar(const char *p, const struct model *m)
{
    set_attr_f64(p, "/config", "time_step_limit", 0.5);
}

static void mut_shortconv_with_state(const char *p, const struct model *m)
{
    /* A shortconv golden that carries a recurrent_state. */
    hid_t f = open_rw(p);
    attr_write_str(f, "/", "family", "shortconv", 1);
    assert_true(H5Ldelete(f, "/config", H5P_DEFAULT) >= 0);
    hid_t grp = H5Gcreate2(f, "/config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(grp);
    attr_write_i64(f, "/config", "hidden_size", 8);
    attr_write_i64(f, "/config", "conv_L_cache", 4);
    attr_write_i64(f, "/config", "conv_bias", 0);
    assert_true(H5Ldelete(f, "/weights", H5P_DEFAULT) >= 0);
    double *w = filled(3 * 8 * 8, 1, 1);
    dataset_write(f, "/weights/in_proj.weight", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, 2, (int64_t[]){24, 8}, w, 0);
    dataset_write(f, "/weights/conv.weight", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, 3, (int64_t[]){8, 1, 4}, w, 0);
    dataset_write(f, "/weights/out_proj.weight", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, 2, (int64_t[]){8, 8}, w, 0);
    free(w);
    double *cs = filled(TT * TB * 8 * 4, 2, 0);
    dataset_write(f, "/expected/conv_state", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 4, (int64_t[]){TT, TB, 8, 4}, cs, 0);
    free(cs);
    close_rw(f);
}

static void mut_checksum_mismatch(const char *p, const struct model *m)
{
    poke(p, "/expected/output", 7, m->output[7] + 1e-9); /* still finite, still the right shape */
}

static void mut_checksum_missing(const char *p, const struct model *m)
{
    delete_attr(p, "/", "content_sha256");
}

static void mut_checksum_malformed(const char *p, const struct model *m)
{
    set_attr_str(p, "/", "content_sha256", "ABC\x01");
}

static void mut_checksum_mask_removed(const char *p, const struct model *m)
{
    delete_link(p, "/inputs/attention_mask");
}

static void mut_extra_root_link(const char *p, const struct model *m)
{
    replace(p, "/extra", H5T_IEEE_F64LE, 1, (int64_t[]){3}, 1);
}

static void mut_extra_expected(const char *p, const struct model *m)
{
    replace(p, "/expected/outputs", H5T_IEEE_F64LE, 1, (int64_t[]){3}, 1);
}

struct bad_case {
    const char *name;
    void (*mutate)(const char *path, const struct model *m);
    const char *expect; /* a substring of the message after "<file>: " */
};

static const struct bad_case bad_cases[] = {
    {"not_hdf5", mut_not_hdf5, "not an HDF5 file"},
    {"empty_file", mut_empty, "not an HDF5 file"},
    {"truncated", mut_truncated, "truncated"},
    {"missing_file", mut_missing_file, "cannot open: No such file or directory"},
    {"missing_config_attr", mut_missing_config_attr, "/config/state_size: missing attribute"},
    {"missing_config_group", mut_missing_config_group, "/config: missing group"},
    {"format_string", mut_format_string, "/format: is 'something-else', not 'mixcheck-golden'"},
    {"format_missing", mut_format_missing, "/format: missing attribute"},
    {"format_version", mut_format_version,
     "/format_version: format version 2 is not supported (this reader reads version 1)"},
    {"unknown_family", mut_family, "/family: unknown family 'mamba3'"},
    {"family_not_string", mut_family_not_string, "/family: must be a string (got int64)"},
    {"missing_seed", mut_missing_seed, "/seed: missing attribute"},
    {"missing_weight", mut_missing_weight, "/weights/D: missing dataset"},
    {"extra_weight", mut_extra_weight, "/weights/foo.weight: not a parameter of this configuration"},
    {"weight_shape", mut_weight_shape,
     "/weights/in_proj.weight: shape [26, 7] does not match the configuration (expected [26, 8])"},
    {"weight_rank", mut_weight_rank,
     "/weights/conv1d.weight: shape [16, 4] does not match the configuration (expected [16, 1, 4])"},
    {"probe_shape", mut_probe_shape,
     "/probes/dt: shape [2, 5, 3] does not match the configuration and the inputs (expected [2, 5, 2])"},
    {"probe_rank", mut_probe_rank,
     "/probes/B: shape [2, 5, 4] does not match the configuration and the inputs (expected [2, 5, 1, 4])"},
    {"probe_unknown", mut_probe_unknown, "/probes/beta: not a stage probe of this family"},
    {"weight_integer", mut_weight_int, "/weights/A_log: must be float32 or float64 (got int32)"},
    {"output_float32", mut_output_f32, "/expected/output: expected values must be float64 (got float32)"},
    {"nan_expected", mut_nan_expected, "/expected/output: NaN at [1, 3, 5]"},
    {"inf_weight", mut_inf_weight, "/weights/dt_bias: Inf at [1]"},
    {"nan_input", mut_nan_hidden, "/inputs/hidden_states: NaN at [0, 0, 0]"},
    {"neg_inf_state", mut_inf_recurrent, "/expected/recurrent_state: -Inf at [0, 0, 0, 0, 1]"},
    {"mask_value_2", mut_mask_2, "/inputs/attention_mask: value 2 at [1, 2] (must be 0 or 1)"},
    {"mask_float", mut_mask_float, "/inputs/attention_mask: must be an integer (got float32)"},
    {"mask_shape", mut_mask_shape, "/inputs/attention_mask: shape [2, 6] does not match /inputs/hidden_states"},
    {"positions_not_increasing", mut_positions_not_increasing,
     "/expected/state_positions: positions must be strictly increasing (3 at [2] after 3)"},
    {"position_past_len", mut_position_past_len,
     "/expected/state_positions: position 6 at [2] is outside [0, L = 5]"},
    {"position_negative", mut_position_negative, "/expected/state_positions: position -1 at [0]"},
    {"positions_float", mut_positions_float, "/expected/state_positions: must be an integer (got float64)"},
    {"conv_state_shape", mut_conv_shape,
     "/expected/conv_state: shape [3, 2, 16, 3] does not match the configuration and state_positions "
     "(expected [3, 2, 16, 4])"},
    {"recurrent_missing", mut_recurrent_missing, "/expected/recurrent_state: missing dataset"},
    {"config_contradicts_weights", mut_config_contradicts_weights,
     "/weights/in_proj.weight: shape [26, 8] does not match the configuration (expected [26, 16])"},
    {"config_invalid", mut_config_invalid, "/config: config: 'num_heads' (2) must be a multiple of 'n_groups' (3)"},
    {"absurd_batch_len", mut_absurd_batch_len,
     "/inputs/hidden_states: shape [4096, 1000000, 8] is too large"},
    {"batch_out_of_range", mut_batch_out_of_range, "/inputs/hidden_states: shape [4097, 1, 8]: B = 4097 is out of range"},
    {"hidden_scalar", mut_hidden_scalar, "/inputs/hidden_states: must be an array"},
    {"bool_as_float", mut_bool_float, "/config/use_bias: must be an integer (got float64)"},
    {"bool_2", mut_bool_2, "/config/use_conv_bias: must be 0 or 1 (got 2)"},
    {"int_as_float", mut_int_float, "/config/hidden_size: must be an integer (got float64)"},
    {"pair_nan", mut_pair_nan, "/config/time_step_limit: is NaN"},
    {"pair_scalar", mut_pair_scalar, "/config/time_step_limit: must be an array of 2 values (got 1)"},
    {"checksum_mismatch", mut_checksum_mismatch,
     "content checksum mismatch (recorded "},
    {"checksum_missing", mut_checksum_missing,
     "/content_sha256: missing attribute: goldens of format version 1 record the checksum of their content; "
     "regenerate it with golden/generate.py regenerate mamba2/tiny"},
    {"checksum_malformed", mut_checksum_malformed, "/content_sha256: must be 64 lower-case hex digits (got 'ABC?')"},
    {"checksum_mask_removed", mut_checksum_mask_removed,
     "the golden was modified after generation; regenerate it with golden/generate.py regenerate mamba2/tiny"},
    {"extra_root_link", mut_extra_root_link, "/extra: not part of the golden layout (golden/README.md)"},
    {"extra_expected", mut_extra_expected, "/expected/outputs: not part of the golden layout"},
    {"state_without_recurrence", mut_shortconv_with_state,
     "/expected/recurrent_state: present, but family shortconv has no recurrent state"},
};

#define N_BAD (sizeof bad_cases / sizeof bad_cases[0])

/* ---- fixture and checks ------------------------------------------------------------------------ */

static int fixture_setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/mc_golden_XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->path, sizeof fx->path, "%s/tiny.h5", fx->dir);
    struct mc_family_config cfg;
    mamba2_config(&cfg);
    model_init(&fx->m, &cfg);
    golden_write(fx->path, &fx->m);
    fx->bc = *state; /* the bad case handed in as the test's initial state, if any */
    *state = fx;
    return 0;
}

static int fixture_teardown(void **state)
{
    struct fixture *fx = *state;
    unlink(fx->path);
    rmdir(fx->dir);
    model_free(&fx->m);
    free(fx);
    return 0;
}

static void assert_no_open_hdf5_objects(void)
{
    ssize_t n = H5Fget_obj_count((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (n != 0)
        fail_msg("%zd HDF5 objects left open", n);
}

static void assert_zeroed(const struct mc_golden *g)
{
    static const struct mc_golden zero;
    if (memcmp(g, &zero, sizeof zero) != 0)
        fail_msg("the golden struct is not zeroed after a failed load");
}

static void assert_array(const struct mc_array *a, int ndim, const int64_t *dims, const double *data)
{
    assert_int_equal(a->ndim, ndim);
    for (int i = 0; i < ndim; i++)
        assert_int_equal(a->dims[i], dims[i]);
    int64_t n = dims_elems(ndim, dims);
    assert_int_equal(mc_array_elems(a), n);
    assert_non_null(a->data);
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a->data[i], &data[i], sizeof(double)) != 0)
            fail_msg("element %lld: %.17g != %.17g", (long long)i, a->data[i], data[i]);
}

static void load_ok(const char *path, struct mc_golden *g)
{
    struct mc_error err = {0};
    enum mc_err_code code = mc_golden_load(path, g, &err);
    if (code != MC_ERR_NONE)
        fail_msg("load failed (%d): %s", (int)code, err.msg);
    assert_no_open_hdf5_objects();
}

/* ---- tests ------------------------------------------------------------------------------------- */

/* Every value and attribute of the golden at path equals the model's, bit for bit. */
static void assert_round_trip(const char *path, const struct model *m)
{
    struct mc_golden g;
    load_ok(path, &g);
    assert_string_equal(g.path, path);
    assert_int_equal(g.config.family, m->cfg.family);
    size_t count = 0;
    const struct mc_config_field *fields = mc_family_config_fields(m->cfg.family, &count);
    for (size_t i = 0; i < count; i++) {
        static const size_t size[] = {[MC_FIELD_INT] = 8, [MC_FIELD_BOOL] = 4, [MC_FIELD_DOUBLE] = 8,
                                      [MC_FIELD_DOUBLE_PAIR] = 16, [MC_FIELD_GDN_LAYOUT] = 4,
                                      [MC_FIELD_QK_NORM] = 4};
        if (memcmp((const char *)&g.config.u + fields[i].offset, (const char *)&m->cfg.u + fields[i].offset,
                   size[fields[i].kind]) != 0)
            fail_msg("/config/%s differs after the round trip", fields[i].name);
    }
    assert_string_equal(g.generator, "golden/generate.py");
    assert_string_equal(g.generator_version, "0.1.0");
    assert_int_equal(g.seed, 1234);
    assert_int_equal(g.batch, TB);
    assert_int_equal(g.len, TL);
    assert_int_equal(g.n_weights, m->n_specs);
    for (int i = 0; i < m->n_specs; i++) {
        assert_string_equal(g.weights[i].name, m->specs[i].name);
        assert_array(&g.weights[i].value, m->specs[i].ndim, m->specs[i].dims, m->weights[i]);
        assert_ptr_equal(mc_golden_weight(&g, m->specs[i].name), &g.weights[i].value);
    }
    assert_null(mc_golden_weight(&g, "nope.weight"));
    int64_t D = m->sh.hidden, C = m->sh.conv_channels, K = m->sh.conv_kernel;
    assert_array(&g.hidden_states, 3, (int64_t[]){TB, TL, D}, m->hidden);
    assert_non_null(g.mask);
    assert_memory_equal(g.mask, m->mask, TB * TL);
    assert_array(&g.output, 3, (int64_t[]){TB, TL, D}, m->output);
    assert_int_equal(g.n_positions, TT);
    assert_memory_equal(g.state_positions, m->positions, sizeof m->positions);
    assert_array(&g.conv_state, 4, (int64_t[]){TT, TB, C, K}, m->conv);
    if (m->sh.state_ndim > 0) {
        int64_t rd[MC_MAX_DIMS] = {TT, TB};
        for (int i = 0; i < m->sh.state_ndim; i++)
            rd[2 + i] = m->sh.state_dims[i];
        assert_array(&g.recurrent_state, 2 + m->sh.state_ndim, rd, m->rec);
    } else {
        assert_int_equal(g.recurrent_state.ndim, 0);
        assert_null(g.recurrent_state.data);
        assert_int_equal(mc_array_elems(&g.recurrent_state), 0);
    }
    assert_int_equal(mc_golden_position_index(&g, 0), 0);
    assert_int_equal(mc_golden_position_index(&g, 2), 1);
    assert_int_equal(mc_golden_position_index(&g, TL), 2);
    assert_int_equal(mc_golden_position_index(&g, 1), -1);
    assert_int_equal(mc_golden_position_index(&g, TL + 1), -1);
    mc_golden_free(&g);
    assert_zeroed(&g);
    mc_golden_free(&g); /* twice is harmless */
}

static void test_round_trip(void **state)
{
    struct fixture *fx = *state;
    assert_round_trip(fx->path, &fx->m);
}

/* The other families and options through the same writer: every weight set the table implies. */
static void test_round_trip_families(void **state)
{
    struct fixture *fx = *state;
    struct mc_family_config cfgs[8];
    memset(cfgs, 0, sizeof cfgs);
    mamba2_config(&cfgs[0]);
    cfgs[0].u.mamba2.use_bias = 0;
    cfgs[0].u.mamba2.n_groups = 2;
    cfgs[0].u.mamba2.norm_group_size = 4;
    cfgs[0].u.mamba2.time_step_limit[0] = 0.001;
    cfgs[0].u.mamba2.time_step_limit[1] = 0.1;
    cfgs[1].family = MC_FAMILY_MAMBA1;
    cfgs[1].u.mamba1 = (struct mc_mamba1_config){.hidden_size = 8, .intermediate_size = 16, .state_size = 4,
                                                 .conv_kernel = 4, .time_step_rank = 2, .use_bias = 1,
                                                 .use_conv_bias = 1};
    cfgs[2].family = MC_FAMILY_GDN;
    cfgs[2].u.gdn = (struct mc_gdn_config){.hidden_size = 8, .num_key_heads = 1, .num_value_heads = 2,
                                           .key_head_dim = 4, .value_head_dim = 4, .conv_kernel = 4,
                                           .chunk_size = 64, .rms_norm_eps = 1e-6, .layout = MC_GDN_LAYOUT_QWEN3_5};
    cfgs[3] = cfgs[2];
    cfgs[3].u.gdn.layout = MC_GDN_LAYOUT_QWEN3_NEXT;
    cfgs[4].family = MC_FAMILY_SHORTCONV;
    cfgs[4].u.shortconv = (struct mc_shortconv_config){.hidden_size = 8, .conv_kernel = 3, .conv_bias = 1};
    cfgs[5] = cfgs[4];
    cfgs[5].u.shortconv.conv_bias = 0;
    cfgs[6].family = MC_FAMILY_ATTENTION;
    cfgs[6].u.attention = (struct mc_attention_config){.hidden_size = 8, .num_attention_heads = 2,
                                                       .num_key_value_heads = 1, .head_dim = 4, .cache_length = 6,
                                                       .partial_rotary_factor = 0.5, .rope_theta = 10000.0,
                                                       .rms_norm_eps = 1e-6, .qk_norm = MC_QK_NORM_ZERO_CENTRED,
                                                       .attn_output_gate = 1, .attention_bias = 1};
    cfgs[7] = cfgs[6];
    cfgs[7].u.attention.qk_norm = MC_QK_NORM_NONE;
    cfgs[7].u.attention.attn_output_gate = 0;
    cfgs[7].u.attention.attention_bias = 0;
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        struct model m;
        model_init(&m, &cfgs[i]);
        golden_write(fx->path, &m);
        assert_round_trip(fx->path, &m);
        model_free(&m);
    }
}

/* An attention golden whose q/k norm is not one of the names, and one whose rotary dims are odd. */
static void test_attention_config_errors(void **state)
{
    struct fixture *fx = *state;
    struct mc_family_config cfg = {.family = MC_FAMILY_ATTENTION};
    cfg.u.attention = (struct mc_attention_config){.hidden_size = 8, .num_attention_heads = 2,
                                                   .num_key_value_heads = 2, .head_dim = 4, .cache_length = 6,
                                                   .partial_rotary_factor = 1.0, .rope_theta = 10000.0,
                                                   .rms_norm_eps = 1e-6, .qk_norm = MC_QK_NORM_RMS};
    static const struct {
        int32_t qk_norm;
        double rotary;
        const char *expect;
    } bad[] = {
        {0, 1.0, "/config/qk_norm: unknown q/k norm 'unknown' (expected none, rms or zero_centred)"},
        {MC_QK_NORM_NONE, 0.75, "rotary dims int(head_dim * partial_rotary_factor) = 3 must be even"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct model m;
        cfg.u.attention.qk_norm = MC_QK_NORM_RMS;
        cfg.u.attention.partial_rotary_factor = 1.0;
        model_init(&m, &cfg); /* the weights of a valid configuration, then the attribute made bad */
        m.cfg.u.attention.qk_norm = bad[i].qk_norm;
        m.cfg.u.attention.partial_rotary_factor = bad[i].rotary;
        golden_write(fx->path, &m);
        struct mc_golden g;
        struct mc_error err = {0};
        assert_int_equal(mc_golden_load(fx->path, &g, &err), MC_ERR_INPUT);
        if (strstr(err.msg, bad[i].expect) == NULL)
            fail_msg("message lacks '%s': %s", bad[i].expect, err.msg);
        assert_zeroed(&g);
        model_free(&m);
    }
}

/* Accepted variations: no mask, h5py's numpy-bool enum, an integer where a float is allowed. */
static void test_variants(void **state)
{
    struct fixture *fx = *state;
    delete_link(fx->path, "/inputs/attention_mask");
    hid_t f = open_rw(fx->path);
    attr_write_bool_enum(f, "/config", "use_bias", 1);
    attr_write_bool_enum(f, "/config", "use_conv_bias", 1);
    attr_write(f, "/config", "layer_norm_epsilon", H5T_STD_I32LE, H5T_NATIVE_INT32, 0, &(int32_t){1});
    attr_write(f, "/config", "hidden_size", H5T_STD_U16LE, H5T_NATIVE_UINT16, 0, &(uint16_t){8});
    attr_write_str(f, "/", "family", "mamba2", 0);
    attr_write_str(f, "/", "format", MC_GOLDEN_FORMAT, 0);
    attr_write_str(f, "/", "generator", "gen", 1);
    close_rw(f);
    stamp(fx->path, &fx->m, 0); /* the mask left the content */
    struct mc_golden g;
    load_ok(fx->path, &g);
    assert_null(g.mask);
    assert_int_equal(g.config.u.mamba2.use_bias, 1);
    assert_int_equal(g.config.u.mamba2.use_conv_bias, 1);
    assert_true(g.config.u.mamba2.layer_norm_epsilon == 1.0);
    assert_int_equal(g.config.u.mamba2.hidden_size, 8);
    assert_string_equal(g.generator, "gen");
    mc_golden_free(&g);
}

/* The first error wins: a caller's earlier error is kept, and the golden is still left empty. */
static void test_error_kept(void **state)
{
    struct fixture *fx = *state;
    mut_format_version(fx->path, &fx->m);
    struct mc_error err = {0};
    mc_error_set(&err, MC_ERR_USAGE, "earlier");
    struct mc_golden g;
    assert_int_equal(mc_golden_load(fx->path, &g, &err), MC_ERR_USAGE);
    assert_string_equal(err.msg, "earlier");
    assert_zeroed(&g);
    assert_int_equal(mc_golden_load(fx->path, &g, NULL), MC_ERR_INPUT);
    assert_zeroed(&g);
    assert_no_open_hdf5_objects();
}

static void test_bad_case(void **state)
{
    struct fixture *fx = *state;
    const struct bad_case *bc = fx->bc;
    bc->mutate(fx->path, &fx->m);
    struct mc_golden g;
    struct mc_error err = {0};
    enum mc_err_code code = mc_golden_load(fx->path, &g, &err);
    if (code != MC_ERR_INPUT)
        fail_msg("%s: expected MC_ERR_INPUT, got %d: %s", bc->name, (int)code, err.msg);
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s: ", fx->path);
    if (strncmp(err.msg, prefix, strlen(prefix)) != 0)
        fail_msg("%s: message does not start with the file: %s", bc->name, err.msg);
    if (strstr(err.msg, bc->expect) == NULL)
        fail_msg("%s: message lacks '%s': %s", bc->name, bc->expect, err.msg);
    print_message("[ %-26s ] %s\n", bc->name, err.msg);
    assert_zeroed(&g);
    assert_no_open_hdf5_objects();
    mc_golden_free(&g);
}

/* Every golden under golden/<family>/ loads; none present is not a failure. */
static void test_checked_in_goldens(void **state)
{
    glob_t gl;
    int rc = glob(MC_SOURCE_DIR "/golden/*/*.h5", 0, NULL, &gl);
    if (rc == GLOB_NOMATCH)
        return;
    assert_int_equal(rc, 0);
    for (size_t i = 0; i < gl.gl_pathc; i++) {
        struct mc_golden g;
        struct mc_error err = {0};
        if (mc_stack_golden_is_model(gl.gl_pathv[i])) { /* golden/models/: the model-golden reader's */
            struct mc_stack_golden sg;
            if (mc_stack_golden_load(gl.gl_pathv[i], &sg, &err) != MC_ERR_NONE) {
                char msg[MC_ERROR_MSG_LEN];
                snprintf(msg, sizeof msg, "%s", err.msg);
                globfree(&gl);
                fail_msg("checked-in model golden does not load: %s", msg);
            }
            print_message("[ loaded ] %s: model %s, %lld layers B=%lld L=%lld G=%lld\n", gl.gl_pathv[i],
                          sg.config.model_type, (long long)sg.config.n_layers, (long long)sg.batch, (long long)sg.len,
                          (long long)sg.greedy_steps);
            assert_no_open_hdf5_objects();
            mc_stack_golden_free(&sg);
            continue;
        }
        enum mc_err_code code = mc_golden_load(gl.gl_pathv[i], &g, &err);
        if (code != MC_ERR_NONE) {
            char msg[MC_ERROR_MSG_LEN];
            snprintf(msg, sizeof msg, "%s", err.msg);
            globfree(&gl);
            fail_msg("checked-in golden does not load: %s", msg);
        }
        print_message("[ loaded ] %s: %s B=%lld L=%lld T=%lld, %d weights\n", gl.gl_pathv[i],
                      mc_family_name(g.config.family), (long long)g.batch, (long long)g.len,
                      (long long)g.n_positions, g.n_weights);
        assert_no_open_hdf5_objects();
        mc_golden_free(&g);
    }
    globfree(&gl);
}

int main(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the writer probes paths that may not exist */
    struct CMUnitTest tests[6 + N_BAD] = {
        cmocka_unit_test_setup_teardown(test_round_trip, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_round_trip_families, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_attention_config_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_variants, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_error_kept, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_checked_in_goldens),
    };
    for (size_t i = 0; i < N_BAD; i++) {
        struct CMUnitTest t = cmocka_unit_test_prestate_setup_teardown(test_bad_case, fixture_setup, fixture_teardown,
                                                                       (void *)&bad_cases[i]);
        t.name = bad_cases[i].name;
        tests[6 + i] = t;
    }
    return cmocka_run_group_tests_name("golden", tests, NULL, NULL);
}
