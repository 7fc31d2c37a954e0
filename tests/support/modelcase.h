/* modelcase — a model case (a file of cases/models) with its model golden loaded, what the tests that run
 * model checks in process (tests/stacks) start with. */
#ifndef MC_TEST_MODELCASE_H
#define MC_TEST_MODELCASE_H

#include "case/case.h"
#include "golden/stackgolden.h"

struct mc_test_model {
    struct mc_case c;
    struct mc_stack_golden g;
};

/* Loads the case at path and its golden; a failure fails the running cmocka test with the message. */
void mc_test_model_load(const char *path, struct mc_test_model *m);
void mc_test_model_unload(struct mc_test_model *m);

#endif
