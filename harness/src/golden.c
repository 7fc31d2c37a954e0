/*
 * golden.c — see golden.h. One typed read worker (read_values) behind two front-ends, one for
 * attributes and one for datasets; every rank, shape and type is checked against what the
 * configuration implies before any data is read or any buffer is sized from the file. HDF5's
 * automatic error printing is off while we load, and its error stack is folded into our message.
 */
#include "golden.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#define GOLDEN_MAX_BATCH 4096
#define GOLDEN_MAX_LEN 1000000
/* A forged header must not make us allocate absurd memory: per dataset and per file, in elements. */
#define GOLDEN_MAX_ELEMS ((int64_t)1 << 26)
#define GOLDEN_MAX_TOTAL_ELEMS ((int64_t)1 << 28)
#define GOLDEN_MAX_STRING 4096

struct reader {
    const char *path;
    hid_t file;
    int64_t total_elems; /* elements allocated so far, against GOLDEN_MAX_TOTAL_ELEMS */
    struct mc_error err; /* our own, copied out once at the end */
};

/* What a value must be on disk; everything is read as double (floats) or int64_t (integers). */
enum want {
    WANT_FLOAT,  /* float32 or float64 */
    WANT_F64,    /* float64 only (expected values) */
    WANT_NUMBER, /* float or integer */
    WANT_INT,    /* integer, or an enum over an integer (h5py's numpy bool) */
};

/* Dataset shape requirement: dims[i] > 0 is exact; dims[i] == 0 means any size in [1, max[i]]. */
struct shape_rule {
    int ndim;
    int64_t dims[MC_MAX_DIMS];
    int64_t max[MC_MAX_DIMS];
    const char *names[MC_MAX_DIMS]; /* printed for free dims in messages */
    const char *source;             /* what implies the shape, for messages */
};

int64_t mc_array_elems(const struct mc_array *a)
{
    if (a == NULL || a->ndim <= 0)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++)
        n *= a->dims[i];
    return n;
}

/* ---- errors ------------------------------------------------------------------------------------ */

struct stack_text {
    char *buf;
    size_t cap;
    size_t len;
    int frames;
};

static herr_t stack_frame(unsigned n, const H5E_error2_t *e, void *data)
{
    struct stack_text *t = data;
    if (t->frames >= 2 || e->desc == NULL || e->desc[0] == '\0' || t->len + 1 >= t->cap)
        return 0;
    int w = snprintf(t->buf + t->len, t->cap - t->len, "%s%s", t->frames ? "; " : "", e->desc);
    if (w > 0)
        t->len += (size_t)w < t->cap - t->len ? (size_t)w : t->cap - t->len - 1;
    t->frames++;
    return 0;
}

/* The innermost two descriptions of HDF5's current error stack, which is cleared. */
static void h5_stack_describe(char *buf, size_t cap)
{
    struct stack_text t = {buf, cap, 0, 0};
    buf[0] = '\0';
    hid_t stack = H5Eget_current_stack();
    if (stack < 0)
        return;
    H5Ewalk2(stack, H5E_WALK_UPWARD, stack_frame, &t);
    H5Eclose_stack(stack);
    if (buf[0] == '\0')
        snprintf(buf, cap, "no detail");
}

/* Records "<file>: <obj>: <what>" (or "<file>: <what>" when obj is NULL). */
static enum mc_err_code fail(struct reader *r, enum mc_err_code code, const char *obj, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static enum mc_err_code fail(struct reader *r, enum mc_err_code code, const char *obj, const char *fmt, ...)
{
    char what[MC_ERROR_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (obj == NULL)
        return mc_error_set(&r->err, code, "%s: %s", r->path, what);
    return mc_error_set(&r->err, code, "%s: %s: %s", r->path, obj, what);
}

/* As fail, for an HDF5 call that failed: appends HDF5's own explanation. */
static enum mc_err_code fail_h5(struct reader *r, const char *obj, const char *what)
{
    char stack[768];
    h5_stack_describe(stack, sizeof stack);
    return fail(r, MC_ERR_INPUT, obj, "%s (HDF5: %s)", what, stack);
}

static enum mc_err_code fail_nomem(struct reader *r, const char *obj)
{
    return fail(r, MC_ERR_NOMEM, obj, "out of memory");
}

static void dims_format(char *buf, size_t cap, int ndim, const hsize_t *dims)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < ndim && len + 1 < cap; i++) {
        int w = snprintf(buf + len, cap - len, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

static void rule_format(char *buf, size_t cap, const struct shape_rule *rule)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < rule->ndim && len + 1 < cap; i++) {
        int w;
        if (rule->dims[i] > 0)
            w = snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)rule->dims[i]);
        else
            w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", rule->names[i] ? rule->names[i] : "*");
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

/* "[i0, i1, ...]" for the flat row-major index `flat` of an array with dims. */
static void index_format(char *buf, size_t cap, int ndim, const int64_t *dims, int64_t flat)
{
    int64_t idx[MC_MAX_DIMS] = {0};
    for (int i = ndim - 1; i >= 0; i--) {
        idx[i] = dims[i] > 0 ? flat % dims[i] : 0;
        flat = dims[i] > 0 ? flat / dims[i] : 0;
    }
    size_t len = 0;
    int w = snprintf(buf, cap, "[");
    len = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < ndim && len + 1 < cap; i++) {
        w = snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)idx[i]);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (len + 1 < cap)
        snprintf(buf + len, cap - len, "]");
}

static enum mc_err_code check_finite(struct reader *r, const char *label, const struct mc_array *a)
{
    int64_t n = mc_array_elems(a);
    for (int64_t i = 0; i < n; i++) {
        double v = a->data[i];
        if (isfinite(v))
            continue;
        char idx[160];
        index_format(idx, sizeof idx, a->ndim, a->dims, i);
        return fail(r, MC_ERR_INPUT, label, "%s at %s", isnan(v) ? "NaN" : v > 0 ? "Inf" : "-Inf", idx);
    }
    return MC_ERR_NONE;
}

/* ---- the typed read worker --------------------------------------------------------------------- */

static const char *type_describe(hid_t type, char *buf, size_t cap)
{
    size_t size = H5Tget_size(type);
    switch (H5Tget_class(type)) {
    case H5T_FLOAT:
        snprintf(buf, cap, "float%zu", size * 8);
        break;
    case H5T_INTEGER:
        snprintf(buf, cap, "%sint%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", size * 8);
        break;
    case H5T_STRING:
        snprintf(buf, cap, "string");
        break;
    case H5T_ENUM:
        snprintf(buf, cap, "enum");
        break;
    case H5T_COMPOUND:
        snprintf(buf, cap, "compound");
        break;
    default:
        snprintf(buf, cap, "a non-numeric type");
        break;
    }
    return buf;
}

/* 1 when an enum over an integer base (how h5py stores numpy bool). */
static int is_int_enum(hid_t type)
{
    if (H5Tget_class(type) != H5T_ENUM)
        return 0;
    hid_t super = H5Tget_super(type);
    if (super < 0)
        return 0;
    int ok = H5Tget_class(super) == H5T_INTEGER;
    H5Tclose(super);
    return ok;
}

static enum mc_err_code type_check(struct reader *r, const char *label, hid_t ftype, enum want want)
{
    H5T_class_t cls = H5Tget_class(ftype);
    size_t size = H5Tget_size(ftype);
    char got[32];
    type_describe(ftype, got, sizeof got);
    switch (want) {
    case WANT_F64:
        if (cls != H5T_FLOAT || size != 8)
            return fail(r, MC_ERR_INPUT, label, "expected values must be float64 (got %s)", got);
        return MC_ERR_NONE;
    case WANT_FLOAT:
        if (cls != H5T_FLOAT || (size != 4 && size != 8))
            return fail(r, MC_ERR_INPUT, label, "must be float32 or float64 (got %s)", got);
        return MC_ERR_NONE;
    case WANT_NUMBER:
        if ((cls != H5T_FLOAT || (size != 4 && size != 8)) && cls != H5T_INTEGER)
            return fail(r, MC_ERR_INPUT, label, "must be a number (got %s)", got);
        return MC_ERR_NONE;
    case WANT_INT:
        if (cls != H5T_INTEGER && !is_int_enum(ftype))
            return fail(r, MC_ERR_INPUT, label, "must be an integer (got %s)", got);
        return MC_ERR_NONE;
    }
    return fail(r, MC_ERR_INTERNAL, label, "unknown type requirement");
}

/*
 * Reads the n values of obj (an attribute when is_attr, else a whole dataset) whose file type is
 * ftype into buf, converted to double (WANT_FLOAT/F64/NUMBER) or int64_t (WANT_INT). buf holds n
 * 8-byte elements. The type must have passed type_check.
 */
static enum mc_err_code read_values(struct reader *r, const char *label, hid_t obj, int is_attr, hid_t ftype,
                                    enum want want, size_t n, void *buf)
{
    hid_t mem = H5I_INVALID_HID, super = H5I_INVALID_HID;
    herr_t st;
    if (want == WANT_INT && H5Tget_class(ftype) == H5T_ENUM) {
        /* No enum -> integer conversion path: read the enum as stored, then convert its base type. */
        mem = H5Tget_native_type(ftype, H5T_DIR_ASCEND);
        super = mem >= 0 ? H5Tget_super(mem) : H5I_INVALID_HID;
        if (super < 0 || H5Tget_size(mem) > 8) {
            fail_h5(r, label, "cannot read the enum type");
            goto done;
        }
        st = is_attr ? H5Aread(obj, mem, buf) : H5Dread(obj, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        if (st >= 0)
            st = H5Tconvert(super, H5T_NATIVE_INT64, n, buf, NULL, H5P_DEFAULT);
    } else {
        hid_t native = want == WANT_INT ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE;
        st = is_attr ? H5Aread(obj, native, buf) : H5Dread(obj, native, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    }
    if (st < 0)
        fail_h5(r, label, "cannot read");
done:
    if (super >= 0)
        H5Tclose(super);
    if (mem >= 0)
        H5Tclose(mem);
    return r->err.code;
}

/* ---- attributes -------------------------------------------------------------------------------- */

static void attr_label(char *buf, size_t cap, const char *obj, const char *name)
{
    snprintf(buf, cap, "%s/%s", strcmp(obj, "/") == 0 ? "" : obj, name);
}

/* Opens attribute obj/name, refusing a missing one. */
static enum mc_err_code attr_open(struct reader *r, const char *label, const char *obj, const char *name, hid_t *attr)
{
    htri_t exists = H5Aexists_by_name(r->file, obj, name, H5P_DEFAULT);
    if (exists < 0)
        return fail_h5(r, label, "cannot look up the attribute");
    if (exists == 0)
        return fail(r, MC_ERR_INPUT, label, "missing attribute");
    *attr = H5Aopen_by_name(r->file, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    if (*attr < 0)
        return fail_h5(r, label, "cannot open the attribute");
    return MC_ERR_NONE;
}

/* Reads a numeric attribute holding exactly n values (a scalar, or a 1-D array of n). */
static enum mc_err_code attr_read_numbers(struct reader *r, const char *obj, const char *name, enum want want,
                                          size_t n, void *out)
{
    char label[512];
    attr_label(label, sizeof label, obj, name);
    hid_t attr = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    if (attr_open(r, label, obj, name, &attr))
        goto done;
    if ((type = H5Aget_type(attr)) < 0 || (space = H5Aget_space(attr)) < 0) {
        fail_h5(r, label, "cannot inspect the attribute");
        goto done;
    }
    H5S_class_t sc = H5Sget_simple_extent_type(space);
    int ndims = H5Sget_simple_extent_ndims(space);
    hssize_t npoints = H5Sget_simple_extent_npoints(space);
    int shape_ok = (n == 1 && (sc == H5S_SCALAR || (sc == H5S_SIMPLE && ndims == 1 && npoints == 1))) ||
                   (n > 1 && sc == H5S_SIMPLE && ndims == 1 && npoints == (hssize_t)n);
    if (!shape_ok) {
        if (n == 1)
            fail(r, MC_ERR_INPUT, label, "must be a scalar (got %lld values)", (long long)npoints);
        else
            fail(r, MC_ERR_INPUT, label, "must be an array of %zu values (got %lld)", n, (long long)npoints);
        goto done;
    }
    if (type_check(r, label, type, want))
        goto done;
    read_values(r, label, attr, 1, type, want, n, out);
done:
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (attr >= 0)
        H5Aclose(attr);
    return r->err.code;
}

/* Reads a scalar string attribute, fixed or variable length, into a malloc'd NUL-terminated copy. */
static enum mc_err_code attr_read_string(struct reader *r, const char *obj, const char *name, char **out)
{
    char label[512];
    attr_label(label, sizeof label, obj, name);
    hid_t attr = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID, mem = H5I_INVALID_HID;
    char *vlen = NULL, *fixed = NULL;
    *out = NULL;
    if (attr_open(r, label, obj, name, &attr))
        goto done;
    if ((type = H5Aget_type(attr)) < 0 || (space = H5Aget_space(attr)) < 0) {
        fail_h5(r, label, "cannot inspect the attribute");
        goto done;
    }
    if (H5Tget_class(type) != H5T_STRING) {
        char got[32];
        fail(r, MC_ERR_INPUT, label, "must be a string (got %s)", type_describe(type, got, sizeof got));
        goto done;
    }
    if (H5Sget_simple_extent_npoints(space) != 1) {
        fail(r, MC_ERR_INPUT, label, "must be a single string");
        goto done;
    }
    htri_t is_vlen = H5Tis_variable_str(type);
    size_t size = H5Tget_size(type);
    if (is_vlen < 0 || (!is_vlen && size > GOLDEN_MAX_STRING)) {
        fail(r, MC_ERR_INPUT, label, "unsupported string type");
        goto done;
    }
    /* The library does not convert between character sets: read in the stored one. */
    if ((mem = H5Tcopy(H5T_C_S1)) < 0 || H5Tset_cset(mem, H5Tget_cset(type)) < 0 ||
        H5Tset_size(mem, is_vlen ? H5T_VARIABLE : size + 1) < 0 ||
        (!is_vlen && H5Tset_strpad(mem, H5T_STR_NULLTERM) < 0)) {
        fail_h5(r, label, "cannot build the string type");
        goto done;
    }
    if (is_vlen) {
        if (H5Aread(attr, mem, &vlen) < 0) {
            fail_h5(r, label, "cannot read");
            goto done;
        }
        *out = strdup(vlen ? vlen : "");
    } else {
        fixed = calloc(size + 1, 1);
        if (fixed == NULL) {
            fail_nomem(r, label);
            goto done;
        }
        if (H5Aread(attr, mem, fixed) < 0) {
            fail_h5(r, label, "cannot read");
            goto done;
        }
        fixed[size] = '\0';
        *out = strdup(fixed);
    }
    if (*out == NULL)
        fail_nomem(r, label);
done:
    free(fixed);
    if (vlen)
        H5free_memory(vlen);
    if (mem >= 0)
        H5Tclose(mem);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (attr >= 0)
        H5Aclose(attr);
    return r->err.code;
}

/* ---- datasets ---------------------------------------------------------------------------------- */

/* 1 when every component of the absolute path exists, 0 when one does not, -1 on error (recorded). */
static int link_exists(struct reader *r, const char *path)
{
    char buf[512];
    size_t n = strlen(path);
    if (n >= sizeof buf) {
        fail(r, MC_ERR_INTERNAL, path, "path too long");
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        htri_t e = H5Lexists(r->file, buf, H5P_DEFAULT);
        buf[i] = c;
        if (e < 0) {
            fail_h5(r, path, "cannot look up");
            return -1;
        }
        if (e == 0)
            return 0;
    }
    return 1;
}

/*
 * Reads dataset `name` into a malloc'd buffer of 8-byte elements (double, or int64_t for WANT_INT)
 * after checking it is present, of the rule's rank and dims, within the size limits and of a type
 * `want` accepts. dims receives its shape.
 */
static enum mc_err_code dataset_read(struct reader *r, const char *name, enum want want, const struct shape_rule *rule,
                                     int64_t dims[MC_MAX_DIMS], void **out)
{
    hid_t ds = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    void *buf = NULL;
    *out = NULL;
    int e = link_exists(r, name);
    if (e < 0)
        goto done;
    if (e == 0) {
        fail(r, MC_ERR_INPUT, name, "missing dataset");
        goto done;
    }
    if ((ds = H5Dopen2(r->file, name, H5P_DEFAULT)) < 0) {
        fail_h5(r, name, "cannot open as a dataset");
        goto done;
    }
    if ((type = H5Dget_type(ds)) < 0 || (space = H5Dget_space(ds)) < 0) {
        fail_h5(r, name, "cannot inspect the dataset");
        goto done;
    }
    int ndim = H5Sget_simple_extent_ndims(space);
    hsize_t hd[H5S_MAX_RANK];
    if (H5Sget_simple_extent_type(space) != H5S_SIMPLE || ndim < 1 || ndim > H5S_MAX_RANK ||
        H5Sget_simple_extent_dims(space, hd, NULL) < 0) {
        fail(r, MC_ERR_INPUT, name, "must be an array (got a scalar or empty dataspace)");
        goto done;
    }
    int match = ndim == rule->ndim;
    for (int i = 0; match && i < ndim; i++)
        match = rule->dims[i] > 0 ? hd[i] == (hsize_t)rule->dims[i] : hd[i] >= 1 && hd[i] <= (hsize_t)rule->max[i];
    if (!match) {
        char got[256], want_dims[256];
        dims_format(got, sizeof got, ndim, hd);
        rule_format(want_dims, sizeof want_dims, rule);
        int free_dims = 0;
        for (int i = 0; i < rule->ndim; i++)
            free_dims += rule->dims[i] == 0;
        if (ndim == rule->ndim && free_dims > 0) {
            for (int i = 0; i < ndim; i++)
                if (rule->dims[i] == 0 && (hd[i] < 1 || hd[i] > (hsize_t)rule->max[i])) {
                    fail(r, MC_ERR_INPUT, name, "shape [%s]: %s = %llu is out of range [1, %lld]", got,
                         rule->names[i] ? rule->names[i] : "dimension", (unsigned long long)hd[i],
                         (long long)rule->max[i]);
                    goto done;
                }
        }
        fail(r, MC_ERR_INPUT, name, "shape [%s] does not match %s (expected [%s])", got, rule->source, want_dims);
        goto done;
    }
    int64_t elems = 1;
    for (int i = 0; i < ndim; i++) {
        if (hd[i] > (hsize_t)GOLDEN_MAX_ELEMS || elems > GOLDEN_MAX_ELEMS / (int64_t)hd[i]) {
            char got[256];
            dims_format(got, sizeof got, ndim, hd);
            fail(r, MC_ERR_INPUT, name, "shape [%s] is too large (this reader accepts at most %lld elements)", got,
                 (long long)GOLDEN_MAX_ELEMS);
            goto done;
        }
        elems *= (int64_t)hd[i];
        dims[i] = (int64_t)hd[i];
    }
    if (r->total_elems + elems > GOLDEN_MAX_TOTAL_ELEMS) {
        fail(r, MC_ERR_INPUT, name, "the file's datasets are too large (over %lld elements in all)",
             (long long)GOLDEN_MAX_TOTAL_ELEMS);
        goto done;
    }
    if (type_check(r, name, type, want))
        goto done;
    buf = malloc((size_t)elems * 8);
    if (buf == NULL) {
        fail_nomem(r, name);
        goto done;
    }
    if (read_values(r, name, ds, 0, type, want, (size_t)elems, buf))
        goto done;
    r->total_elems += elems;
    *out = buf;
    buf = NULL;
done:
    free(buf);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (ds >= 0)
        H5Dclose(ds);
    return r->err.code;
}

/* A float dataset into an mc_array, NaN/Inf refused. */
static enum mc_err_code array_read(struct reader *r, const char *name, enum want want, const struct shape_rule *rule,
                                   struct mc_array *a)
{
    void *data = NULL;
    int64_t dims[MC_MAX_DIMS] = {0};
    if (dataset_read(r, name, want, rule, dims, &data))
        return r->err.code;
    a->ndim = rule->ndim;
    memcpy(a->dims, dims, sizeof a->dims);
    a->data = data;
    return check_finite(r, name, a);
}

/* ---- the file's parts -------------------------------------------------------------------------- */

static enum mc_err_code read_header(struct reader *r, struct mc_golden *g)
{
    char *format = NULL, *family = NULL;
    int64_t version = 0;
    if (attr_read_string(r, "/", "format", &format))
        goto done;
    if (strcmp(format, MC_GOLDEN_FORMAT) != 0) {
        fail(r, MC_ERR_INPUT, "/format", "is '%.200s', not '%s': not a mixcheck golden", format, MC_GOLDEN_FORMAT);
        goto done;
    }
    if (attr_read_numbers(r, "/", "format_version", WANT_INT, 1, &version))
        goto done;
    if (version != MC_GOLDEN_FORMAT_VERSION) {
        fail(r, MC_ERR_INPUT, "/format_version", "format version %lld is not supported (this reader reads version %d)",
             (long long)version, MC_GOLDEN_FORMAT_VERSION);
        goto done;
    }
    if (attr_read_string(r, "/", "family", &family))
        goto done;
    if (mc_family_from_name(family, &g->config.family) != 0) {
        fail(r, MC_ERR_INPUT, "/family", "unknown family '%.200s' (expected mamba2, mamba1, gdn or shortconv)", family);
        goto done;
    }
    if (attr_read_string(r, "/", "generator", &g->generator) ||
        attr_read_string(r, "/", "generator_version", &g->generator_version) ||
        attr_read_numbers(r, "/", "seed", WANT_INT, 1, &g->seed))
        goto done;
done:
    free(format);
    free(family);
    return r->err.code;
}

static enum mc_err_code read_config_field(struct reader *r, const struct mc_config_field *f, void *dst)
{
    char label[512];
    attr_label(label, sizeof label, "/config", f->name);
    switch (f->kind) {
    case MC_FIELD_INT:
        return attr_read_numbers(r, "/config", f->name, WANT_INT, 1, dst);
    case MC_FIELD_BOOL: {
        int64_t v = 0;
        if (attr_read_numbers(r, "/config", f->name, WANT_INT, 1, &v))
            return r->err.code;
        if (v != 0 && v != 1)
            return fail(r, MC_ERR_INPUT, label, "must be 0 or 1 (got %lld)", (long long)v);
        *(int32_t *)dst = (int32_t)v;
        return MC_ERR_NONE;
    }
    case MC_FIELD_DOUBLE:
    case MC_FIELD_DOUBLE_PAIR: {
        size_t n = f->kind == MC_FIELD_DOUBLE ? 1 : 2;
        double v[2] = {0.0, 0.0};
        if (attr_read_numbers(r, "/config", f->name, WANT_NUMBER, n, v))
            return r->err.code;
        for (size_t i = 0; i < n; i++)
            if (isnan(v[i]))
                return fail(r, MC_ERR_INPUT, label, "is NaN");
        memcpy(dst, v, n * sizeof(double));
        return MC_ERR_NONE;
    }
    case MC_FIELD_GDN_LAYOUT: {
        char *s = NULL;
        if (attr_read_string(r, "/config", f->name, &s))
            return r->err.code;
        if (strcmp(s, "qwen3_5") == 0)
            *(int32_t *)dst = MC_GDN_LAYOUT_QWEN3_5;
        else if (strcmp(s, "qwen3_next") == 0)
            *(int32_t *)dst = MC_GDN_LAYOUT_QWEN3_NEXT;
        else
            fail(r, MC_ERR_INPUT, label, "unknown layout '%.200s' (expected qwen3_5 or qwen3_next)", s);
        free(s);
        return r->err.code;
    }
    }
    return fail(r, MC_ERR_INTERNAL, label, "unknown field kind");
}

static enum mc_err_code read_config(struct reader *r, struct mc_golden *g)
{
    size_t count = 0;
    const struct mc_config_field *fields = mc_family_config_fields(g->config.family, &count);
    int e = link_exists(r, "/config");
    if (e < 0)
        return r->err.code;
    if (e == 0)
        return fail(r, MC_ERR_INPUT, "/config", "missing group");
    for (size_t i = 0; i < count; i++)
        if (read_config_field(r, &fields[i], (char *)&g->config.u + fields[i].offset))
            return r->err.code;
    if (mc_family_config_validate(&g->config, &r->err))
        mc_error_prefix(&r->err, "%s: /config", r->path);
    return r->err.code;
}

/* Refuses a link under /weights that the configuration does not imply. */
static enum mc_err_code weights_check_extra(struct reader *r, const struct mc_weight_spec *specs, int n)
{
    hid_t grp = H5Gopen2(r->file, "/weights", H5P_DEFAULT);
    char *name = NULL;
    H5G_info_t info;
    if (grp < 0 || H5Gget_info(grp, &info) < 0) {
        fail_h5(r, "/weights", "cannot open as a group");
        goto done;
    }
    for (hsize_t i = 0; i < info.nlinks; i++) {
        ssize_t len = H5Lget_name_by_idx(grp, ".", H5_INDEX_NAME, H5_ITER_INC, i, NULL, 0, H5P_DEFAULT);
        if (len < 0 || len > GOLDEN_MAX_STRING) {
            fail_h5(r, "/weights", "cannot list the group");
            goto done;
        }
        if ((name = malloc((size_t)len + 1)) == NULL) {
            fail_nomem(r, "/weights");
            goto done;
        }
        if (H5Lget_name_by_idx(grp, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, (size_t)len + 1, H5P_DEFAULT) < 0) {
            fail_h5(r, "/weights", "cannot list the group");
            goto done;
        }
        int known = 0;
        for (int k = 0; k < n && !known; k++)
            known = strcmp(name, specs[k].name) == 0;
        if (!known) {
            char label[512];
            snprintf(label, sizeof label, "/weights/%s", name);
            fail(r, MC_ERR_INPUT, label, "not a parameter of this configuration");
            goto done;
        }
        free(name);
        name = NULL;
    }
done:
    free(name);
    if (grp >= 0)
        H5Gclose(grp);
    return r->err.code;
}

static enum mc_err_code read_weights(struct reader *r, struct mc_golden *g)
{
    struct mc_weight_spec specs[MC_FAMILY_MAX_WEIGHTS];
    int n = mc_family_weight_specs(&g->config, specs);
    int e = link_exists(r, "/weights");
    if (e < 0)
        return r->err.code;
    if (e == 0)
        return fail(r, MC_ERR_INPUT, "/weights", "missing group");
    if (weights_check_extra(r, specs, n))
        return r->err.code;
    g->weights = calloc((size_t)n, sizeof *g->weights);
    if (g->weights == NULL)
        return fail_nomem(r, "/weights");
    g->n_weights = n;
    for (int i = 0; i < n; i++) {
        char label[512];
        snprintf(label, sizeof label, "/weights/%s", specs[i].name);
        struct shape_rule rule = {.ndim = specs[i].ndim, .source = "the configuration"};
        memcpy(rule.dims, specs[i].dims, sizeof rule.dims);
        if ((g->weights[i].name = strdup(specs[i].name)) == NULL)
            return fail_nomem(r, label);
        if (array_read(r, label, WANT_FLOAT, &rule, &g->weights[i].value))
            return r->err.code;
    }
    return MC_ERR_NONE;
}

static enum mc_err_code read_inputs(struct reader *r, struct mc_golden *g, const struct mc_family_shape *sh)
{
    struct shape_rule hs = {.ndim = 3,
                            .dims = {0, 0, sh->hidden},
                            .max = {GOLDEN_MAX_BATCH, GOLDEN_MAX_LEN},
                            .names = {"B", "L"},
                            .source = "the configuration"};
    if (array_read(r, "/inputs/hidden_states", WANT_FLOAT, &hs, &g->hidden_states))
        return r->err.code;
    g->batch = g->hidden_states.dims[0];
    g->len = g->hidden_states.dims[1];

    const char *name = "/inputs/attention_mask";
    int e = link_exists(r, name);
    if (e <= 0)
        return r->err.code;
    struct shape_rule mr = {.ndim = 2, .dims = {g->batch, g->len}, .source = "/inputs/hidden_states"};
    int64_t dims[MC_MAX_DIMS], *values = NULL;
    if (dataset_read(r, name, WANT_INT, &mr, dims, (void **)&values))
        return r->err.code;
    size_t n = (size_t)g->batch * (size_t)g->len;
    for (size_t i = 0; i < n; i++) {
        if (values[i] != 0 && values[i] != 1) {
            char idx[160];
            index_format(idx, sizeof idx, 2, dims, (int64_t)i);
            fail(r, MC_ERR_INPUT, name, "value %lld at %s (must be 0 or 1)", (long long)values[i], idx);
            goto done;
        }
    }
    if ((g->mask = malloc(n)) == NULL) {
        fail_nomem(r, name);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        g->mask[i] = (uint8_t)values[i];
done:
    free(values);
    return r->err.code;
}

static enum mc_err_code read_positions(struct reader *r, struct mc_golden *g)
{
    const char *name = "/expected/state_positions";
    struct shape_rule pr = {.ndim = 1, .max = {g->len + 1}, .names = {"T"}, .source = "the inputs"};
    int64_t dims[MC_MAX_DIMS];
    if (dataset_read(r, name, WANT_INT, &pr, dims, (void **)&g->state_positions))
        return r->err.code;
    g->n_positions = dims[0];
    for (int64_t i = 0; i < g->n_positions; i++) {
        int64_t p = g->state_positions[i];
        if (p < 0 || p > g->len)
            return fail(r, MC_ERR_INPUT, name, "position %lld at [%lld] is outside [0, L = %lld]", (long long)p,
                        (long long)i, (long long)g->len);
        if (i > 0 && p <= g->state_positions[i - 1])
            return fail(r, MC_ERR_INPUT, name, "positions must be strictly increasing (%lld at [%lld] after %lld)",
                        (long long)p, (long long)i, (long long)g->state_positions[i - 1]);
    }
    return MC_ERR_NONE;
}

static enum mc_err_code read_expected(struct reader *r, struct mc_golden *g, const struct mc_family_shape *sh)
{
    struct shape_rule out = {.ndim = 3, .dims = {g->batch, g->len, sh->hidden}, .source = "the inputs"};
    if (array_read(r, "/expected/output", WANT_F64, &out, &g->output) || read_positions(r, g))
        return r->err.code;
    struct shape_rule conv = {.ndim = 4,
                              .dims = {g->n_positions, g->batch, sh->conv_channels, sh->conv_kernel},
                              .source = "the configuration and state_positions"};
    if (array_read(r, "/expected/conv_state", WANT_F64, &conv, &g->conv_state))
        return r->err.code;
    const char *name = "/expected/recurrent_state";
    if (sh->state_ndim == 0) {
        int e = link_exists(r, name);
        if (e > 0)
            fail(r, MC_ERR_INPUT, name, "present, but family %s has no recurrent state",
                 mc_family_name(g->config.family));
        return r->err.code;
    }
    struct shape_rule st = {.ndim = 2 + sh->state_ndim,
                            .dims = {g->n_positions, g->batch},
                            .source = "the configuration and state_positions"};
    for (int i = 0; i < sh->state_ndim; i++)
        st.dims[2 + i] = sh->state_dims[i];
    return array_read(r, name, WANT_F64, &st, &g->recurrent_state);
}

static enum mc_err_code golden_open(struct reader *r)
{
    FILE *f = fopen(r->path, "rb");
    if (f == NULL)
        return fail(r, MC_ERR_INPUT, NULL, "cannot open: %s", strerror(errno));
    fclose(f);
#if H5_VERSION_GE(1, 12, 0)
    htri_t is_h5 = H5Fis_accessible(r->path, H5P_DEFAULT);
#else
    htri_t is_h5 = H5Fis_hdf5(r->path);
#endif
    if (is_h5 == 0) {
        H5Eclear2(H5E_DEFAULT);
        return fail(r, MC_ERR_INPUT, NULL, "not an HDF5 file");
    }
    if (is_h5 < 0)
        return fail_h5(r, NULL, "not a readable HDF5 file");
    r->file = H5Fopen(r->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r->file < 0)
        return fail_h5(r, NULL, "cannot open as HDF5 (truncated or damaged?)");
    return MC_ERR_NONE;
}

enum mc_err_code mc_golden_load(const char *path, struct mc_golden *g, struct mc_error *err)
{
    struct reader r = {.path = path, .file = H5I_INVALID_HID};
    mc_error_clear(&r.err);
    memset(g, 0, sizeof *g);

    H5E_auto2_t saved_func = NULL;
    void *saved_data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &saved_func, &saved_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

    if (golden_open(&r))
        goto done;
    if ((g->path = strdup(path)) == NULL) {
        fail_nomem(&r, NULL);
        goto done;
    }
    if (read_header(&r, g) || read_config(&r, g) || read_weights(&r, g))
        goto done;
    struct mc_family_shape shape;
    mc_family_shape(&g->config, &shape);
    if (read_inputs(&r, g, &shape) || read_expected(&r, g, &shape))
        goto done;
done:
    if (r.file >= 0 && H5Fclose(r.file) < 0)
        fail_h5(&r, NULL, "cannot close");
    H5Eset_auto2(H5E_DEFAULT, saved_func, saved_data);
    if (r.err.code != MC_ERR_NONE) {
        mc_golden_free(g);
        return mc_error_set(err, r.err.code, "%s", r.err.msg);
    }
    return MC_ERR_NONE;
}

void mc_golden_free(struct mc_golden *g)
{
    if (g == NULL)
        return;
    free(g->path);
    for (int i = 0; i < g->n_weights; i++) {
        free(g->weights[i].name);
        free(g->weights[i].value.data);
    }
    free(g->weights);
    free(g->hidden_states.data);
    free(g->mask);
    free(g->output.data);
    free(g->state_positions);
    free(g->conv_state.data);
    free(g->recurrent_state.data);
    free(g->generator);
    free(g->generator_version);
    memset(g, 0, sizeof *g);
}

int64_t mc_golden_position_index(const struct mc_golden *g, int64_t position)
{
    int64_t lo = 0, hi = g->n_positions - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (g->state_positions[mid] == position)
            return mid;
        if (g->state_positions[mid] < position)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

const struct mc_array *mc_golden_weight(const struct mc_golden *g, const char *name)
{
    for (int i = 0; i < g->n_weights; i++)
        if (g->weights[i].name != NULL && strcmp(g->weights[i].name, name) == 0)
            return &g->weights[i].value;
    return NULL;
}
