/*
 * diagnose.h — the bug-class diagnosis (docs/scenarios.md §6): after the checks of a case, the pattern of
 * what passed and failed on one backend — which scenarios, which tensors, from which token, at which
 * dtypes, the first failing run and (when a backend reports stage probes) the first failing stage — is
 * reduced to facts (struct mc_diag_facts), and every signature of the table in signatures.c is scored
 * against them. The matcher knows nothing of any bug class: a signature is data (class id, plain-words
 * title, weighted conditions on the facts), so adding a class is adding a table entry.
 *
 * A condition is true, false or unknown (the scenario or tensor it reads did not run). Score = sum of the
 * weights of the true conditions minus those of the false ones; a signature is named when its required
 * conditions are all true, one of its true supporting conditions is about something that failed (not only
 * things that passed) and its score is positive. A backend whose checks all passed gets no
 * diagnosis, and nothing is computed for it.
 */
#ifndef MC_DIAGNOSE_H
#define MC_DIAGNOSE_H

#include <stdint.h>

#include "case/case.h"
#include "experiment/experiment.h"
#include "golden/golden.h"
#include "verdict/check.h"

#define MC_DIAG_MAX_TENSORS 16 /* distinct tensor names one scenario compares over its dtypes */
#define MC_DIAG_MAX_COND 16    /* conditions of one signature */
#define MC_DIAG_TOP 3          /* classes named per diagnosis */
#define MC_DIAG_STAGE_LEN 32
#define MC_DIAG_ANY (-1)       /* a condition's scenario: any scenario */

/* ---- facts ------------------------------------------------------------------------------------------- */

/* One tensor of one scenario, over every dtype the case ran it at. */
struct mc_diag_tensor_fact {
    char name[MC_TENSOR_NAME_LEN];
    int fail_full;            /* failed at f64/f32 */
    int fail_reduced;         /* failed at f16/bf16 */
    int64_t first_fail_token; /* earliest failing token over the failing checks, -1 */
    int64_t first_fail_batch;
    int64_t nonfinite;        /* non-finite values seen */
    double nmse;              /* largest NMSE over the failing checks */
    double rel_err;           /* largest max |a - b| / magnitude over the failing checks (the error's scale) */
    double cosine;            /* smallest cosine over the failing checks */
    /* over its failing comparisons at f32/f64: the values that failed their bound, and whether one of them is
     * off the bf16 / f16 grid (non-zero) */
    int64_t full_elems, offgrid_bf16, offgrid_f16;
};

struct mc_diag_scenario_fact {
    int ran_full, ran_reduced;       /* checks that compared something, per precision */
    int failed_full, failed_reduced; /* checks with a non-passing verdict (fail, error, nondeterministic) */
    int nondeterministic;
    int64_t split;                   /* the token a continued forward starts at (its `prefill`), -1 none */
    char first_run[256];             /* the first failing run of the first failing check ("splits [1, 5]") */
    char first_stage[MC_DIAG_STAGE_LEN]; /* first failing stage of a check, "" when none is reported */
    int n_tensors;
    struct mc_diag_tensor_fact tensors[MC_DIAG_MAX_TENSORS];
};

/* A check that errored (a backend status, a crash, a time limit, an exception): what it said. */
#define MC_DIAG_MAX_ERRORS 4
struct mc_diag_error {
    enum mc_scenario_kind scenario;
    enum mc_dtype dtype;
    char message[240];
};

struct mc_diag_facts {
    enum mc_family family;
    uint64_t padded_rows;            /* bit r: golden row r (< 64) has padding */
    int any_failed;                  /* a check failed on numbers (errors are not numbers: n_errored) */
    int64_t reduction;               /* the longest sum of the family's math (for the rounding scale) */
    int64_t conv_kernel;             /* K of the family's conv window (0: none, or no golden) */
    uint32_t failed_dtypes, ran_dtypes; /* MC_DTYPE_BIT of dtypes with a numeric failure / a compared check */
    int n_errored;                   /* checks that errored (never matched against numeric signatures) */
    int n_errors;                    /* distinct messages kept of them */
    struct mc_diag_error errors[MC_DIAG_MAX_ERRORS];
    /* NaN the backend made itself (compare.h n_nan_bare: no payload, so not the harness's poison or planted
     * pool NaN passed on): how many, and the first check and tensor that held them. Not numbers either: a
     * failure with them gets the errors verdict, never a numeric class */
    int64_t nan_bare;
    enum mc_scenario_kind nan_bare_scenario;
    enum mc_dtype nan_bare_dtype;
    char nan_bare_tensor[MC_TENSOR_NAME_LEN];
    int64_t nan_bare_token;
    struct mc_experiment_outcome exp[MC_EXP_COUNT]; /* the experiments run on the port (not run: verdict 0) */
    struct mc_diag_scenario_fact scen[MC_SCENARIO_COUNT];
};

/* Facts of the checks [0, n) that belong to `backend` (by name). The golden gives the padded rows (may be NULL). */
void mc_diag_facts_build(struct mc_diag_facts *f, const struct mc_case *c, const struct mc_golden *g,
                         const struct mc_check_result *checks, int n, const char *backend);

/* ---- signatures -------------------------------------------------------------------------------------- */

enum mc_diag_cond_kind {
    MC_DC_FAILS,        /* tensor (NULL: any) of scenario failed */
    MC_DC_PASSES,       /* tensor (NULL: every one) was compared and passed */
    MC_DC_AT_SPLIT,     /* tensor fails from the first token of the continued forward (token == split) */
    MC_DC_AFTER_SPLIT,  /* tensor fails only after it (row 0 of the continued forward right) */
    MC_DC_FROM_START,   /* tensor fails from token 0 */
    MC_DC_ONLY_REDUCED, /* failures at f16/bf16 only, while f64/f32 ran and passed */
    MC_DC_NMSE_BELOW,   /* tensor failed with NMSE below `value` (a small, additive error) */
    MC_DC_NMSE_ABOVE,   /* tensor failed with NMSE at or above `value` */
    MC_DC_NONFINITE,    /* tensor failed with non-finite values */
    MC_DC_PADDED_ROW,   /* tensor's first failing batch row is a padded row of the golden */
    MC_DC_PADDED_GOLDEN, /* the case's golden has padded rows (never unknown) */
    MC_DC_RUN,          /* the first failing run's label contains `text` */
    MC_DC_RUN_FIRST,    /* the first failing run's first parameter equals `value` */
    MC_DC_RUN_LAST,     /* the first failing run's last parameter equals `value` */
    MC_DC_STAGE,        /* the first failing stage is `text` (stage probes, docs/scenarios.md §1.3) */
    MC_DC_NONDET,       /* a check of scenario was nondeterministic */
    MC_DC_EXPERIMENT,   /* experiment `value` (enum mc_experiment_kind) ran and its hypothesis held (false:
                           it ran and did not; unknown: it did not run) */
    MC_DC_EXP_REFUTED,  /* experiment `value` ran and its hypothesis did not hold */
    MC_DC_EXP_RATIO_BELOW, /* experiment `value` ran and its ratio (f32_reference) is below `text` parsed */
    MC_DC_ON_GRID,      /* tensor failed at f32/f64 and every value of its failing comparisons is a `text`
                           ("bf16" / "f16") value: the port stored it in that dtype */
    MC_DC_SHORT_SPLIT,  /* the scenario's split (the tokens before its continued calls) is shorter than K - 1:
                           the conv window is not yet full when the continued calls begin (unknown without a
                           split or a conv window) */
};

struct mc_diag_cond {
    enum mc_diag_cond_kind kind;
    int scenario;       /* enum mc_scenario_kind, or MC_DIAG_ANY */
    const char *scenario_name; /* instead of `scenario`: a scenario by name (mc_scenario_from_name), for one
                                  this build may not have; unknown when it does not */
    const char *tensor; /* tensor name, NULL = the check as a whole */
    double value;
    const char *text;
    int weight;         /* added when true, subtracted when false */
    int must;           /* the signature is named only when this is true */
    int veto;           /* the signature is not named when this is false (unknown leaves it in): the premise
                           of the class, which facts that contradict it rule out */
    int if_true;        /* counts only when true (false reads as unknown): another class's decisive
                           experiment holding speaks against this one, its failing says nothing */
    uint32_t families;  /* OR of 1u << enum mc_family it applies to (0 = all); unknown elsewhere */
    int for_likely;     /* the class is `likely` only when this is true: the one observation that sets it apart
                           from classes that share its other facts (unknown or false: `possibly` at most) */
    const char *say;    /* evidence wording, NULL = generated from the condition, "" = a precondition, not shown */
};

struct mc_signature {
    const char *id;     /* bug class: "8.2a", "S2.4", ... (docs/semantics.md §8, §9) */
    const char *title;  /* what the wrong code does, in plain words */
    const char *hint;   /* where to look */
    uint32_t families;  /* families the class exists in (0 = all) */
    struct mc_diag_cond cond[MC_DIAG_MAX_COND];
};

/* The table (signatures.c). */
extern const struct mc_signature mc_signatures[];
extern const int mc_n_signatures;

/* ---- diagnosis --------------------------------------------------------------------------------------- */

struct mc_diag_match {
    const struct mc_signature *sig;
    int score;
    int known;          /* sum of the weights of the conditions that were not unknown */
    int total;          /* sum of the weights of the conditions for this family (stages only once reported) */
    int specific;       /* some true supporting condition says more than "the fresh prefill is wrong" */
    int rounding;       /* every failure is rounding-sized and the class does not rest on the values' grid:
                           never "likely" (diagnose.c, rounding_sized) */
    int unsettled;      /* a for_likely condition of the class is not true: never "likely" */
    char evidence[512]; /* the true conditions in words, "; "-separated */
};

/* What a diagnosis says (docs/diagnosis.md §6.1). */
enum mc_diag_verdict {
    MC_DIAG_LIKELY,     /* one class, singled out by the facts (and the experiments that separate it) */
    MC_DIAG_POSSIBLY,   /* one or two classes fit, but the facts do not single one out */
    MC_DIAG_NO_CLASS,   /* no class fits: the line says what the facts establish */
    MC_DIAG_ERRORS,     /* checks errored: reported as errors, never matched against numeric classes */
    MC_DIAG_PRECISION,  /* the failures are at the rounding level of a lower precision */
};

struct mc_diagnosis {
    char case_id[128];
    const char *backend; /* borrowed from the ops */
    enum mc_family family;
    int n;               /* matches named, best first (0: failures no signature explains) */
    struct mc_diag_match top[MC_DIAG_TOP];
    enum mc_diag_verdict verdict;
    char precision[16];  /* MC_DIAG_PRECISION: "f32", "bf16/f16" */
    char facts[512];     /* what the facts establish, in words: paths, tensors, first token, error scale */
    char experiments[1400]; /* the experiments run and what they showed, "; "-separated ("" none) */
    char errors[720];    /* MC_DIAG_ERRORS: the errors, "; "-separated */
    char rounding[400];  /* the failures fit a 16-bit intermediate of one path (decode, a continued forward): said
                            beside the classes, never a verdict of its own ("" none) */
};

/* Three-valued result of one condition on the facts. */
enum mc_diag_truth { MC_DIAG_FALSE = 0, MC_DIAG_TRUE = 1, MC_DIAG_UNKNOWN = 2 };
enum mc_diag_truth mc_diag_eval(const struct mc_diag_cond *c, const struct mc_diag_facts *f);

/* Scores every signature of `sigs` against the facts and keeps the best MC_DIAG_TOP. Returns 0 when
 * nothing failed (no diagnosis), 1 otherwise. */
int mc_diagnose(const struct mc_diag_facts *f, const struct mc_signature *sigs, int n_sigs, struct mc_diagnosis *out);

/* Facts of the checks of `backend` among checks [0, n) of case `c` and the outcomes of the experiments run
 * on it (exp[MC_EXP_COUNT], NULL when none ran), matched against the table: 1 and *out filled when some
 * check failed or errored, else 0 (nothing is named for a backend that passed). */
int mc_diagnose_case(const struct mc_case *c, const struct mc_golden *g, const struct mc_check_result *checks, int n,
                     const char *backend, const struct mc_experiment_outcome *exp, struct mc_diagnosis *out);

/* Which experiments would separate the classes that fit the checks of `backend` (out[k] = 1 to run
 * experiment k): none when nothing failed or a check errored; else every experiment that bears on a
 * class the facts leave named. */
void mc_diagnose_experiments(const struct mc_case *c, const struct mc_golden *g, const struct mc_check_result *checks,
                             int n, const char *backend, int out[MC_EXP_COUNT]);

/* The line of a diagnosis ("likely: ...", "possibly: ...", "no class fits — facts: ...", "errors, not
 * numbers: ...", "computes in f32 inside — ...") and, for the class verdicts, "also possible: ..." for
 * the classes the line does not name ("" none). */
void mc_diag_line(const struct mc_diagnosis *d, char *line, size_t len, char *also, size_t also_len);

/* The run's line for one backend over its diagnoses d[0..n): errors when a case errored, the precision
 * verdict when every diagnosed case has it, else the classes (mc_diagnose_summary, "likely" when more
 * than half the cases name the first class likely). Returns 0 when the backend has no diagnosis. */
int mc_diag_summary_line(const struct mc_diagnosis *d, int n, const char *backend, char *line, size_t len,
                         char *also, size_t also_len, int *cases, int *first, enum mc_diag_verdict *verdict);

/* 1 when d[i] is the first of d[0..i] from its backend (a run's per-backend lines take each backend
 * once, in the order of its first diagnosis), 0 otherwise. */
int mc_diagnose_backend_first(const struct mc_diagnosis *d, int i);
/* Over the diagnoses of one backend in a run: classes by the number of cases that name them first, then
 * by summed score (a class only some cases can show — a distractor probe, a padded golden — is not
 * outvoted by a weaker one every case shows), `top` filled with up to
 * MC_DIAG_TOP (evidence from the case where the class scored best), `cases` the diagnoses that named a
 * class and
 * `first` how many had the run's first class first. Returns how many classes were filled. */
int mc_diagnose_summary(const struct mc_diagnosis *d, int n, const char *backend, struct mc_diag_match *top,
                        int *cases, int *first);

/* "likely: <title> (<id>) — evidence: <evidence>" into buf. */
void mc_diag_format(const struct mc_diag_match *m, char *buf, size_t len);

#endif
