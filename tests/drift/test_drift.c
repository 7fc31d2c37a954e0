/*
 * test_drift.c — provenance in real reports, and the acceptance of issue #12: a change that scales
 * the Mamba2 D term by 1 + 1e-5 passes every check, yet `run --baseline --max-drift 1.3` fails it
 * as DRIFT and `mixcheck diff` ranks the drifted checks first. The change is the "drifty" plugin
 * (drifty_plugin.c) built twice under the same backend name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capture.h"
#include "tmpdir.h"

static char tmpdir[] = "/tmp/mixcheck-drift-XXXXXX";
static char out[1 << 20];

#define MIXCHECK MC_BINARY_DIR "/mixcheck"
#define PY "/usr/bin/python3 -c "

static int run(const char *cmd)
{
    return mc_capture(cmd, out, sizeof out);
}

static int runf(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = run(cmd);
    return rc;
}

static void expect(int got, int want, const char *what)
{
    if (got != want)
        fail_msg("%s: exit %d, expected %d; output:\n%.4000s", what, got, want, out);
}

static void test_provenance_in_reports(void **state)
{
    (void)state;
    expect(runf(MIXCHECK " run cases/mamba2/tiny.yaml --backend drifty --plugin %s --threads 2 --json %s/p.json "
                         "--junit %s/p.xml -q",
                MC_DRIFTY_BASE, tmpdir, tmpdir),
           0, "run with reports");
    expect(runf(PY "\"import json,hashlib,sys; r=json.load(open('%s/p.json')); p=r['provenance']; "
                   "ks={'mixcheck_version','git_describe','git_commit','git_dirty','compiler','build_type','openblas',"
                   "'cpu_model','threads','openblas_num_threads','jobs','seeds','started_utc','command_line','plugins',"
                   "'goldens'}; missing=ks-set(p); assert not missing, missing; "
                   "assert p['threads']==2 and p['seeds']==1 and p['jobs']>=1; "
                   "assert p['started_utc'].endswith('Z') and 'T' in p['started_utc']; "
                   "assert 'OpenBLAS' in p['openblas'], p['openblas']; "
                   "assert '--threads 2' in p['command_line'] and 'tiny.yaml' in p['command_line']; "
                   "pl=p['plugins'][0]; assert pl['sha256']==hashlib.sha256(open(pl['path'],'rb').read()).hexdigest(); "
                   "g=p['goldens'][0]; assert g['case']=='mamba2-tiny' and g['golden'].endswith('tiny.h5'); "
                   "assert len(g['content_sha256'])==64; "
                   "assert p['git_commit']=='unknown' or len(p['git_commit'])==40\"",
                tmpdir),
           0, "provenance keys");
    /* the JUnit report stays valid XML, with the provenance as properties of the first suite */
    expect(runf(PY "\"import xml.etree.ElementTree as E; t=E.parse('%s/p.xml'); s=t.getroot().find('testsuite'); "
                   "ps={p.get('name'): p.get('value') for p in s.find('properties')}; "
                   "assert 'mixcheck.git_commit' in ps and 'openblas' in ps and 'golden:mamba2-tiny' in ps, ps; "
                   "assert list(s)[0].tag=='properties'\"",
                tmpdir),
           0, "junit properties");
    expect(run(MIXCHECK " --version"), 0, "--version");
    assert_non_null(strstr(out, "commit "));
}

static void test_drift_acceptance(void **state)
{
    (void)state;
    const char *sel = "cases/mamba2 --backend drifty -q";
    expect(runf(MIXCHECK " run %s --plugin %s --json %s/main.json", sel, MC_DRIFTY_BASE, tmpdir), 0, "baseline run");
    /* the scaled D term passes every check on its own */
    expect(runf(MIXCHECK " run %s --plugin %s --json %s/new.json", sel, MC_DRIFTY_SCALED, tmpdir), 0, "plain run");
    /* ... and drifts against the baseline */
    expect(runf(MIXCHECK " run %s --plugin %s --baseline %s/main.json --max-drift 1.3 --json %s/drift.json "
                         "--junit %s/drift.xml",
                sel, MC_DRIFTY_SCALED, tmpdir, tmpdir, tmpdir),
           1, "run --baseline");
    assert_non_null(strstr(out, "DRIFT mamba2-"));
    assert_non_null(strstr(out, "(baseline "));
    assert_non_null(strstr(out, "drifted"));
    expect(runf(PY "\"import json; r=json.load(open('%s/drift.json')); s=r['summary']; b=r['baseline']; "
                   "d=[x for x in r['results'] if x['status']=='drift']; "
                   "assert s['drift']>0 and s['fail']==0 and s['exit_code']==1, s; "
                   "assert d and all(x['drift']['ratio']>1.3 and x['backend']=='drifty' for x in d); "
                   "assert b['drifted']==len(d) and b['missing_in_baseline']==[] and b['missing_in_run']==[], b; "
                   "print(max(x['headroom'] for x in json.load(open('%s/main.json'))['results'] if x['headroom'] is not None), "
                   "max(x['headroom'] for x in r['results'] if x['headroom'] is not None))\"",
                tmpdir, tmpdir, tmpdir),
           0, "drift in the JSON report");
    print_message("worst f32 headroom: baseline -> scaled D: %s", out);
    expect(runf(PY "\"import xml.etree.ElementTree as E; t=E.parse('%s/drift.xml'); "
                   "f=[x for x in t.iter('failure') if x.get('message')=='drift beyond the baseline']; assert f\"",
                tmpdir),
           0, "drift in the JUnit report");
    /* the same build against its own baseline does not drift */
    expect(runf(MIXCHECK " run %s --plugin %s --baseline %s/main.json", sel, MC_DRIFTY_BASE, tmpdir), 0,
           "no drift against itself");
    /* checks on one side only are listed and do not fail the run */
    expect(runf(MIXCHECK " run %s --plugin %s --scenario prefill --baseline %s/main.json --json %s/sub.json", sel,
                MC_DRIFTY_BASE, tmpdir, tmpdir),
           0, "subset against the baseline");
    assert_non_null(strstr(out, "missing in run: mamba2-"));
    expect(runf(PY "\"import json; b=json.load(open('%s/sub.json'))['baseline']; assert b['missing_in_run'] and "
                   "not b['missing_in_baseline']\"",
                tmpdir),
           0, "missing lists");

    /* diff ranks the drifted checks first */
    expect(runf(MIXCHECK " diff %s/main.json %s/new.json --json %s/diff.json", tmpdir, tmpdir, tmpdir), 1, "diff");
    const char *first = strchr(out, '\n');
    assert_non_null(first);
    assert_true(first[1] == 'x');
    double ratio = atof(first + 2);
    assert_true(ratio > 1.3);
    assert_non_null(strstr(first, "/drifty/f32 "));
    assert_non_null(strstr(first, "worst at batch="));
    expect(runf(PY "\"import json; d=json.load(open('%s/diff.json')); m=d['moved']; dr=json.load(open('%s/drift.json')); "
                   "ids={(x['case'],x['scenario'],x['tensor']) for x in dr['results'] if x['status']=='drift'}; "
                   "top={(x['case'],x['scenario'],x['tensor']) for x in m[:len(ids)]}; assert top==ids, (top^ids); "
                   "assert all(m[i]['ratio']>=m[i+1]['ratio'] for i in range(len(m)-1))\"",
                tmpdir, tmpdir),
           0, "diff ranking");
    expect(runf(MIXCHECK " diff %s/main.json %s/new.json --threshold 100", tmpdir, tmpdir), 0, "diff under threshold");
    expect(runf(MIXCHECK " diff %s/main.json %s/main.json", tmpdir, tmpdir), 0, "diff of a report with itself");
}

static void test_bad_inputs(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/bad.json", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"format\": \"mixcheck-report\",\n \"format_version\": 1,\n \"results\": [1,]}\n", f);
    fclose(f);
    char where[700];
    snprintf(where, sizeof where, "%s:3:16:", path);
    expect(runf(MIXCHECK " run cases/mamba2/tiny.yaml --baseline %s", path), 2, "bad baseline");
    assert_non_null(strstr(out, where));
    expect(runf(MIXCHECK " diff %s %s", path, path), 2, "diff of a bad report");
    assert_non_null(strstr(out, where));
    expect(runf(MIXCHECK " diff %s/nope.json %s", tmpdir, path), 2, "diff of a missing report");
    expect(run(MIXCHECK " run cases/mamba2/tiny.yaml --max-drift 1.3"), 2, "--max-drift without --baseline");
    expect(runf(MIXCHECK " run cases/mamba2/tiny.yaml --baseline %s --max-drift 0.9", path), 2, "--max-drift <= 1");
    expect(run(MIXCHECK " diff --threshold 1"), 2, "--threshold 1");
    expect(run(MIXCHECK " diff onlyone.json"), 2, "one report");
    expect(run(MIXCHECK " diff --help"), 0, "diff --help");
    assert_non_null(strstr(out, "--threshold"));
}

int main(void)
{
    if (mkdtemp(tmpdir) == NULL)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_provenance_in_reports),
        cmocka_unit_test(test_drift_acceptance),
        cmocka_unit_test(test_bad_inputs),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (mc_test_tmpdir_remove(tmpdir) != 0)
        rc = rc ? rc : 1;
    return rc;
}
