/*
 * h5read.h — typed reads from an HDF5 file, internal to harness/src (the golden schema on top of
 * it is golden.c).
 *
 * One read worker behind two front-ends, one for attributes and one for datasets. Rank, shape and
 * type are checked before any data is read or any buffer is sized from the file, and sizes are
 * capped so that a forged header cannot make us allocate absurd memory. Everything is read as
 * double (floats) or int64_t (integers). HDF5's automatic error printing is off between
 * mc_h5_open and mc_h5_close, and its error stack is folded into our message.
 *
 * Errors are recorded in r->err (the first wins) as "<file>: <object>: <what>"; functions return
 * the recorded code, MC_ERR_NONE when there is none. Our allocations go through alloc.h and fail
 * as MC_ERR_NOMEM; HDF5's own allocations do not pass there (a failure of one surfaces as the
 * MC_ERR_INPUT of the call that failed, with HDF5's explanation).
 */
#ifndef MC_H5READ_H
#define MC_H5READ_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#include "base/error.h"
#include "family/family.h" /* MC_MAX_DIMS */
#include "golden/array.h"

/* Per dataset and per file, in elements; strings and link names, in bytes. */
#define MC_H5_MAX_ELEMS ((int64_t)1 << 26)
#define MC_H5_MAX_TOTAL_ELEMS ((int64_t)1 << 28)
#define MC_H5_MAX_STRING 4096

struct mc_h5_reader {
    const char *path;
    hid_t file;
    int64_t total_elems;    /* elements allocated so far, against MC_H5_MAX_TOTAL_ELEMS */
    struct mc_error err;    /* our own, copied out by the caller once at the end */
    H5E_auto2_t saved_func; /* HDF5's automatic error printing, restored by mc_h5_close */
    void *saved_data;
};

/* What a value must be on disk. */
enum mc_h5_want {
    MC_H5_WANT_FLOAT,  /* float32 or float64, read as double */
    MC_H5_WANT_F64,    /* float64 only (expected values) */
    MC_H5_WANT_NUMBER, /* float or integer, read as double */
    MC_H5_WANT_INT,    /* integer, or an enum over an integer (h5py's numpy bool), read as int64_t */
};

/* Dataset shape requirement: dims[i] > 0 is exact; dims[i] == 0 means any size in [1, max[i]]. */
struct mc_h5_shape_rule {
    int ndim;
    int64_t dims[MC_MAX_DIMS];
    int64_t max[MC_MAX_DIMS];
    const char *names[MC_MAX_DIMS]; /* printed for free dims in messages */
    const char *source;             /* what implies the shape, for messages */
};

/* Turns HDF5's error printing off and opens path read-only, refusing a missing file or one that is
 * not HDF5. Call mc_h5_close whatever the result. */
enum mc_err_code mc_h5_open(struct mc_h5_reader *r, const char *path);

/* Closes the file (a failure is recorded) and restores HDF5's error printing. */
enum mc_err_code mc_h5_close(struct mc_h5_reader *r);

/* Records "<file>: <obj>: <what>" (or "<file>: <what>" when obj is NULL). */
enum mc_err_code mc_h5_fail(struct mc_h5_reader *r, enum mc_err_code code, const char *obj, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Records MC_ERR_NOMEM "<file>: <obj>: out of memory". */
enum mc_err_code mc_h5_fail_nomem(struct mc_h5_reader *r, const char *obj);

/* "[i0, i1, ...]" for the flat row-major index `flat` of an array with dims. */
void mc_h5_index_format(char *buf, size_t cap, int ndim, const int64_t *dims, int64_t flat);

/* "obj/name", the label of an attribute in messages ("/name" for the root). */
void mc_h5_attr_label(char *buf, size_t cap, const char *obj, const char *name);

/* 1 when obj has attribute `name`, 0 when not, -1 on error (recorded). */
int mc_h5_attr_exists(struct mc_h5_reader *r, const char *obj, const char *name);

/* Reads a numeric attribute of obj holding exactly n values (a scalar, or a 1-D array of n) into
 * out: n doubles, or n int64_t for MC_H5_WANT_INT. A missing attribute is an error. */
enum mc_err_code mc_h5_attr_read_numbers(struct mc_h5_reader *r, const char *obj, const char *name,
                                         enum mc_h5_want want, size_t n, void *out);

/* Reads a scalar string attribute, fixed or variable length, into an allocated NUL-terminated
 * copy (*out is NULL on failure; release with free). */
enum mc_err_code mc_h5_attr_read_string(struct mc_h5_reader *r, const char *obj, const char *name, char **out);

/* 1 when every component of the absolute path exists, 0 when one does not, -1 on error (recorded). */
int mc_h5_link_exists(struct mc_h5_reader *r, const char *path);

/* Refuses a link in `group` whose name is not one of known[0..n), with "<group>/<name>: <what>". */
enum mc_err_code mc_h5_group_check_links(struct mc_h5_reader *r, const char *group, const char *const *known, int n,
                                         const char *what);

/*
 * Reads dataset `name` into an allocated buffer of 8-byte elements (double, or int64_t for
 * MC_H5_WANT_INT; release with free) after checking it is present, of the rule's rank and dims,
 * within the size limits and of a type `want` accepts. dims receives its shape.
 */
enum mc_err_code mc_h5_dataset_read(struct mc_h5_reader *r, const char *name, enum mc_h5_want want,
                                    const struct mc_h5_shape_rule *rule, int64_t dims[MC_MAX_DIMS], void **out);

/* Refuses NaN and Inf in data (ndim, dims), naming the first one and its index. */
enum mc_err_code mc_h5_check_finite(struct mc_h5_reader *r, const char *label, int ndim, const int64_t *dims,
                                    const double *data);

/* Dataset `name` under `rule` (shape) and `want` (element type) into a, NaN/Inf refused; the reader's
 * error code otherwise (a->data set once read, freed by the array's holder). */
enum mc_err_code mc_h5_array_read(struct mc_h5_reader *r, const char *name, enum mc_h5_want want,
                                  const struct mc_h5_shape_rule *rule, struct mc_array *a);

#endif
