/*
 * cmd_list.c — `mixcheck list`: the cases under the given paths with their scenarios, backends and
 * dtypes, the registered backends (built-in, from plugins and Python backends), and with --coverage the family x
 * scenario table of how many cases exercise each pair.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case/case.h"
#include "cli.h"
#include "family/family.h"
#include "run/runner.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: mixcheck list [PATH...] [--coverage] [--plugin LIB]... [--python-backend SPEC]...\n"
                 "                     [--python PY] [--python-device DEV]\n"
                 "Lists the cases under PATH (default %s/), the backends (built-in, from each --plugin and\n"
                 "from each --python-backend), and with --coverage how many cases exercise each family x\n"
                 "scenario pair ('-' none, 'n/a' the scenario does not apply to the family).\n"
                 "  --plugin LIB    load backends from a shared library (repeatable)\n"
                 "  --python-backend SPEC\n"
                 "                  load backends written in Python (python/mixcheck_backend): SPEC is MODULE,\n"
                 "                  MODULE:CLASS, FILE.py or FILE.py:CLASS (repeatable), as for mixcheck run\n"
                 "  --python PY     the interpreter for them, a path or a name in PATH (default python3)\n"
                 "  --python-device DEV\n"
                 "                  the device they run on and are listed with (default cpu)\n"
                 "exit: 0, or 2 when a case does not load, an option is wrong or a backend cannot be loaded\n",
            MC_DEFAULT_CASES);
}

/* 1 when a scenario applies to a family: only the chunked families have an internal chunk length. */
static int applies(enum mc_family f, int scenario)
{
    return scenario != MC_SCENARIO_CHUNK_SIZE_INVARIANCE || f == MC_FAMILY_MAMBA2 || f == MC_FAMILY_GDN ||
           f == MC_FAMILY_LIGHTNING || f == MC_FAMILY_KDA;
}

static void print_coverage(int cover[][MC_SCENARIO_COUNT])
{
    printf("\ncoverage (cases per family x scenario; '-' = none, 'n/a' = does not apply):\n%-10s", "");
    for (int s = 0; s < MC_SCENARIO_COUNT; s++)
        printf(" %s", mc_scenario_name((enum mc_scenario_kind)s));
    printf("\n");
    for (int f = MC_FAMILY_MAMBA2; f <= MC_FAMILY_COUNT; f++) {
        if (f == MC_FAMILY_STACK) /* a whole model: not a mixer family */
            continue;
        printf("%-10s", mc_family_name((enum mc_family)f));
        for (int s = 0; s < MC_SCENARIO_COUNT; s++) {
            int w = (int)strlen(mc_scenario_name((enum mc_scenario_kind)s));
            if (cover[f][s])
                printf(" %*d", w, cover[f][s]);
            else
                printf(" %*s", w, applies((enum mc_family)f, s) ? "-" : "n/a");
        }
        printf("\n");
    }
}

static int list(const char *const *paths, int n_paths, int coverage, const struct mc_registry *reg)
{
    char **files = NULL;
    int n_files = 0, bad = 0;
    int cover[MC_FAMILY_COUNT + 1][MC_SCENARIO_COUNT] = {{0}};
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
        char kind[40];
        snprintf(kind, sizeof kind, "%s%s", c.model_type ? "model " : "", c.model_type ? c.model_type : mc_family_name(c.family));
        printf("  %-24s %-9s %s\n", c.id, kind, files[i]);
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
        if (o->caps & MC_CAP_CHUNK_SIZE)
            printf("  chunk_size");
        printf("  (%s)\n", reg->entries[i].origin);
    }
    if (coverage)
        print_coverage(cover);
    return bad ? 2 : 0;
}

int mc_cmd_list(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"coverage", no_argument, NULL, 'c'},
        {"plugin", required_argument, NULL, 'p'},
        {"python", required_argument, NULL, 'y'},
        {"python-backend", required_argument, NULL, 'b'},
        {"python-device", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *plugins[MC_PLUGIN_MAX];
    struct mc_cli_python py = {0};
    int n_plugins = 0, coverage = 0, c;
    opterr = 0;
    optind = 2; /* argv[1] is the command */
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            coverage = 1;
            break;
        case 'p':
            if (n_plugins >= MC_PLUGIN_MAX) {
                fprintf(stderr, "mixcheck: --plugin: at most %d plugins\n", MC_PLUGIN_MAX);
                return 2;
            }
            plugins[n_plugins++] = optarg;
            break;
        case 'y':
        case 'b':
        case 'd':
            if (mc_cli_python_option(&py, c == 'y' ? "--python" : c == 'b' ? "--python-backend" : "--python-device",
                                     optarg) != 0)
                return 2;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "mixcheck: list: unknown or incomplete option '%s' (see mixcheck list --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (mc_cli_python_check(&py) != 0)
        return 2;
    static const char *default_paths[] = {MC_DEFAULT_CASES};
    int n_paths = argc - optind;
    const char *const *paths = n_paths ? (const char *const *)(argv + optind) : default_paths;
    struct mc_registry reg;
    struct mc_plugins pl;
    mc_registry_init(&reg);
    mc_plugins_init(&pl);
    int code = mc_cli_load_backends(&reg, &pl, plugins, n_plugins, 0);
    if (code == 0)
        code = mc_cli_python_start(&reg, &pl, &py, 0);
    if (code == 0)
        code = list(paths, n_paths ? n_paths : 1, coverage, &reg);
    mc_plugins_unload(&pl);
    mc_python_unload();
    mc_registry_free(&reg);
    return code;
}
