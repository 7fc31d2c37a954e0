/*
 * provenance.h — what a report needs to say where its numbers came from: the mixcheck version and
 * git commit (with a dirty flag) it was built from, compiler and build type, the OpenBLAS in use, the
 * CPU model, thread counts, the plugins (with the SHA-256 of each file), the Python backends (the
 * interpreter and its version, each spec's file with its SHA-256, the numpy/torch/transformers
 * versions the worker reports; pybackend.c fills them), the seeds option, the start time and the
 * command line. The goldens of the run and their content checksums are in the run
 * report (runner.h, goldens). The writers (reports/) print it; this module only collects.
 */
#ifndef MC_PROVENANCE_H
#define MC_PROVENANCE_H

#include <stdint.h>

#include "base/sha256.h"

#define MC_PROVENANCE_MAX_PLUGINS 16

struct mc_provenance_plugin {
    char path[512];
    char sha256[MC_SHA256_HEX_LEN + 1]; /* "" when the file could not be read */
};

#define MC_PROVENANCE_MAX_PYTHON_SPECS 16
#define MC_PROVENANCE_MAX_PACKAGES 8

struct mc_provenance_python_spec {
    char spec[512];                     /* as given to --python-backend */
    char path[512];                     /* the file it loaded (absolute), "" when it has none */
    char sha256[MC_SHA256_HEX_LEN + 1]; /* of that file, "" when it could not be read */
};

struct mc_provenance_package {
    char name[64];
    char version[64]; /* "" when the interpreter does not have it */
};

/* The Python backends of a run (present = 0 when there are none). */
struct mc_provenance_python {
    int present;
    char interpreter[512]; /* --python as given */
    char executable[512];  /* the worker's sys.executable */
    char version[64];      /* platform.python_version() */
    struct mc_provenance_package packages[MC_PROVENANCE_MAX_PACKAGES];
    int n_packages;
    struct mc_provenance_python_spec specs[MC_PROVENANCE_MAX_PYTHON_SPECS];
    int n_specs;
};

struct mc_provenance {
    const char *version;      /* of the build (static strings) */
    const char *git_describe; /* `git describe --always --dirty`, or "unknown" */
    const char *git_commit;   /* full commit id, or "unknown" */
    int git_dirty;            /* 1 uncommitted changes at build time, 0 clean, -1 unknown */
    const char *compiler;     /* __VERSION__ */
    const char *build_type;   /* CMAKE_BUILD_TYPE */
    char blas[512];           /* the OpenBLAS version and core (the caller fills it: blascore.h) */
    char cpu_model[256];      /* /proc/cpuinfo "model name", or "unknown" */
    int threads;              /* --threads (0 = the backends' default) */
    char openblas_num_threads[64]; /* the environment variable, "" when unset */
    int openblas_num_threads_set;
    int jobs;                 /* -j */
    int isolate;
    int seeds;                /* --seeds (0 = once) */
    struct mc_provenance_plugin plugins[MC_PROVENANCE_MAX_PLUGINS];
    int n_plugins;
    struct mc_provenance_python python;
    char started_utc[32];     /* ISO 8601, e.g. 2024-05-01T12:00:00Z */
    char *command_line;       /* argv joined, shell-quoted where needed (owned) */
};

/* Fills the build information, CPU model, OPENBLAS_NUM_THREADS, the command line and the start time
 * (now; mc_provenance_set_start overrides it). Returns 0, or -1 when out of memory (p is still safe
 * to free). */
int mc_provenance_collect(struct mc_provenance *p, int argc, char *const *argv);

/* Records a plugin path and the SHA-256 of its file; 0, or -1 when there are too many. */
int mc_provenance_add_plugin(struct mc_provenance *p, const char *path);

/* Records a Python backend spec, the file it loaded (NULL or "" for none) and that file's SHA-256; 0,
 * or -1 when there are too many. */
int mc_provenance_add_python_spec(struct mc_provenance_python *py, const char *spec, const char *path);

void mc_provenance_set_start(struct mc_provenance *p, int64_t unix_seconds);

void mc_provenance_free(struct mc_provenance *p);

/* The SHA-256 of a file's bytes as hex; 0, or -1 when it cannot be read. */
int mc_sha256_file_hex(const char *path, char out[MC_SHA256_HEX_LEN + 1]);

/* Build information for `mixcheck --version`. */
const char *mc_build_git_describe(void);
const char *mc_build_git_commit(void);
int mc_build_git_dirty(void);

#endif
