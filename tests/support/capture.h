/* capture — running a shell command from a cmocka test and keeping what it prints.
 *
 * The CLI tests (tests/gate, proofs, robust, plugin, packed, mutants, drift, bad-inputs, python, probes,
 * bench) all run the mixcheck command through the shell and look at its output and exit status; this is
 * their one copy of that. Linked into every test by mc_add_test (cmake/MixcheckTest.cmake).
 */
#ifndef MC_TEST_CAPTURE_H
#define MC_TEST_CAPTURE_H

#include <stddef.h>

/* Runs `cmd` through the shell with stderr folded into stdout; keeps the first cap - 1 bytes of the
 * output in out, NUL-terminated (the rest is read and dropped, so the command never blocks on a full
 * pipe). Returns the raw status pclose gives (see wait(2)). A command that cannot be started fails
 * the running cmocka test. */
int mc_capture_status(const char *cmd, char *out, size_t cap);

/* mc_capture_status, reduced to the exit status, or -1 when the command did not exit (a signal). */
int mc_capture(const char *cmd, char *out, size_t cap);

#endif
