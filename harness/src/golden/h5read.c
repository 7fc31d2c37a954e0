/* h5read.c — see h5read.h. */
#include "golden/h5read.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

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

enum mc_err_code mc_h5_fail(struct mc_h5_reader *r, enum mc_err_code code, const char *obj, const char *fmt, ...)
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
static enum mc_err_code fail_h5(struct mc_h5_reader *r, const char *obj, const char *what)
{
    char stack[768];
    h5_stack_describe(stack, sizeof stack);
    return mc_h5_fail(r, MC_ERR_INPUT, obj, "%s (HDF5: %s)", what, stack);
}

enum mc_err_code mc_h5_fail_nomem(struct mc_h5_reader *r, const char *obj)
{
    return mc_h5_fail(r, MC_ERR_NOMEM, obj, "out of memory");
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

static void rule_format(char *buf, size_t cap, const struct mc_h5_shape_rule *rule)
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

void mc_h5_index_format(char *buf, size_t cap, int ndim, const int64_t *dims, int64_t flat)
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

enum mc_err_code mc_h5_check_finite(struct mc_h5_reader *r, const char *label, int ndim, const int64_t *dims,
                                    const double *data)
{
    int64_t n = ndim > 0 ? 1 : 0;
    for (int i = 0; i < ndim; i++)
        n *= dims[i];
    for (int64_t i = 0; i < n; i++) {
        double v = data[i];
        if (isfinite(v))
            continue;
        char idx[160];
        mc_h5_index_format(idx, sizeof idx, ndim, dims, i);
        return mc_h5_fail(r, MC_ERR_INPUT, label, "%s at %s", isnan(v) ? "NaN" : v > 0 ? "Inf" : "-Inf", idx);
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

static enum mc_err_code type_check(struct mc_h5_reader *r, const char *label, hid_t ftype, enum mc_h5_want want)
{
    H5T_class_t cls = H5Tget_class(ftype);
    size_t size = H5Tget_size(ftype);
    char got[32];
    type_describe(ftype, got, sizeof got);
    switch (want) {
    case MC_H5_WANT_F64:
        if (cls != H5T_FLOAT || size != 8)
            return mc_h5_fail(r, MC_ERR_INPUT, label, "expected values must be float64 (got %s)", got);
        return MC_ERR_NONE;
    case MC_H5_WANT_FLOAT:
        if (cls != H5T_FLOAT || (size != 4 && size != 8))
            return mc_h5_fail(r, MC_ERR_INPUT, label, "must be float32 or float64 (got %s)", got);
        return MC_ERR_NONE;
    case MC_H5_WANT_NUMBER:
        if ((cls != H5T_FLOAT || (size != 4 && size != 8)) && cls != H5T_INTEGER)
            return mc_h5_fail(r, MC_ERR_INPUT, label, "must be a number (got %s)", got);
        return MC_ERR_NONE;
    case MC_H5_WANT_INT:
        if (cls != H5T_INTEGER && !is_int_enum(ftype))
            return mc_h5_fail(r, MC_ERR_INPUT, label, "must be an integer (got %s)", got);
        return MC_ERR_NONE;
    }
    return mc_h5_fail(r, MC_ERR_INTERNAL, label, "unknown type requirement");
}

/*
 * Reads the n values of obj (an attribute when is_attr, else a whole dataset) whose file type is
 * ftype into buf, converted to double (MC_H5_WANT_FLOAT/F64/NUMBER) or int64_t (MC_H5_WANT_INT). buf holds n
 * 8-byte elements. The type must have passed type_check.
 */
static enum mc_err_code read_values(struct mc_h5_reader *r, const char *label, hid_t obj, int is_attr, hid_t ftype,
                                    enum mc_h5_want want, size_t n, void *buf)
{
    hid_t mem = H5I_INVALID_HID, super = H5I_INVALID_HID;
    herr_t st;
    if (want == MC_H5_WANT_INT && H5Tget_class(ftype) == H5T_ENUM) {
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
        hid_t native = want == MC_H5_WANT_INT ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE;
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

void mc_h5_attr_label(char *buf, size_t cap, const char *obj, const char *name)
{
    snprintf(buf, cap, "%s/%s", strcmp(obj, "/") == 0 ? "" : obj, name);
}

int mc_h5_attr_exists(struct mc_h5_reader *r, const char *obj, const char *name)
{
    char label[512];
    htri_t exists = H5Aexists_by_name(r->file, obj, name, H5P_DEFAULT);
    if (exists < 0) {
        mc_h5_attr_label(label, sizeof label, obj, name);
        fail_h5(r, label, "cannot look up the attribute");
        return -1;
    }
    return exists > 0;
}

/* Opens attribute obj/name, refusing a missing one. */
static enum mc_err_code attr_open(struct mc_h5_reader *r, const char *label, const char *obj, const char *name,
                                  hid_t *attr)
{
    htri_t exists = H5Aexists_by_name(r->file, obj, name, H5P_DEFAULT);
    if (exists < 0)
        return fail_h5(r, label, "cannot look up the attribute");
    if (exists == 0)
        return mc_h5_fail(r, MC_ERR_INPUT, label, "missing attribute");
    *attr = H5Aopen_by_name(r->file, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    if (*attr < 0)
        return fail_h5(r, label, "cannot open the attribute");
    return MC_ERR_NONE;
}

enum mc_err_code mc_h5_attr_read_numbers(struct mc_h5_reader *r, const char *obj, const char *name,
                                         enum mc_h5_want want, size_t n, void *out)
{
    char label[512];
    mc_h5_attr_label(label, sizeof label, obj, name);
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
            mc_h5_fail(r, MC_ERR_INPUT, label, "must be a scalar (got %lld values)", (long long)npoints);
        else
            mc_h5_fail(r, MC_ERR_INPUT, label, "must be an array of %zu values (got %lld)", n, (long long)npoints);
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

enum mc_err_code mc_h5_attr_read_string(struct mc_h5_reader *r, const char *obj, const char *name, char **out)
{
    char label[512];
    mc_h5_attr_label(label, sizeof label, obj, name);
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
        mc_h5_fail(r, MC_ERR_INPUT, label, "must be a string (got %s)", type_describe(type, got, sizeof got));
        goto done;
    }
    if (H5Sget_simple_extent_npoints(space) != 1) {
        mc_h5_fail(r, MC_ERR_INPUT, label, "must be a single string");
        goto done;
    }
    htri_t is_vlen = H5Tis_variable_str(type);
    size_t size = H5Tget_size(type);
    if (is_vlen < 0 || (!is_vlen && size > MC_H5_MAX_STRING)) {
        mc_h5_fail(r, MC_ERR_INPUT, label, "unsupported string type");
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
        *out = mc_strdup(vlen ? vlen : "");
    } else {
        fixed = mc_calloc(size + 1, 1);
        if (fixed == NULL) {
            mc_h5_fail_nomem(r, label);
            goto done;
        }
        if (H5Aread(attr, mem, fixed) < 0) {
            fail_h5(r, label, "cannot read");
            goto done;
        }
        fixed[size] = '\0';
        *out = mc_strdup(fixed);
    }
    if (*out == NULL)
        mc_h5_fail_nomem(r, label);
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

int mc_h5_link_exists(struct mc_h5_reader *r, const char *path)
{
    char buf[512];
    size_t n = strlen(path);
    if (n >= sizeof buf) {
        mc_h5_fail(r, MC_ERR_INTERNAL, path, "path too long");
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

enum mc_err_code mc_h5_dataset_read(struct mc_h5_reader *r, const char *name, enum mc_h5_want want,
                                    const struct mc_h5_shape_rule *rule, int64_t dims[MC_MAX_DIMS], void **out)
{
    hid_t ds = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    void *buf = NULL;
    *out = NULL;
    int e = mc_h5_link_exists(r, name);
    if (e < 0)
        goto done;
    if (e == 0) {
        mc_h5_fail(r, MC_ERR_INPUT, name, "missing dataset");
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
        mc_h5_fail(r, MC_ERR_INPUT, name, "must be an array (got a scalar or empty dataspace)");
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
                    mc_h5_fail(r, MC_ERR_INPUT, name, "shape [%s]: %s = %llu is out of range [1, %lld]", got,
                               rule->names[i] ? rule->names[i] : "dimension", (unsigned long long)hd[i],
                               (long long)rule->max[i]);
                    goto done;
                }
        }
        mc_h5_fail(r, MC_ERR_INPUT, name, "shape [%s] does not match %s (expected [%s])", got, rule->source, want_dims);
        goto done;
    }
    int64_t elems = 1;
    for (int i = 0; i < ndim; i++) {
        if (hd[i] > (hsize_t)MC_H5_MAX_ELEMS || elems > MC_H5_MAX_ELEMS / (int64_t)hd[i]) {
            char got[256];
            dims_format(got, sizeof got, ndim, hd);
            mc_h5_fail(r, MC_ERR_INPUT, name, "shape [%s] is too large (this reader accepts at most %lld elements)",
                       got, (long long)MC_H5_MAX_ELEMS);
            goto done;
        }
        elems *= (int64_t)hd[i];
        dims[i] = (int64_t)hd[i];
    }
    if (r->total_elems + elems > MC_H5_MAX_TOTAL_ELEMS) {
        mc_h5_fail(r, MC_ERR_INPUT, name, "the file's datasets are too large (over %lld elements in all)",
                   (long long)MC_H5_MAX_TOTAL_ELEMS);
        goto done;
    }
    if (type_check(r, name, type, want))
        goto done;
    buf = mc_malloc((size_t)elems * 8);
    if (buf == NULL) {
        mc_h5_fail_nomem(r, name);
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

enum mc_err_code mc_h5_group_check_links(struct mc_h5_reader *r, const char *group, const char *const *known, int n,
                                         const char *what)
{
    hid_t grp = H5Gopen2(r->file, group, H5P_DEFAULT);
    char *name = NULL;
    H5G_info_t info;
    if (grp < 0 || H5Gget_info(grp, &info) < 0) {
        fail_h5(r, group, "cannot open as a group");
        goto done;
    }
    for (hsize_t i = 0; i < info.nlinks; i++) {
        ssize_t len = H5Lget_name_by_idx(grp, ".", H5_INDEX_NAME, H5_ITER_INC, i, NULL, 0, H5P_DEFAULT);
        if (len < 0 || len > MC_H5_MAX_STRING) {
            fail_h5(r, group, "cannot list the group");
            goto done;
        }
        if ((name = mc_malloc((size_t)len + 1)) == NULL) {
            mc_h5_fail_nomem(r, group);
            goto done;
        }
        if (H5Lget_name_by_idx(grp, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, (size_t)len + 1, H5P_DEFAULT) < 0) {
            fail_h5(r, group, "cannot list the group");
            goto done;
        }
        int found = 0;
        for (int k = 0; k < n && !found; k++)
            found = strcmp(name, known[k]) == 0;
        if (!found) {
            char label[512];
            snprintf(label, sizeof label, "%s/%s", group, name);
            mc_h5_fail(r, MC_ERR_INPUT, label, "%s", what);
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

/* ---- the file ---------------------------------------------------------------------------------- */

enum mc_err_code mc_h5_open(struct mc_h5_reader *r, const char *path)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->file = H5I_INVALID_HID;
    mc_error_clear(&r->err);
    H5Eget_auto2(H5E_DEFAULT, &r->saved_func, &r->saved_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

    FILE *f = fopen(r->path, "rb");
    if (f == NULL)
        return mc_h5_fail(r, MC_ERR_INPUT, NULL, "cannot open: %s", strerror(errno));
    fclose(f);
#if H5_VERSION_GE(1, 12, 0)
    htri_t is_h5 = H5Fis_accessible(r->path, H5P_DEFAULT);
#else
    htri_t is_h5 = H5Fis_hdf5(r->path);
#endif
    if (is_h5 == 0) {
        H5Eclear2(H5E_DEFAULT);
        return mc_h5_fail(r, MC_ERR_INPUT, NULL, "not an HDF5 file");
    }
    if (is_h5 < 0)
        return fail_h5(r, NULL, "not a readable HDF5 file");
    r->file = H5Fopen(r->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r->file < 0)
        return fail_h5(r, NULL, "cannot open as HDF5 (truncated or damaged?)");
    return MC_ERR_NONE;
}

enum mc_err_code mc_h5_close(struct mc_h5_reader *r)
{
    if (r->file >= 0 && H5Fclose(r->file) < 0)
        fail_h5(r, NULL, "cannot close");
    r->file = H5I_INVALID_HID;
    H5Eset_auto2(H5E_DEFAULT, r->saved_func, r->saved_data);
    return r->err.code;
}

enum mc_err_code mc_h5_array_read(struct mc_h5_reader *r, const char *name, enum mc_h5_want want,
                                  const struct mc_h5_shape_rule *rule, struct mc_array *a)
{
    void *data = NULL;
    int64_t dims[MC_MAX_DIMS] = {0};
    if (mc_h5_dataset_read(r, name, want, rule, dims, &data))
        return r->err.code;
    a->ndim = rule->ndim;
    memcpy(a->dims, dims, sizeof a->dims);
    a->data = data;
    return mc_h5_check_finite(r, name, a->ndim, a->dims, a->data);
}
