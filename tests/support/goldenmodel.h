/* goldenmodel — a backend's model made from a golden's configuration and weights (what the tests that
 * drive a backend through its ops struct on a golden start with). */
#ifndef MC_TEST_GOLDENMODEL_H
#define MC_TEST_GOLDENMODEL_H

#include "golden/golden.h"
#include "mixcheck/backend.h"

/* ops->model_create on g's family configuration and weights, converted to dtype (the weights are freed
 * once the model holds its copy, as backend.h says it keeps one). A failure fails the running cmocka
 * test, naming g's file and the backend's message. */
struct mc_model *mc_test_golden_model(const struct mc_backend_ops *ops, const struct mc_golden *g,
                                      enum mc_dtype dtype);

#endif
