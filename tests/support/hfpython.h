/* hfpython — the Python interpreter the tests of the Hugging Face adapter and of the goldens against
 * upstream use: $MIXCHECK_HF_PYTHON, else /work/venv/bin/python (the development venv). */
#ifndef MC_TEST_HFPYTHON_H
#define MC_TEST_HFPYTHON_H

/* That interpreter when it imports torch and transformers; else NULL, after telling stderr that `test`
 * is skipped (the caller then exits 77, CTest's skip code). */
const char *mc_test_hf_python(const char *test);

#endif
