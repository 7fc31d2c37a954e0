/*
 * main.c — the mixcheck command line: `run` drives cases through backends and writes reports,
 * `list` shows cases, backends and the family x scenario coverage. The only place that prints.
 *
 * Exit codes (scenarios.md §5): 0 all passed, 1 a check failed, 2 usage or input error,
 * 125 could not test (for `git bisect run`).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "blascore.h"
#include "case.h"
#include "cpu.h"
#include "family.h"
#include "plugin.h"
#include "reference.h"
#include "registry.h"
#include "report.h"
#include "runner.h"

#define MC_VERSION "0.1.0"
#define MC_DEFAULT_CASES "cases"
#define MC_DEFAULT_TIMEOUT_S 300

static void usage(FILE *out, const char *argv0)
{
    fprintf(out,
            "usage: %s run [PATH...] [options]     run cases (default path: %s/)\n"
            "       %s list [PATH...] [--coverage] list cases, backends and scenario coverage\n"
            "       %s bench [--family F] [--backend B] [--len L] [--batch B] [--dtype T] [--core] [--json FILE]\n"
            "                                      time a backend after its cases pass (see bench --help)\n"
            "\n"
            "run options:\n"
            "  --family F      only cases of family F (mamba2, mamba1, gdn, shortconv)\n"
            "  --scenario S    only scenario S (prefill, decode, chunked, first_token_causality, ...)\n"
            "  --backend B     only backend B\n"
            "  --dtype T       only dtype T (f64, f32, f16, bf16)\n"
            "  -k PATTERN      only checks whose id case/scenario/backend/dtype contains PATTERN\n"
            "                  (a glob when it holds * ? or [)\n"
            "  --json FILE     write the JSON report\n"
            "  --junit FILE    write the JUnit XML report\n"
            "  --plugin LIB    load backends from a shared library (repeatable); with --backend NAME a\n"
            "                  plugin backend runs on every case of its family\n"
            "  --bisect        for `git bisect run`: a run that could not test (exit 2) exits 125\n"
            "  --seeds N       run randomised scenarios (random splits, distractors) over N seeds;\n"
            "                  the worst headroom over the seeds is reported\n"
            "  --threads N     worker threads for backends that take them (default: theirs)\n"
            "  -j, --jobs N    run N checks at a time, each in its own process (default: the CPU count)\n"
            "  --timeout S     a check that runs longer than S seconds is killed and fails (default %d)\n"
            "  --no-isolate    run checks inside the mixcheck process (for debuggers; a crash ends the run)\n"
            "  --color WHEN    auto (default: on a terminal, unless NO_COLOR is set), always, never\n"
            "  -q, --quiet     print only failures and the summary\n"
            "\n"
            "exit: 0 all passed, 1 a check failed, 2 usage or input error, 125 could not test\n",
            argv0, MC_DEFAULT_CASES, argv0, argv0, MC_DEFAULT_TIMEOUT_S);
}

static int register_builtins(struct mc_registry *reg, struct mc_error *err)
{
    const struct mc_backend_ops *const builtins[] = {
        mc_reference_mamba2_ops(),
        mc_reference_mamba1_ops(),
        mc_reference_gdn_ops(),
        mc_reference_shortconv_ops(),
        mc_cpu_mamba2_ops(),
        mc_cpu_mamba1_ops(),
        mc_cpu_shortconv_ops(),
        mc_cpu_gdn_ops(),
    };
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (mc_registry_add(reg, builtins[i], "built-in", err) != MC_ERR_NONE)
            return -1;
    return 0;
}

struct cli {
    struct mc_run_options opt;
    const char *json_path;
    const char *junit_path;
    const char *color;
    int quiet;
    int coverage;
    int bisect;
    const char *plugins[MC_PLUGIN_MAX];
    int n_plugins;
    const char **paths;
    int n_paths;
};

enum {
    OPT_FAMILY = 256,
    OPT_SCENARIO,
    OPT_BACKEND,
    OPT_DTYPE,
    OPT_JSON,
    OPT_JUNIT,
    OPT_COLOR,
    OPT_COVERAGE,
    OPT_PLUGIN,
    OPT_BISECT,
    OPT_SEEDS,
    OPT_THREADS,
    OPT_TIMEOUT,
    OPT_NO_ISOLATE,
    OPT_HELP
};

static int validate_filters(const struct cli *cli, struct mc_error *err)
{
    const struct mc_run_filter *f = &cli->opt.filter;
    enum mc_family fam;
    enum mc_scenario_kind sk;
    enum mc_dtype dt;
    if (f->family && mc_family_from_name(f->family, &fam) != 0)
        return mc_error_set(err, MC_ERR_USAGE, "--family: unknown family '%s' (mamba2, mamba1, gdn, shortconv)",
                            f->family);
    if (f->scenario && mc_scenario_from_name(f->scenario, &sk) != 0)
        return mc_error_set(err, MC_ERR_USAGE, "--scenario: unknown scenario '%s'", f->scenario);
    if (f->dtype && mc_dtype_from_name(f->dtype, &dt) != 0)
        return mc_error_set(err, MC_ERR_USAGE, "--dtype: unknown dtype '%s' (f64, f32, f16, bf16)", f->dtype);
    if (cli->color && strcmp(cli->color, "auto") && strcmp(cli->color, "always") && strcmp(cli->color, "never"))
        return mc_error_set(err, MC_ERR_USAGE, "--color: expected auto, always or never (got '%s')", cli->color);
    return 0;
}

/* Parses a decimal integer in [1, max]; 0 on success. */
static int parse_count(const char *text, int max, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < 1 || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char **argv, struct cli *cli, struct mc_error *err)
{
    static const struct option longopts[] = {
        {"family", required_argument, NULL, OPT_FAMILY}, {"scenario", required_argument, NULL, OPT_SCENARIO},
        {"backend", required_argument, NULL, OPT_BACKEND}, {"dtype", required_argument, NULL, OPT_DTYPE},
        {"json", required_argument, NULL, OPT_JSON},       {"junit", required_argument, NULL, OPT_JUNIT},
        {"color", required_argument, NULL, OPT_COLOR},     {"coverage", no_argument, NULL, OPT_COVERAGE},
        {"quiet", no_argument, NULL, 'q'},                 {"help", no_argument, NULL, OPT_HELP},
        {"plugin", required_argument, NULL, OPT_PLUGIN},   {"bisect", no_argument, NULL, OPT_BISECT},
        {"seeds", required_argument, NULL, OPT_SEEDS},     {"threads", required_argument, NULL, OPT_THREADS},
        {"jobs", required_argument, NULL, 'j'},            {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"no-isolate", no_argument, NULL, OPT_NO_ISOLATE},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 2; /* argv[1] is the command */
    int c;
    cli->opt.isolate = 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cli->opt.jobs = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus; /* results are the same for any -j */
    cli->opt.timeout_s = MC_DEFAULT_TIMEOUT_S;
    int timeout = 0;
    while ((c = getopt_long(argc, argv, "k:qj:", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_FAMILY:
            cli->opt.filter.family = optarg;
            break;
        case OPT_SCENARIO:
            cli->opt.filter.scenario = optarg;
            break;
        case OPT_BACKEND:
            cli->opt.filter.backend = optarg;
            break;
        case OPT_DTYPE:
            cli->opt.filter.dtype = optarg;
            break;
        case 'k':
            cli->opt.filter.pattern = optarg;
            break;
        case OPT_JSON:
            cli->json_path = optarg;
            break;
        case OPT_JUNIT:
            cli->junit_path = optarg;
            break;
        case OPT_COLOR:
            cli->color = optarg;
            break;
        case OPT_COVERAGE:
            cli->coverage = 1;
            break;
        case 'q':
            cli->quiet = 1;
            break;
        case OPT_PLUGIN:
            if (cli->n_plugins >= MC_PLUGIN_MAX)
                return mc_error_set(err, MC_ERR_USAGE, "--plugin: at most %d plugins", MC_PLUGIN_MAX);
            cli->plugins[cli->n_plugins++] = optarg;
            break;
        case OPT_BISECT:
            cli->bisect = 1;
            break;
        case OPT_SEEDS:
            if (parse_count(optarg, 100000, &cli->opt.seeds) != 0)
                return mc_error_set(err, MC_ERR_USAGE, "--seeds: expected an integer in [1, 100000] (got '%s')",
                                    optarg);
            break;
        case 'j':
            if (parse_count(optarg, 64, &cli->opt.jobs) != 0)
                return mc_error_set(err, MC_ERR_USAGE, "--jobs: expected an integer in [1, 64] (got '%s')", optarg);
            break;
        case OPT_TIMEOUT:
            if (parse_count(optarg, 86400, &timeout) != 0)
                return mc_error_set(err, MC_ERR_USAGE, "--timeout: expected seconds in [1, 86400] (got '%s')",
                                    optarg);
            cli->opt.timeout_s = timeout;
            break;
        case OPT_NO_ISOLATE:
            cli->opt.isolate = 0;
            break;
        case OPT_THREADS:
            if (parse_count(optarg, 1024, &cli->opt.threads) != 0)
                return mc_error_set(err, MC_ERR_USAGE, "--threads: expected an integer in [1, 1024] (got '%s')",
                                    optarg);
            break;
        case OPT_HELP:
            usage(stdout, argv[0]);
            exit(0);
        default:
            return mc_error_set(err, MC_ERR_USAGE, "unknown or incomplete option '%s' (see --help)",
                                argv[optind - 1]);
        }
    }
    cli->paths = (const char **)(argv + optind);
    cli->n_paths = argc - optind;
    return validate_filters(cli, err);
}

/* What the run callbacks print with. */
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

static int use_color(const char *when)
{
    if (when && strcmp(when, "always") == 0)
        return 1;
    if (when && strcmp(when, "never") == 0)
        return 0;
    return isatty(fileno(stdout)) && getenv("NO_COLOR") == NULL;
}

static int cmd_run(struct cli *cli, const struct mc_registry *reg, const char *argv0)
{
    static const char *default_paths[] = {MC_DEFAULT_CASES};
    const char *const *paths = cli->n_paths ? cli->paths : default_paths;
    int n_paths = cli->n_paths ? cli->n_paths : 1;
    struct printer pr = {.quiet = cli->quiet, .con = {.out = stdout, .color = use_color(cli->color), .argv0 = argv0}};
    struct mc_run_callbacks cb = {.on_check = on_check, .on_problem = on_problem, .user = &pr};
    struct mc_run_report rep;
    struct mc_error err = {0};
    int code;
    if (mc_run(paths, n_paths, reg, &cli->opt, &cb, &rep, &err) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: %s\n", err.msg);
        code = mc_error_exit_code(err.code);
    } else {
        code = mc_run_exit_code(&rep);
    }
    mc_report_console_summary(&pr.con, &rep, code);
    struct mc_error werr = {0};
    if (cli->json_path && mc_report_json_write(cli->json_path, &rep, code, &werr) != MC_ERR_NONE)
        fprintf(stderr, "mixcheck: %s\n", werr.msg);
    mc_error_clear(&werr);
    if (cli->junit_path && mc_report_junit_write(cli->junit_path, &rep, &werr) != MC_ERR_NONE)
        fprintf(stderr, "mixcheck: %s\n", werr.msg);
    if (werr.code != MC_ERR_NONE && code == 0)
        code = 2;
    mc_run_report_free(&rep);
    return code;
}

static int cmd_list(struct cli *cli, const struct mc_registry *reg)
{
    static const char *default_paths[] = {MC_DEFAULT_CASES};
    const char *const *paths = cli->n_paths ? cli->paths : default_paths;
    int n_paths = cli->n_paths ? cli->n_paths : 1;
    char **files = NULL;
    int n_files = 0, bad = 0;
    int cover[5][MC_SCENARIO_COUNT] = {{0}};
    struct mc_error err = {0};
    if (mc_run_discover(paths, n_paths, &files, &n_files, &err) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: %s\n", err.msg);
        return mc_error_exit_code(err.code);
    }
    printf("cases:\n");
    for (int i = 0; i < n_files; i++) {
        struct mc_case c = {0};
        struct mc_error e = {0};
        if (mc_case_load(files[i], &c, &e) != MC_ERR_NONE) {
            fprintf(stderr, "mixcheck: %s\n", e.msg);
            bad = 1;
            continue;
        }
        printf("  %-24s %-9s %s\n", c.id, mc_family_name(c.family), files[i]);
        printf("      scenarios:");
        for (int s = 0; s < c.n_scenarios; s++) {
            printf(" %s", mc_scenario_name(c.scenarios[s].kind));
            cover[c.family][c.scenarios[s].kind]++;
        }
        printf("\n      backends:");
        for (int b = 0; b < c.n_backends; b++)
            printf(" %s", c.backends[b]);
        printf("  dtypes:");
        for (int d = 0; d < c.n_dtypes; d++)
            printf(" %s", mc_dtype_name(c.dtypes[d]));
        printf("\n");
        mc_case_free(&c);
    }
    mc_run_files_free(files, n_files);
    printf("\nbackends:\n");
    for (int i = 0; i < reg->n; i++) {
        const struct mc_backend_ops *o = reg->entries[i].ops;
        printf("  %-12s %-9s device %-5s dtypes", o->name, mc_family_name(o->family), o->device);
        for (int d = MC_DTYPE_F64; d <= MC_DTYPE_BF16; d++)
            if (o->dtypes & MC_DTYPE_BIT(d))
                printf(" %s", mc_dtype_name((enum mc_dtype)d));
        printf("  (%s)\n", reg->entries[i].origin);
    }
    if (cli->coverage) {
        printf("\ncoverage (cases per family x scenario; '-' = none, 'n/a' = does not apply):\n%-10s", "");
        for (int s = 0; s < MC_SCENARIO_COUNT; s++)
            printf(" %s", mc_scenario_name((enum mc_scenario_kind)s));
        printf("\n");
        for (int f = MC_FAMILY_MAMBA2; f <= MC_FAMILY_SHORTCONV; f++) {
            printf("%-10s", mc_family_name((enum mc_family)f));
            for (int s = 0; s < MC_SCENARIO_COUNT; s++) {
                int w = (int)strlen(mc_scenario_name((enum mc_scenario_kind)s));
                /* only the chunked families have an internal chunk length to vary */
                int applies = s != MC_SCENARIO_CHUNK_SIZE_INVARIANCE || f == MC_FAMILY_MAMBA2 || f == MC_FAMILY_GDN;
                if (cover[f][s])
                    printf(" %*d", w, cover[f][s]);
                else
                    printf(" %*s", w, applies ? "-" : "n/a");
            }
            printf("\n");
        }
    }
    return bad ? 2 : 0;
}

int main(int argc, char **argv)
{
    const char *argv0 = "mixcheck";
    mc_blas_core_select(argv); /* may re-execute the process once (blascore.h) */
    if (argc < 2) {
        usage(stderr, argv0);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout, argv0);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        char blas[512];
        mc_blas_core_describe(blas, sizeof blas);
        printf("mixcheck %s (backend ABI %u)\n%s\n", MC_VERSION, MIXCHECK_ABI_VERSION, blas);
        return 0;
    }
    if (strcmp(argv[1], "bench") == 0)
        return mc_cli_bench(argc, argv, register_builtins);
    int is_run = strcmp(argv[1], "run") == 0, is_list = strcmp(argv[1], "list") == 0;
    if (!is_run && !is_list) {
        fprintf(stderr, "mixcheck: unknown command '%s' (run, list, bench; see --help)\n", argv[1]);
        return 2;
    }
    struct cli cli;
    memset(&cli, 0, sizeof cli);
    struct mc_error err = {0};
    struct mc_registry reg;
    mc_registry_init(&reg);
    if (parse_args(argc, argv, &cli, &err) != 0) {
        fprintf(stderr, "mixcheck: %s\n", err.msg);
        return mc_error_exit_code(err.code);
    }
    struct mc_plugins plugins;
    mc_plugins_init(&plugins);
    int code = 0;
    if (register_builtins(&reg, &err) != 0) {
        code = mc_error_exit_code(err.code);
    } else {
        for (int i = 0; i < cli.n_plugins && err.code == MC_ERR_NONE; i++)
            mc_plugins_load(&plugins, cli.plugins[i], &reg, &err);
        if (err.code != MC_ERR_NONE)
            code = mc_error_exit_code(err.code);
        else
            code = is_run ? cmd_run(&cli, &reg, argv0) : cmd_list(&cli, &reg);
    }
    if (err.code != MC_ERR_NONE)
        fprintf(stderr, "mixcheck: %s\n", err.msg);
    mc_plugins_unload(&plugins);
    /* git bisect: "could not test" is 125, so a commit whose plugin or cases do not load is skipped */
    if (cli.bisect && code == 2)
        code = 125;
    return code;
}
