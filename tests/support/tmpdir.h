/* tmpdir — the scratch directories of the tests (made with mkdtemp from a "/tmp/mixcheck-NAME-XXXXXX"
 * template in setup): their removal, with everything in them. */
#ifndef MC_TEST_TMPDIR_H
#define MC_TEST_TMPDIR_H

/* Removes `dir` and all below it (rm -rf); 0 when that succeeded, -1 otherwise. */
int mc_test_tmpdir_remove(const char *dir);

#endif
