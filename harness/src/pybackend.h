/*
 * pybackend.h — backends written in Python (python/mixcheck_backend): each one is a class whose
 * methods mixcheck calls through a worker interpreter, registered as an ordinary backend so that every
 * scenario, guard, isolation rule and report applies to it unchanged.
 *
 * mc_python_load asks the interpreter (a short `describe` run) which backend classes a SPEC holds
 * (MODULE, MODULE:ATTR, FILE.py or FILE.py:ATTR; ATTR a Backend subclass or a list of them, by default
 * the module's MIXCHECK_BACKENDS) and registers each as a plugin backend with `origin` SPEC. Their ops
 * start one worker interpreter per process at the first model_create of that process (in a check's
 * child process: once per check), talk to it over a socket and move every tensor through a shared
 * memory arena (memfd + mmap, numpy views on the Python side). A Python exception is the call's error
 * with the exception and its traceback in the message; a worker that dies (a segfault in an extension)
 * is the call's error with its signal and the Python stack faulthandler printed; a worker that hangs
 * hangs the call, so the check's time limit (isolate.c) ends it, and the worker dies with its parent
 * (PR_SET_PDEATHSIG).
 */
#ifndef MC_PYBACKEND_H
#define MC_PYBACKEND_H

#include "error.h"
#include "registry.h"

#define MC_PYTHON_MAX_BACKENDS 32

struct mc_python_options {
    const char *python; /* the interpreter: a path, or a name searched in PATH; NULL = "python3" */
    const char *device; /* the device the backends run on and are checked for; NULL = "cpu" */
};

/* Registers the backends of `spec` as those of the `plugin`-th plugin (1-based, after the --plugin
 * libraries). MC_ERR_INPUT when the interpreter cannot start or the spec cannot be loaded (with the
 * Python error), MC_ERR_USAGE past MC_PYTHON_MAX_BACKENDS. The options must outlive the run. */
enum mc_err_code mc_python_load(const struct mc_python_options *opt, const char *spec, struct mc_registry *reg,
                                int plugin, struct mc_error *err);

/* The directory of the shipped mixcheck_backend package (MIXCHECK_PYTHON_DIR overrides the build's). */
const char *mc_python_package_dir(void);

/* Frees what the loads kept (the backends' names); the registry must not be used afterwards. */
void mc_python_unload(void);

#endif
