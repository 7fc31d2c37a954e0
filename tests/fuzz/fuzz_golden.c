/*
 * fuzz_golden.c — libFuzzer target for the golden reader (harness/src/golden/golden.c, h5read.c).
 *
 * Structured mode (the default): the input is an edit script applied with the HDF5 API to one of
 * the seed goldens (the .h5 files of tests/fuzz/corpus_golden, picked by the first byte): set, retype or delete
 * attributes, delete links, replace datasets with other ranks, shapes, types and values (NaN and
 * Inf included), declare huge datasets without data, poke values, and re-stamp content_sha256 so
 * that edited values can load. The file stays valid HDF5, so what is fuzzed is mixcheck's reader,
 * not HDF5's parser. Raw mode (MC_FUZZ_GOLDEN_RAW=1): the input bytes are the file; this explores
 * libhdf5 itself, which hangs, leaks and asks for absurd memory on damaged files (docs/gate.md "Fuzzing").
 *
 * Either way the file is a temporary one per process, and the target traps when a load fails
 * without a message naming the file or leaves the golden non-empty, when a load succeeds with sizes
 * that contradict each other, or when HDF5 objects are left open.
 */
#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "golden/golden.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SEEDS 16

static char path[64];
static struct {
    unsigned char *bytes;
    size_t len;
} seeds[MAX_SEEDS];
static int n_seeds;
static int raw_mode;

static const char *const LINKS[] = {
    "/config", "/weights", "/inputs", "/expected", "/inputs/hidden_states", "/inputs/attention_mask",
    "/expected/output", "/expected/state_positions", "/expected/conv_state", "/expected/recurrent_state",
    "/weights/in_proj.weight", "/weights/conv1d.weight", "/weights/conv.weight", "/weights/A_log",
    "/weights/dt_bias", "/weights/out_proj.weight", "/weights/D", "/weights/norm.weight", "/extra",
    "/weights/in_proj_qkv.weight", "/weights/x_proj.weight",
};
static const char *const ATTRS[][2] = {
    {"/", "format"}, {"/", "format_version"}, {"/", "family"}, {"/", "seed"}, {"/", "generator"},
    {"/", "generator_version"}, {"/", "content_sha256"}, {"/", "name"}, {"/config", "hidden_size"},
    {"/config", "num_heads"}, {"/config", "head_dim"}, {"/config", "state_size"}, {"/config", "n_groups"},
    {"/config", "conv_kernel"}, {"/config", "conv_L_cache"}, {"/config", "conv_bias"}, {"/config", "use_bias"},
    {"/config", "time_step_limit"}, {"/config", "layer_norm_epsilon"}, {"/config", "intermediate_size"},
    {"/config", "time_step_rank"}, {"/config", "linear_num_key_heads"}, {"/config", "linear_num_value_heads"},
    {"/config", "linear_key_head_dim"}, {"/config", "linear_value_head_dim"}, {"/config", "projection_layout"},
    {"/config", "norm_group_size"}, {"/config", "chunk_size"},
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

struct in {
    const uint8_t *p;
    size_t n;
};

static unsigned take(struct in *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static uint64_t take64(struct in *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | take(in);
    return v;
}

static double take_double(struct in *in)
{
    static const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 1e300, 5e-324, 0.5};
    unsigned k = take(in);
    if (k < 2 * COUNT(special))
        return special[k % COUNT(special)];
    uint64_t bits = take64(in);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static void remove_file(void)
{
    if (path[0] != '\0')
        unlink(path);
}

static void seeds_load(void)
{
    DIR *d = opendir(MC_SOURCE_DIR "/tests/fuzz/corpus_golden");
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL && n_seeds < MAX_SEEDS) {
        char p[512];
        if (strstr(de->d_name, ".h5") == NULL)
            continue;
        snprintf(p, sizeof p, "%s/%s", MC_SOURCE_DIR "/tests/fuzz/corpus_golden", de->d_name);
        FILE *f = fopen(p, "rb");
        if (f == NULL)
            continue;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        seeds[n_seeds].bytes = malloc((size_t)len);
        if (seeds[n_seeds].bytes != NULL && fread(seeds[n_seeds].bytes, 1, (size_t)len, f) == (size_t)len)
            seeds[n_seeds++].len = (size_t)len;
        fclose(f);
    }
    if (d != NULL)
        closedir(d);
    if (n_seeds == 0)
        abort();
}

static void write_file(const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
}

static hid_t pick_type(unsigned k)
{
    switch (k % 8) {
    case 0:
        return H5T_IEEE_F64LE;
    case 1:
        return H5T_IEEE_F32LE;
    case 2:
        return H5T_STD_I64LE;
    case 3:
        return H5T_STD_I32LE;
    case 4:
        return H5T_STD_U8LE;
    case 5:
        return H5T_STD_I8LE;
    case 6:
        return H5T_IEEE_F64BE;
    default:
        return H5T_STD_U64LE;
    }
}

static void attr_set(hid_t f, const char *obj, const char *name, hid_t type, int n, const void *buf, hid_t mtype)
{
    if (H5Lexists(f, obj, H5P_DEFAULT) <= 0 && strcmp(obj, "/") != 0)
        return;
    if (H5Aexists_by_name(f, obj, name, H5P_DEFAULT) > 0)
        H5Adelete_by_name(f, obj, name, H5P_DEFAULT);
    hsize_t dim = (hsize_t)n;
    hid_t space = n == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dim, NULL);
    hid_t a = H5Acreate_by_name(f, obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        H5Awrite(a, mtype, buf);
        H5Aclose(a);
    }
    H5Sclose(space);
}

static void str_attr_set(hid_t f, const char *obj, const char *name, struct in *in)
{
    char s[80];
    unsigned len = take(in) % sizeof s;
    for (unsigned i = 0; i < len; i++)
        s[i] = (char)take(in);
    s[len] = '\0';
    hid_t t = H5Tcopy(H5T_C_S1);
    const char *p = s;
    if (take(in) & 1) {
        H5Tset_size(t, H5T_VARIABLE);
        H5Tset_cset(t, H5T_CSET_UTF8);
        attr_set(f, obj, name, t, 0, &p, t);
    } else {
        H5Tset_size(t, len ? len : 1);
        attr_set(f, obj, name, t, 0, s, t);
    }
    H5Tclose(t);
}

static void dataset_replace(hid_t f, const char *name, struct in *in, int huge)
{
    int rank = (int)(take(in) % 7);
    hsize_t dims[6], chunk[6];
    size_t n = 1;
    for (int i = 0; i < rank; i++) {
        dims[i] = huge ? (hsize_t)(take64(in) % ((uint64_t)1 << 40)) + 1 : take(in) % 9 + (i < 2);
        chunk[i] = 1;
        n *= huge ? 1 : (size_t)dims[i];
    }
    if (H5Lexists(f, name, H5P_DEFAULT) > 0)
        H5Ldelete(f, name, H5P_DEFAULT);
    hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    if (huge && rank > 0)
        H5Pset_chunk(dcpl, rank, chunk);
    hid_t type = pick_type(take(in));
    hid_t ds = H5Dcreate2(f, name, type, space, lcpl, dcpl, H5P_DEFAULT);
    if (ds >= 0 && !huge && n <= 4096) {
        double *buf = malloc(n * sizeof *buf);
        if (buf != NULL) {
            for (size_t i = 0; i < n; i++)
                buf[i] = in->n ? take_double(in) : (double)i / 4;
            H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
            free(buf);
        }
    }
    if (ds >= 0)
        H5Dclose(ds);
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    H5Sclose(space);
}

static void dataset_poke(hid_t f, const char *name, struct in *in)
{
    if (H5Lexists(f, "/expected", H5P_DEFAULT) <= 0 || H5Lexists(f, name, H5P_DEFAULT) <= 0)
        return;
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0)
        return;
    hid_t space = H5Dget_space(ds);
    hssize_t n = H5Sget_simple_extent_npoints(space);
    if (n > 0 && n <= 1 << 20) {
        double *buf = malloc((size_t)n * sizeof *buf);
        if (buf != NULL && H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0) {
            buf[take64(in) % (uint64_t)n] = take_double(in);
            H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        }
        free(buf);
    }
    H5Sclose(space);
    H5Dclose(ds);
}

static void restamp(void)
{
    char hex[MC_SHA256_HEX_LEN + 1];
    struct mc_error err = {0};
    if (mc_golden_file_content_sha256(path, hex, &err) != MC_ERR_NONE)
        return;
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return;
    hid_t t = H5Tcopy(H5T_C_S1);
    const char *p = hex;
    H5Tset_size(t, H5T_VARIABLE);
    attr_set(f, "/", "content_sha256", t, 0, &p, t);
    H5Tclose(t);
    H5Fclose(f);
}

/* Applies the edit script in `in` to the file at path. */
static void edit(struct in *in)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        abort();
    int stamp = 0;
    for (int ops = 0; in->n > 0 && ops < 16; ops++) {
        unsigned op = take(in) % 10;
        const char *link = LINKS[take(in) % COUNT(LINKS)];
        const char *const *attr = ATTRS[take(in) % COUNT(ATTRS)];
        switch (op) {
        case 0: {
            int64_t v = (int64_t)take64(in);
            attr_set(f, attr[0], attr[1], pick_type(take(in)), 0, &v, H5T_NATIVE_INT64);
            break;
        }
        case 1: {
            double v[3] = {take_double(in), take_double(in), take_double(in)};
            attr_set(f, attr[0], attr[1], pick_type(take(in)), (int)(take(in) % 4), v, H5T_NATIVE_DOUBLE);
            break;
        }
        case 2:
            if (H5Lexists(f, link, H5P_DEFAULT) > 0)
                H5Ldelete(f, link, H5P_DEFAULT);
            break;
        case 3:
            dataset_replace(f, link, in, 0);
            break;
        case 4:
            dataset_replace(f, link, in, 1);
            break;
        case 5:
            dataset_poke(f, link, in);
            break;
        case 6:
            str_attr_set(f, attr[0], attr[1], in);
            break;
        case 7:
            if (H5Aexists_by_name(f, attr[0], attr[1], H5P_DEFAULT) > 0)
                H5Adelete_by_name(f, attr[0], attr[1], H5P_DEFAULT);
            break;
        default:
            stamp = 1;
            break;
        }
    }
    H5Fclose(f);
    if (stamp)
        restamp();
}

static void check_loaded(const struct mc_golden *g)
{
    if (g->batch < 1 || g->len < 1 || g->hidden_states.ndim != 3 || g->hidden_states.dims[0] != g->batch ||
        g->hidden_states.dims[1] != g->len || g->output.ndim != 3 || g->n_positions < 1 ||
        g->state_positions == NULL || g->conv_state.dims[0] != g->n_positions)
        __builtin_trap();
    for (int64_t i = 0; i < g->n_positions; i++)
        if (g->state_positions[i] < 0 || g->state_positions[i] > g->len ||
            (i > 0 && g->state_positions[i] <= g->state_positions[i - 1]))
            __builtin_trap();
    for (int64_t i = 0; i < mc_array_elems(&g->output); i++)
        if (!isfinite(g->output.data[i]))
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (path[0] == '\0') {
        snprintf(path, sizeof path, "/tmp/mc_fuzz_golden_XXXXXX");
        int fd = mkstemp(path);
        if (fd < 0)
            abort();
        close(fd);
        atexit(remove_file);
        const char *raw = getenv("MC_FUZZ_GOLDEN_RAW");
        raw_mode = raw != NULL && raw[0] == '1';
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        if (!raw_mode)
            seeds_load();
    }
    if (raw_mode) {
        write_file(data, size);
    } else {
        struct in in = {data, size};
        unsigned s = take(&in) % (unsigned)n_seeds;
        write_file(seeds[s].bytes, seeds[s].len);
        edit(&in);
    }
    struct mc_golden g;
    struct mc_error err = {0};
    enum mc_err_code rc = mc_golden_load(path, &g, &err);
    if (rc != MC_ERR_NONE) {
        static const struct mc_golden zero;
        if (err.code != rc || strncmp(err.msg, path, strlen(path)) != 0 || memcmp(&g, &zero, sizeof g) != 0)
            __builtin_trap();
    } else {
        check_loaded(&g);
    }
    mc_golden_free(&g);
    if (H5Fget_obj_count((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL) != 0)
        __builtin_trap();
    return 0;
}
