/*
 * cmd_run.c — `mixcheck run`: drives the selected cases through their backends and writes the
 * reports. Exit codes (docs/scenarios.md "Verdicts and exit codes"): 0 every check passed, 1 a check
 * failed, errored or was nondeterministic, 2 usage or input error (including a report that cannot be
 * written and anything asked for that ran no check), 125 could not test.
 */
#define _DEFAULT_SOURCE /* realpath */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/baseline.h"
#include "blascore.h"
#include "case/case.h"
#include "cli.h"
#include "family/family.h"
#include "run/history.h"
#include "exec/provenance.h"
#include "report.h"
#include "run/reportread.h"
#include "run/runner.h"

#define MC_DEFAULT_TIMEOUT_S 300

static void usage(FILE *out)
{
    fprintf(out,
            "usage: mixcheck run [PATH...] [options]\n"
            "Runs every case under PATH (case files, or directories searched for *.yaml; default %s/)\n"
            "on the backends it names and on every backend a loaded plugin registers for its family.\n"
            "\n"
            "selection:\n"
            "  --family F      only cases of family F (mamba2, mamba1, gdn, shortconv, attention, lightning, kda)\n"
            "  --scenario S    only scenario S (see `mixcheck list --coverage` for the names)\n"
            "  --backend B     only backend B (it also runs on cases that do not list it)\n"
            "  --dtype T       only dtype T (f64, f32, f16, bf16)\n"
            "  -k PATTERN      only checks whose id case/scenario/backend/dtype contains PATTERN (a glob\n"
            "                  when it holds * ? or [); repeatable: a check matching any of them runs.\n"
            "                  Applied before goldens are read\n"
            "backends and tolerances:\n"
            "  --plugin LIB    load backends from a shared library (repeatable)\n"
            "  --python-backend SPEC\n"
            "                  load backends written in Python (python/mixcheck_backend): SPEC is MODULE,\n"
            "                  MODULE:CLASS, FILE.py or FILE.py:CLASS (repeatable; docs/python.md)\n"
            "  --python PY     the interpreter for them, a path or a name in PATH (default python3)\n"
            "  --python-device DEV\n"
            "                  the device they run on and are checked as (default cpu; e.g. cuda)\n"
            "  --stack-backend B\n"
            "                  in model cases, the layers not under test run on B (default: reference, or\n"
            "                  cpu at a dtype the reference lacks: f16, bf16)\n"
            "  --tolerance F   a tolerance profile consulted before each case's own: the first profile\n"
            "                  with entries for a check's (device, dtype) gives its tolerances (repeatable)\n"
            "  --device-profile DEV=AS\n"
            "                  check backends of device DEV against the tolerances of device AS\n"
            "                  (e.g. a plugin's own device against cpu's numbers; repeatable). Never\n"
            "                  implied: a device without tolerances is an input error\n"
            "running:\n"
            "  --long          also the cases under long/ directories found while searching a PATH\n"
            "                  (long_decode, length_sweep on the realistic shapes...: minutes, not seconds);\n"
            "                  without it they are left out and counted in the summary. A PATH named on the\n"
            "                  command line always runs, a long/ directory or a file in one included\n"
            "  --seeds N       randomised scenarios (random splits, distractors) over N seeds; the worst\n"
            "                  headroom over the seeds is reported\n"
            "  --threads N     worker threads for backends that take them (default: theirs)\n"
            "  -j, --jobs N    N checks at a time, each in its own process (default: the CPU count)\n"
            "  --timeout S     a check running longer than S seconds is killed and fails (default %d)\n"
            "  --shard K/N     run shard K (1..N) of the selected checks, split evenly by expected cost\n"
            "                  (the same plan in every shard; join the reports with `mixcheck merge`).\n"
            "                  Under Bazel, TEST_TOTAL_SHARDS/TEST_SHARD_INDEX give it, TEST_SHARD_STATUS_FILE\n"
            "                  is touched and the JUnit report goes to XML_OUTPUT_FILE (unless --junit)\n"
            "  --no-isolate    run checks inside the mixcheck process (for debuggers; a crash ends the run)\n"
            "  --no-experiments  the diagnosis of a failing backend runs no experiments on it (docs/diagnosis.md §6.5)\n"
            "  --allow-unsupported\n"
            "                  a backend under test (a --plugin's or --python-backend's, the one --backend\n"
            "                  names) none of whose checks ran (all unsupported or not scheduled) is not an\n"
            "                  exit 125 (\"not tested\"); its checks are still counted as unsupported\n"
            "  --bisect        for `git bisect run`: a plugin that cannot be loaded exits 125 (skip the\n"
            "                  commit); everything else keeps its code, so a typo is 2, not a skip\n"
            "baseline:\n"
            "  --baseline REPORT.json\n"
            "                  compare every tensor with the same case/scenario/backend/dtype/tensor record\n"
            "                  of an earlier JSON report: a check that passes but whose headroom or max abs\n"
            "                  error grew by more than --max-drift times is DRIFT (exit 1). An old value of 0\n"
            "                  counts as 1e-3 of the tolerance. Records on one side only are listed, not failed;\n"
            "                  a baseline with no tensor record in common with the run is an input error\n"
            "  --max-drift R   the growth allowed over the baseline, R > 1 (default 1.3)\n"
            "reports:\n"
            "  --json FILE     the JSON report          --junit FILE   the JUnit XML report\n"
            "  --markdown FILE a Markdown summary (totals, failures with their diagnosis, most drifted,\n"
            "                  slowest checks) for a CI step summary (append it to $GITHUB_STEP_SUMMARY)\n"
            "  --html FILE     one self-contained HTML page: the headroom matrix and, per failing or\n"
            "                  most-drifted check, its error against token position\n"
            "  --record DIR    add this run's numbers to the history store DIR (one new file per run, keyed\n"
            "                  by commit; read by `mixcheck history DIR` and `mixcheck diff`)\n"
            "  --color WHEN    auto (default: on a terminal, unless NO_COLOR is set), always, never\n"
            "  -q, --quiet     print only failures, problems and the summary\n"
            "\n"
            "Case files are *.yaml or *.yml. Two report options naming one file are a usage error.\n"
            "\n"
            "exit: 0 all passed; 1 a check failed, errored or was nondeterministic; 2 usage or input\n"
            "error (a report that cannot be written, something asked for that ran no check); 125 could\n"
            "not test (a backend a case names is missing, every check unsupported, a backend under test\n"
            "none of whose checks ran)\n",
            MC_DEFAULT_CASES, MC_DEFAULT_TIMEOUT_S);
}

struct run_cli {
    struct mc_run_options opt;
    const char *json_path;
    const char *junit_path;
    const char *markdown_path;
    const char *html_path;
    const char *record_dir;
    const char *color;
    int quiet;
    int bisect;
    const char *plugins[MC_PLUGIN_MAX];
    int n_plugins;
    const char *python_specs[MC_PYTHON_MAX_BACKENDS];
    int n_python;
    struct mc_python_options python;
    const char *tolerance_paths[MC_RUN_MAX_TOLERANCES];
    struct mc_tolerance_profile tolerances[MC_RUN_MAX_TOLERANCES];
    const char **paths;
    int n_paths;
    char rerun[2048];
    struct mc_provenance prov;
    const char *baseline_path;
    double max_drift; /* 0 = not given */
    struct mc_report_doc baseline;
};

enum {
    OPT_FAMILY = 256,
    OPT_SCENARIO,
    OPT_BACKEND,
    OPT_DTYPE,
    OPT_JSON,
    OPT_JUNIT,
    OPT_COLOR,
    OPT_PLUGIN,
    OPT_BISECT,
    OPT_SEEDS,
    OPT_THREADS,
    OPT_TIMEOUT,
    OPT_NO_ISOLATE,
    OPT_NO_EXPERIMENTS,
    OPT_TOLERANCE,
    OPT_DEVICE_PROFILE,
    OPT_BASELINE,
    OPT_MAX_DRIFT,
    OPT_LONG,
    OPT_MARKDOWN,
    OPT_HTML,
    OPT_RECORD,
    OPT_SHARD,
    OPT_PYTHON,
    OPT_PYTHON_BACKEND,
    OPT_PYTHON_DEVICE,
    OPT_STACK_BACKEND,
    OPT_ALLOW_UNSUPPORTED,
    OPT_HELP
};

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "mixcheck: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 2;
}

/* Appends "option value" to the options a rerun command needs (quoted where the shell needs it). */
static void rerun_option(struct run_cli *cli, size_t *used, const char *option, const char *value)
{
    mc_cli_append_arg(cli->rerun, sizeof cli->rerun, used, option);
    mc_cli_append_arg(cli->rerun, sizeof cli->rerun, used, value);
}

/* "K/N" with 1 <= K <= N <= 100000; 0 on success. */
static int parse_shard(const char *text, int *k, int *n)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", text);
    char *slash = strchr(buf, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    if (mc_cli_parse_count(buf, 100000, k) != 0 || mc_cli_parse_count(slash + 1, 100000, n) != 0 || *k > *n)
        return -1;
    return 0;
}

/* Bazel's test sharding (TEST_TOTAL_SHARDS, TEST_SHARD_INDEX 0-based), unless --shard was given; 0 or
 * the exit code of a bad value. Touching TEST_SHARD_STATUS_FILE tells Bazel the test shards itself. */
static int bazel_shard(struct mc_run_options *o)
{
    const char *total = getenv("TEST_TOTAL_SHARDS"), *index = getenv("TEST_SHARD_INDEX");
    const char *status = getenv("TEST_SHARD_STATUS_FILE");
    if (status && *status) {
        FILE *f = fopen(status, "a");
        if (f)
            fclose(f);
    }
    if (o->shard_count > 0 || total == NULL || *total == '\0')
        return 0;
    int n, k;
    char *end;
    long idx = index ? strtol(index, &end, 10) : -1;
    if (mc_cli_parse_count(total, 100000, &n) != 0 || index == NULL || end == index || *end != '\0' || idx < 0 ||
        idx >= n)
        return usage_error("TEST_TOTAL_SHARDS / TEST_SHARD_INDEX: expected 0 <= index < total (index '%s')",
                           index ? index : "unset");
    k = (int)idx + 1;
    o->shard_index = k;
    o->shard_count = n;
    return 0;
}

/* The file a report option names, for comparing two of them: the real path of its folder and its own
 * name (the file itself need not exist yet), else the text as given. */
static void report_identity(const char *path, char *buf, size_t len)
{
    char dir[4096], real[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
    if (realpath(dir, real) != NULL)
        snprintf(buf, len, "%s/%s", real, name);
    else
        snprintf(buf, len, "%s", path);
}

/* Two report options naming one file would leave only the last written: a usage error before the run. */
static int distinct_reports(const struct run_cli *cli)
{
    static const char *const opts[] = {"--json", "--junit", "--markdown", "--html"};
    const char *paths[] = {cli->json_path, cli->junit_path, cli->markdown_path, cli->html_path};
    char ids[4][4096 + PATH_MAX];
    for (int i = 0; i < 4; i++) {
        if (paths[i] == NULL)
            continue;
        report_identity(paths[i], ids[i], sizeof ids[i]);
        for (int k = 0; k < i; k++)
            if (paths[k] != NULL && strcmp(ids[i], ids[k]) == 0) {
                fprintf(stderr, "mixcheck: %s %s and %s %s name the same file: give each report its own\n", opts[k],
                        paths[k], opts[i], paths[i]);
                return 2;
            }
    }
    return 0;
}

/* Parses argv (argv[1] == "run"); 0, or the exit code of a usage error (already printed). */
static int parse_args(int argc, char **argv, struct run_cli *cli)
{
    static const struct option longopts[] = {
        {"family", required_argument, NULL, OPT_FAMILY},
        {"scenario", required_argument, NULL, OPT_SCENARIO},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"json", required_argument, NULL, OPT_JSON},
        {"junit", required_argument, NULL, OPT_JUNIT},
        {"color", required_argument, NULL, OPT_COLOR},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, OPT_HELP},
        {"plugin", required_argument, NULL, OPT_PLUGIN},
        {"bisect", no_argument, NULL, OPT_BISECT},
        {"seeds", required_argument, NULL, OPT_SEEDS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"jobs", required_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"no-isolate", no_argument, NULL, OPT_NO_ISOLATE},
        {"no-experiments", no_argument, NULL, OPT_NO_EXPERIMENTS},
        {"tolerance", required_argument, NULL, OPT_TOLERANCE},
        {"device-profile", required_argument, NULL, OPT_DEVICE_PROFILE},
        {"baseline", required_argument, NULL, OPT_BASELINE},
        {"max-drift", required_argument, NULL, OPT_MAX_DRIFT},
        {"long", no_argument, NULL, OPT_LONG},
        {"markdown", required_argument, NULL, OPT_MARKDOWN},
        {"html", required_argument, NULL, OPT_HTML},
        {"record", required_argument, NULL, OPT_RECORD},
        {"shard", required_argument, NULL, OPT_SHARD},
        {"python", required_argument, NULL, OPT_PYTHON},
        {"python-backend", required_argument, NULL, OPT_PYTHON_BACKEND},
        {"python-device", required_argument, NULL, OPT_PYTHON_DEVICE},
        {"stack-backend", required_argument, NULL, OPT_STACK_BACKEND},
        {"allow-unsupported", no_argument, NULL, OPT_ALLOW_UNSUPPORTED},
        {NULL, 0, NULL, 0},
    };
    struct mc_run_options *o = &cli->opt;
    size_t used = 0;
    opterr = 0;
    optind = 2; /* argv[1] is the command */
    o->isolate = 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    o->jobs = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus; /* results are the same for any -j */
    o->timeout_s = MC_DEFAULT_TIMEOUT_S;
    int c, n = 0;
    while ((c = getopt_long(argc, argv, "k:qj:h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_FAMILY:
            o->filter.family = optarg;
            break;
        case OPT_SCENARIO:
            o->filter.scenario = optarg;
            break;
        case OPT_BACKEND:
            o->filter.backend = optarg;
            break;
        case OPT_DTYPE:
            o->filter.dtype = optarg;
            break;
        case 'k':
            if (o->filter.n_patterns >= MC_RUN_MAX_PATTERNS)
                return usage_error("-k: at most 16 patterns (got '%s' too)", optarg);
            o->filter.patterns[o->filter.n_patterns++] = optarg;
            break;
        case OPT_JSON:
            cli->json_path = optarg;
            break;
        case OPT_JUNIT:
            cli->junit_path = optarg;
            break;
        case OPT_MARKDOWN:
            cli->markdown_path = optarg;
            break;
        case OPT_HTML:
            cli->html_path = optarg;
            break;
        case OPT_RECORD:
            cli->record_dir = optarg;
            break;
        case OPT_SHARD:
            if (parse_shard(optarg, &o->shard_index, &o->shard_count) != 0)
                return usage_error("--shard: expected K/N with 1 <= K <= N, e.g. 2/4 (got '%s')", optarg);
            break;
        case OPT_COLOR:
            cli->color = optarg;
            if (strcmp(optarg, "auto") && strcmp(optarg, "always") && strcmp(optarg, "never"))
                return usage_error("--color: expected auto, always or never (got '%s')", optarg);
            break;
        case 'q':
            cli->quiet = 1;
            break;
        case OPT_PLUGIN:
            if (cli->n_plugins >= MC_PLUGIN_MAX)
                return usage_error("--plugin: at most 16 plugins (got '%s' too)", optarg);
            cli->plugins[cli->n_plugins++] = optarg;
            rerun_option(cli, &used, "--plugin", optarg);
            break;
        case OPT_PYTHON:
            cli->python.python = optarg;
            rerun_option(cli, &used, "--python", optarg);
            break;
        case OPT_PYTHON_DEVICE:
            if (optarg[0] == '\0')
                return usage_error("--python-device: expected a device name, e.g. cuda (got '%s')", optarg);
            cli->python.device = optarg;
            rerun_option(cli, &used, "--python-device", optarg);
            break;
        case OPT_PYTHON_BACKEND:
            if (cli->n_python >= MC_PYTHON_MAX_BACKENDS)
                return usage_error("--python-backend: at most 32 (got '%s' too)", optarg);
            cli->python_specs[cli->n_python++] = optarg;
            rerun_option(cli, &used, "--python-backend", optarg);
            break;
        case OPT_STACK_BACKEND:
            o->stack_backend = optarg;
            rerun_option(cli, &used, "--stack-backend", optarg);
            break;
        case OPT_TOLERANCE:
            if (o->n_tolerances >= MC_RUN_MAX_TOLERANCES)
                return usage_error("--tolerance: at most 8 profiles (got '%s' too)", optarg);
            cli->tolerance_paths[o->n_tolerances++] = optarg;
            rerun_option(cli, &used, "--tolerance", optarg);
            break;
        case OPT_DEVICE_PROFILE: {
            char *eq = strchr(optarg, '=');
            if (eq == NULL || eq == optarg || eq[1] == '\0')
                return usage_error("--device-profile: expected DEVICE=AS, e.g. myport=cpu (got '%s')", optarg);
            if (o->n_device_map >= MC_RUN_MAX_DEVICE_MAP)
                return usage_error("--device-profile: at most 8 mappings (got '%s' too)", optarg);
            rerun_option(cli, &used, "--device-profile", optarg);
            *eq = '\0'; /* argv is ours to split */
            o->device_map[o->n_device_map].device = optarg;
            o->device_map[o->n_device_map++].as = eq + 1;
            break;
        }
        case OPT_BISECT:
            cli->bisect = 1;
            break;
        case OPT_ALLOW_UNSUPPORTED:
            o->allow_unsupported = 1;
            mc_cli_append_arg(cli->rerun, sizeof cli->rerun, &used, "--allow-unsupported");
            break;
        case OPT_BASELINE:
            cli->baseline_path = optarg;
            rerun_option(cli, &used, "--baseline", optarg);
            break;
        case OPT_MAX_DRIFT: {
            char *end;
            double r = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(r > 1.0) || !(r < 1e300))
                return usage_error("--max-drift: expected a ratio greater than 1, e.g. 1.3 (got '%s')", optarg);
            cli->max_drift = r;
            rerun_option(cli, &used, "--max-drift", optarg);
            break;
        }
        case OPT_SEEDS:
            if (mc_cli_parse_count(optarg, 100000, &o->seeds) != 0)
                return usage_error("--seeds: expected an integer in [1, 100000] (got '%s')", optarg);
            rerun_option(cli, &used, "--seeds", optarg);
            break;
        case 'j':
            if (mc_cli_parse_count(optarg, 64, &o->jobs) != 0)
                return usage_error("--jobs: expected an integer in [1, 64] (got '%s')", optarg);
            break;
        case OPT_TIMEOUT:
            if (mc_cli_parse_count(optarg, 86400, &n) != 0)
                return usage_error("--timeout: expected seconds in [1, 86400] (got '%s')", optarg);
            o->timeout_s = n;
            break;
        case OPT_NO_ISOLATE:
            o->isolate = 0;
            break;
        case OPT_NO_EXPERIMENTS:
            o->no_experiments = 1;
            break;
        case OPT_LONG:
            o->long_cases = 1;
            mc_cli_append_arg(cli->rerun, sizeof cli->rerun, &used, "--long");
            break;
        case OPT_THREADS:
            if (mc_cli_parse_count(optarg, 1024, &o->threads) != 0)
                return usage_error("--threads: expected an integer in [1, 1024] (got '%s')", optarg);
            rerun_option(cli, &used, "--threads", optarg);
            break;
        case OPT_HELP:
        case 'h':
            usage(stdout);
            exit(0);
        default:
            return usage_error("run: unknown or incomplete option '%s' (see mixcheck run --help)", argv[optind - 1]);
        }
    }
    if (bazel_shard(o) != 0)
        return 2;
    if (cli->junit_path == NULL && getenv("XML_OUTPUT_FILE") && *getenv("XML_OUTPUT_FILE"))
        cli->junit_path = getenv("XML_OUTPUT_FILE");
    if ((cli->python.python || cli->python.device) && cli->n_python == 0)
        return usage_error("--python%s: needs --python-backend SPEC (the backends to run)",
                           cli->python.device ? "-device" : "");
    if (cli->max_drift > 0 && cli->baseline_path == NULL)
        return usage_error("--max-drift%s: needs --baseline REPORT.json", "");
    if (cli->baseline_path && cli->max_drift == 0)
        cli->max_drift = 1.3;
    cli->paths = (const char **)(argv + optind);
    cli->n_paths = argc - optind;
    o->rerun_options = cli->rerun;
    return distinct_reports(cli);
}

/* Names a filter value that no backend, scenario, family or dtype has, with the known ones. */
static int validate_filters(const struct run_cli *cli, const struct mc_registry *reg)
{
    const struct mc_run_filter *f = &cli->opt.filter;
    enum mc_family fam;
    enum mc_scenario_kind sk;
    enum mc_dtype dt;
    if (f->family && mc_family_from_name(f->family, &fam) != 0)
        return usage_error("--family: unknown family '%s' (known: mamba2, mamba1, gdn, shortconv, attention, lightning, kda)",
                           f->family);
    if (f->scenario && mc_scenario_from_name(f->scenario, &sk) != 0) {
        char known[1024];
        size_t used = 0;
        for (int s = 0; s < MC_SCENARIO_COUNT; s++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", s ? ", " : "",
                                     mc_scenario_name((enum mc_scenario_kind)s));
        fprintf(stderr, "mixcheck: --scenario: unknown scenario '%s' (known: %s)\n", f->scenario, known);
        return 2;
    }
    if (f->dtype && mc_dtype_from_name(f->dtype, &dt) != 0)
        return usage_error("--dtype: unknown dtype '%s' (known: f64, f32, f16, bf16)", f->dtype);
    if (f->backend && !mc_registry_has_name(reg, f->backend)) {
        char known[1024];
        mc_registry_names(reg, known, sizeof known);
        fprintf(stderr, "mixcheck: --backend: unknown backend '%s' (known: %s; a plugin's backends are known once "
                        "it is loaded with --plugin)\n",
                f->backend, known);
        return 2;
    }
    return 0;
}

struct printer {
    int quiet;
    struct mc_console con;
};

static void on_check(const struct mc_check_result *res, void *user)
{
    const struct printer *pr = user;
    if (pr->quiet && res->status == MC_CHECK_PASS)
        return;
    mc_report_console_check(&pr->con, res);
    fflush(pr->con.out);
}

static void on_problem(const struct mc_run_problem *p, void *user)
{
    const struct printer *pr = user;
    mc_report_console_problem(&pr->con, p);
    fflush(pr->con.out);
}

static void on_diagnosis(const struct mc_diagnosis *d, void *user)
{
    const struct printer *pr = user;
    mc_report_console_diagnosis(&pr->con, d);
    fflush(pr->con.out);
}

/* Loads the --tolerance profiles; 0, or 2 after printing the error. */
static int load_tolerances(struct run_cli *cli)
{
    for (int i = 0; i < cli->opt.n_tolerances; i++) {
        struct mc_error err = {0};
        if (mc_tolerance_load(cli->tolerance_paths[i], &cli->tolerances[i], &err) != MC_ERR_NONE) {
            fprintf(stderr, "mixcheck: --tolerance: %s\n", err.msg);
            return mc_error_exit_code(err.code);
        }
        cli->opt.tolerances[i] = &cli->tolerances[i];
    }
    return 0;
}

/* 1 when a path as given names a long/ directory or something in one. */
static int in_long_dir(const char *path)
{
    for (const char *p = path; (p = strstr(p, "long")) != NULL; p += 4)
        if ((p == path || p[-1] == '/') && (p[4] == '\0' || p[4] == '/'))
            return 1;
    return 0;
}

static int run(struct run_cli *cli, const struct mc_registry *reg)
{
    static const char *default_paths[] = {MC_DEFAULT_CASES};
    const char *const *paths = cli->n_paths ? cli->paths : default_paths;
    int n_paths = cli->n_paths ? cli->n_paths : 1;
    struct printer pr = {.quiet = cli->quiet,
                         .con = {.out = stdout,
                                 .color = mc_cli_use_color(cli->color),
                                 .argv0 = "mixcheck",
                                 .rerun_options = cli->rerun}};
    struct mc_run_callbacks cb = {.on_check = on_check, .on_problem = on_problem, .on_diagnosis = on_diagnosis, .user = &pr};
    for (int i = 0; i < n_paths && !cli->opt.long_cases && !cli->quiet; i++)
        if (in_long_dir(paths[i]))
            printf("note: %s is in a long/ directory: its cases run because it is named (--long is for the long/ "
                   "directories found while searching)\n",
                   paths[i]);
    struct mc_run_report rep;
    struct mc_error err = {0};
    int code;
    if (mc_run(paths, n_paths, reg, &cli->opt, &cb, &rep, &err) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: %s\n", err.msg);
        code = mc_error_exit_code(err.code);
    } else {
        code = mc_run_exit_code(&rep);
    }
    mc_provenance_set_start(&cli->prov, rep.started_unix);
    rep.provenance = &cli->prov;
    struct mc_baseline_result drift = {0};
    if (cli->baseline_path && code != 2) {
        if (mc_baseline_apply(&cli->baseline, cli->max_drift, &rep, &drift, &err) != MC_ERR_NONE) {
            fprintf(stderr, "mixcheck: --baseline: %s\n", err.msg);
            code = mc_error_exit_code(err.code);
        } else {
            rep.baseline = &drift;
            code = mc_run_exit_code(&rep);
            if (drift.n_compared == 0 && rep.n_checks > 0) {
                fprintf(stderr,
                        "mixcheck: --baseline %s: the baseline does not cover this run: no tensor record "
                        "(case/scenario/backend/dtype/tensor) in common (%d in the baseline, %d check(s) run)\n",
                        cli->baseline_path, cli->baseline.n_records, rep.n_checks);
                code = 2;
            }
        }
    }
    /* a report asked for and not written is an input error whatever the checks said: a gate must
     * not read a missing report as a pass */
    struct mc_error werr = {0};
    if (cli->json_path && mc_report_json_write(cli->json_path, &rep, code, &werr) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: --json: %s\n", werr.msg);
        code = 2;
    }
    mc_error_clear(&werr);
    if (cli->junit_path && mc_report_junit_write(cli->junit_path, &rep, &werr) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: --junit: %s\n", werr.msg);
        code = 2;
    }
    mc_error_clear(&werr);
    if (cli->markdown_path && mc_report_markdown_write(cli->markdown_path, &rep, code, &werr) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: --markdown: %s\n", werr.msg);
        code = 2;
    }
    mc_error_clear(&werr);
    if (cli->html_path && mc_report_html_write(cli->html_path, &rep, code, &werr) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: --html: %s\n", werr.msg);
        code = 2;
    }
    mc_error_clear(&werr);
    if (cli->record_dir) {
        char rec[4096];
        if (mc_history_new_path(cli->record_dir, cli->prov.git_commit, rep.started_unix, rec, sizeof rec, &werr) !=
                MC_ERR_NONE ||
            mc_report_json_write_flags(rec, &rep, code, MC_JSON_NO_PROFILE, &werr) != MC_ERR_NONE) {
            fprintf(stderr, "mixcheck: --record: %s\n", werr.msg);
            code = 2;
        }
    }
    mc_report_console_baseline(&pr.con, &rep);
    mc_report_console_summary(&pr.con, &rep, code);
    mc_run_report_free(&rep);
    mc_baseline_result_free(&drift);
    return code;
}

/* The rest of the reports' provenance (provenance.h): what the options chose. */
static void collect_provenance(struct run_cli *cli)
{
    struct mc_provenance *p = &cli->prov;
    mc_blas_core_describe(p->blas, sizeof p->blas);
    p->threads = cli->opt.threads;
    p->jobs = cli->opt.isolate ? cli->opt.jobs : 1;
    p->isolate = cli->opt.isolate;
    p->seeds = cli->opt.seeds;
    for (int i = 0; i < cli->n_plugins; i++)
        mc_provenance_add_plugin(p, cli->plugins[i]); /* at most MC_PLUGIN_MAX, as many as it holds */
}

int mc_cmd_run(int argc, char **argv)
{
    struct run_cli *cli = calloc(1, sizeof *cli);
    if (cli == NULL) {
        fprintf(stderr, "mixcheck: out of memory\n");
        return 2;
    }
    struct mc_registry reg;
    struct mc_plugins plugins;
    mc_registry_init(&reg);
    mc_plugins_init(&plugins);
    /* before parse_args: getopt_long permutes argv, and the report records it as typed */
    int code = mc_provenance_collect(&cli->prov, argc, argv) == 0 ? 0 : 2;
    if (code != 0)
        fprintf(stderr, "mixcheck: out of memory\n");
    if (code == 0)
        code = parse_args(argc, argv, cli);
    if (code == 0)
        collect_provenance(cli);
    if (code == 0)
        code = mc_cli_load_backends(&reg, &plugins, cli->plugins, cli->n_plugins, cli->bisect);
    if (code == 0 && cli->n_python > 0) {
        if (cli->python.python == NULL)
            cli->python.python = "python3";
        code = mc_cli_load_python(&reg, &plugins, &cli->python, cli->python_specs, cli->n_python, cli->bisect);
        if (code == 0)
            cli->prov.python = *mc_python_provenance(); /* the interpreter, spec files, package versions */
    }
    if (code == 0)
        code = validate_filters(cli, &reg);
    if (code == 0)
        code = load_tolerances(cli);
    if (code == 0 && cli->baseline_path) {
        /* read before the run: a bad baseline is an input error, found before any check runs */
        struct mc_error err = {0};
        if (mc_report_read(cli->baseline_path, &cli->baseline, &err) != MC_ERR_NONE) {
            fprintf(stderr, "mixcheck: --baseline: %s\n", err.msg);
            code = mc_error_exit_code(err.code);
        }
    }
    if (code == 0)
        code = run(cli, &reg);
    for (int i = 0; i < cli->opt.n_tolerances; i++)
        mc_tolerance_free(&cli->tolerances[i]);
    mc_plugins_unload(&plugins);
    mc_python_unload();
    mc_registry_free(&reg);
    mc_provenance_free(&cli->prov);
    mc_report_doc_free(&cli->baseline);
    free(cli);
    return code;
}
