/*
 * error.h — the one error type of mixcheck: a code that decides the exit status, and a message that
 * carries file:line / case / tensor context for the human. The first error wins; callers add
 * context with mc_error_prefix, never overwrite. Library code never prints; only the CLI does.
 */
#ifndef MC_ERROR_H
#define MC_ERROR_H

#include <stddef.h>

enum mc_err_code {
    MC_ERR_NONE = 0,
    MC_ERR_USAGE,    /* bad command line, filters that select nothing           -> exit 2 */
    MC_ERR_INPUT,    /* bad YAML, bad or missing golden, inconsistent case      -> exit 2 */
    MC_ERR_BACKEND,  /* a backend that cannot be created or loaded: untestable  -> exit 125 */
    MC_ERR_NOMEM,    /* allocation failure                                      -> exit 2 */
    MC_ERR_INTERNAL, /* a bug in mixcheck itself                                -> exit 2 */
};

#define MC_ERROR_MSG_LEN 2048

struct mc_error {
    enum mc_err_code code;
    char msg[MC_ERROR_MSG_LEN];
};

/* Records an error unless one is already recorded (the first error wins). Returns the code. */
enum mc_err_code mc_error_set(struct mc_error *err, enum mc_err_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "context: " to a recorded error; no-op when none is recorded. */
void mc_error_prefix(struct mc_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void mc_error_clear(struct mc_error *err);

/* Process exit code for an error code (0 for MC_ERR_NONE). */
int mc_error_exit_code(enum mc_err_code code);

#endif
