/*
 * pybackend.h — backends written in Python (python/mixcheck_backend): each one is a class whose
 * methods mixcheck calls through a worker interpreter, registered as an ordinary backend so that every
 * scenario, guard, isolation rule and report applies to it unchanged.
 *
 * mc_python_load starts the interpreter once for the run: a *zygote* that imports every SPEC (MODULE,
 * MODULE:ATTR, FILE.py or FILE.py:ATTR; ATTR a Backend subclass or a list of them, by default the
 * module's MIXCHECK_BACKENDS), describes their backend classes, and registers each as a plugin
 * backend with `origin` SPEC. The first model_create of a process (in a check's child process: once
 * per check; the whole run with --no-isolate) asks the zygote for a worker of its own, forked from it
 * with the imports done; the process talks to it over a socket and moves every tensor through a
 * shared-memory arena (memfd + mmap, numpy views on the Python side). A Python exception is the
 * call's error with the exception and its traceback in the message; a worker that dies (a segfault in
 * an extension) is the call's error with its signal and the Python stack faulthandler printed; a
 * worker that hangs hangs the call, so the check's time limit (isolate.c) ends the check, and the
 * zygote, which watches each client process, kills the worker. The zygote dies with mixcheck
 * (PR_SET_PDEATHSIG). The wire format: python/mixcheck_backend/worker.py.
 */
#ifndef MC_PYBACKEND_H
#define MC_PYBACKEND_H

#include "base/error.h"
#include "exec/provenance.h"
#include "exec/registry.h"

#define MC_PYTHON_MAX_BACKENDS 32

struct mc_python_options {
    const char *python; /* the interpreter: a path, or a name searched in PATH; NULL = "python3" */
    const char *device; /* the device the backends run on and are checked for; NULL = "cpu" */
};

/* Starts the zygote on specs[0..n) (once per run) and registers the backends of specs[k] as those of
 * plugin first_plugin + k (1-based, after the --plugin libraries). MC_ERR_INPUT when the interpreter
 * cannot start or a spec cannot be loaded or has no backend (with the Python error), MC_ERR_USAGE
 * past MC_PYTHON_MAX_BACKENDS backends. The options and specs must outlive the run. */
enum mc_err_code mc_python_load(const struct mc_python_options *opt, const char *const *specs, int n,
                                struct mc_registry *reg, int first_plugin, struct mc_error *err);

/* What the report's provenance records of the loaded Python backends: the interpreter (as given and
 * the worker's sys.executable) and its version, each spec's file with its SHA-256, and the
 * numpy/torch/transformers versions the zygote reports ("" for one it does not have). present = 0
 * before a load and after mc_python_unload. */
const struct mc_provenance_python *mc_python_provenance(void);

/* The directory holding the shipped mixcheck_backend package: MIXCHECK_PYTHON_DIR when set; else, for
 * an installed mixcheck, <dir of the executable>/../share/mixcheck/python (found through
 * /proc/self/exe, so a moved prefix still finds its own) when it holds the package; else the build
 * tree's (the source tree's python/). */
const char *mc_python_package_dir(void);

/* Ends this process's worker and the zygote and frees what the load kept; the registry must not be
 * used afterwards. */
void mc_python_unload(void);

#endif
