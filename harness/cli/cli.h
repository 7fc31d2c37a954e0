/*
 * cli.h — what the subcommands of the mixcheck command share: the built-in backends, loading
 * plugins into the registry, and small parsing helpers. One file per subcommand (cmd_run.c,
 * cmd_list.c, bench.c); main.c only dispatches. The CLI is the only part of mixcheck that prints.
 */
#ifndef MC_CLI_H
#define MC_CLI_H

#include "base/error.h"
#include "exec/plugin.h"
#include "exec/pybackend.h"
#include "exec/registry.h"

#define MC_VERSION "0.1.0"
#define MC_DEFAULT_CASES "cases"

/* Registers the built-in backends (the reference and cpu backends of every family). */
int mc_cli_register_builtins(struct mc_registry *reg, struct mc_error *err);

/* Registers the built-ins, then loads each plugin. On failure prints the error and returns the exit
 * code: 2 (or 125 with `bisect`: a plugin that cannot be loaded is "could not test"). 0 on success. */
int mc_cli_load_backends(struct mc_registry *reg, struct mc_plugins *plugins, const char *const *paths, int n,
                         int bisect);

/* Registers the Python backends of each spec (pybackend.h) as the plugins after the loaded ones. On
 * failure prints the error and returns the exit code (2, or 125 with `bisect` when the interpreter or
 * the module cannot be loaded). 0 on success. */
int mc_cli_load_python(struct mc_registry *reg, const struct mc_plugins *plugins, const struct mc_python_options *opt,
                       const char *const *specs, int n, int bisect);

/* The Python backends a subcommand was asked for: --python PY, --python-backend SPEC (repeatable),
 * --python-device DEV, with the meaning `mixcheck run --help` gives them. */
struct mc_cli_python {
    const char *specs[MC_PYTHON_MAX_BACKENDS];
    int n;
    struct mc_python_options opt; /* NULL members: not given */
};

/* Takes the value of one of those options (`option` as typed: "--python", "--python-backend" or
 * "--python-device"). 0, or 2 after printing what is wrong (too many specs, an empty device). */
int mc_cli_python_option(struct mc_cli_python *py, const char *option, const char *value);

/* After the options: --python or --python-device without --python-backend is a usage error (2,
 * printed); else 0. */
int mc_cli_python_check(const struct mc_cli_python *py);

/* Loads the Python backends asked for (none: nothing) as the plugins after the loaded ones, the
 * interpreter defaulting to python3; the exit code of mc_cli_load_python. The struct must outlive the
 * registry's use (its options and specs are kept). */
int mc_cli_python_start(struct mc_registry *reg, const struct mc_plugins *plugins, struct mc_cli_python *py,
                        int bisect);

/* Parses a decimal integer in [1, max]; 0 on success. */
int mc_cli_parse_count(const char *text, int max, int *out);

/* 1 for colour: "always", or "auto"/NULL on a terminal without NO_COLOR. */
int mc_cli_use_color(const char *when);

/* Appends " word" (shell-quoted when it needs it) to buf of size len; the used length is *used. */
void mc_cli_append_arg(char *buf, size_t len, size_t *used, const char *word);

/* The subcommands: each returns the process exit code. */
int mc_cmd_run(int argc, char **argv);
int mc_cmd_list(int argc, char **argv);
int mc_cmd_diff(int argc, char **argv);
int mc_cmd_history(int argc, char **argv);
int mc_cmd_merge(int argc, char **argv);

#endif
