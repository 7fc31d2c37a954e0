/*
 * main.c — the mixcheck command: dispatches to one subcommand per file (cmd_run.c, cmd_list.c,
 * cmd_diff.c, cmd_history.c, cmd_merge.c, bench.c). Exit codes are the subcommands' (0 all passed, 1 a check failed, 2 usage or input error,
 * 125 could not test).
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "blascore.h"
#include "cli.h"
#include "mixcheck/backend.h"
#include "exec/provenance.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: mixcheck run [PATH...] [options]    run cases (default path: %s/; run --help)\n"
                 "       mixcheck list [PATH...] [--coverage] list cases, backends and scenario coverage (list --help)\n"
                 "       mixcheck bench [options]             time a backend after its cases pass (bench --help)\n"
                 "       mixcheck diff A.json B.json          the checks whose numbers moved between two reports (diff --help)\n"
                 "       mixcheck history DIR [-k PATTERN]    the trend and steps of every check over the runs recorded\n"
                 "                                            with run --record DIR (history --help)\n"
                 "       mixcheck merge --json OUT SHARD...   join the reports of the shards of a run (merge --help)\n"
                 "       mixcheck --version\n"
                 "exit: 0 all passed, 1 a check failed, 2 usage or input error, 125 could not test\n",
            MC_DEFAULT_CASES);
}

int main(int argc, char **argv)
{
    mc_blas_core_select(argv); /* may re-execute the process once (blascore.h) */
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        char blas[512];
        mc_blas_core_describe(blas, sizeof blas);
        int dirty = mc_build_git_dirty();
        printf("mixcheck %s (backend ABI %u)\ncommit %s (%s)%s\n%s\n", MC_VERSION, MIXCHECK_ABI_VERSION,
               mc_build_git_commit(), mc_build_git_describe(),
               dirty > 0 ? ", dirty: uncommitted changes at build time" : dirty == 0 ? ", clean" : "", blas);
        return 0;
    }
    if (strcmp(cmd, "run") == 0)
        return mc_cmd_run(argc, argv);
    if (strcmp(cmd, "list") == 0)
        return mc_cmd_list(argc, argv);
    if (strcmp(cmd, "diff") == 0)
        return mc_cmd_diff(argc, argv);
    if (strcmp(cmd, "history") == 0)
        return mc_cmd_history(argc, argv);
    if (strcmp(cmd, "merge") == 0)
        return mc_cmd_merge(argc, argv);
    if (strcmp(cmd, "bench") == 0)
        return mc_cli_bench(argc, argv, mc_cli_register_builtins);
    fprintf(stderr, "mixcheck: unknown command '%s' (run, list, bench, diff, history, merge; see --help)\n", cmd);
    return 2;
}
