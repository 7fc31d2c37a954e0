/*
 * test_jsonread.c — the strict JSON parser (harness/src/base/jsonread.h): valid documents and their
 * values, every class of invalid input with the line and column of the error, the nesting and size
 * limits, deep nesting without recursion, and the report reader on top of it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tmpdir.h"

#include "base/jsonread.h"
#include "run/reportread.h"

static struct mc_json_value *parse_ok(const char *text)
{
    struct mc_json_value *v = NULL;
    struct mc_json_error e;
    int rc = mc_json_parse(text, strlen(text), NULL, &v, &e);
    if (rc != 0)
        fail_msg("'%s' should parse: %d:%d: %s", text, e.line, e.column, e.msg);
    assert_non_null(v);
    return v;
}

/* Parses text expecting an error at line:column whose message contains `what`. */
static void parse_bad(const char *text, size_t len, int line, int column, const char *what)
{
    struct mc_json_value *v = (struct mc_json_value *)1;
    struct mc_json_error e;
    int rc = mc_json_parse(text, len, NULL, &v, &e);
    if (rc == 0)
        fail_msg("'%s' should not parse", text);
    assert_null(v);
    if (e.line != line || e.column != column || strstr(e.msg, what) == NULL)
        fail_msg("'%s': got %d:%d: %s; expected %d:%d: ...%s...", text, e.line, e.column, e.msg, line, column, what);
}
#define BAD(text, line, column, what) parse_bad(text, strlen(text), line, column, what)

static void test_valid_documents(void **state)
{
    (void)state;
    struct mc_json_value *v = parse_ok(" {\"a\": [1, -2.5e3, 0, 0.125, 1E-2], \"b\": {\"c\": null, \"d\": true, "
                                       "\"e\": false}, \"s\": \"x\\n\\t\\\"\\\\\\/\\u00e9\\ud83d\\ude00\", \"z\": []}\n");
    assert_int_equal(v->type, MC_JSON_OBJECT);
    assert_int_equal(v->len, 4);
    const struct mc_json_value *a = mc_json_get(v, "a");
    assert_int_equal(a->type, MC_JSON_ARRAY);
    assert_int_equal(a->len, 5);
    assert_true(a->items[1].number == -2500.0);
    assert_true(a->items[3].number == 0.125);
    assert_true(a->items[4].number == 0.01);
    assert_int_equal(a->items[1].line, 1);
    assert_int_equal(a->items[1].column, 12);
    const struct mc_json_value *b = mc_json_get(v, "b");
    assert_int_equal(mc_json_get(b, "c")->type, MC_JSON_NULL);
    assert_int_equal(mc_json_get(b, "d")->type, MC_JSON_TRUE);
    assert_int_equal(mc_json_get(b, "e")->type, MC_JSON_FALSE);
    const struct mc_json_value *s = mc_json_get(v, "s");
    assert_string_equal(s->string, "x\n\t\"\\/\xc3\xa9\xf0\x9f\x98\x80");
    assert_int_equal(s->len, strlen(s->string));
    assert_int_equal(mc_json_get(v, "z")->len, 0);
    assert_null(mc_json_get(v, "missing"));
    assert_null(mc_json_get(a, "a"));
    mc_json_free(v);
    /* scalars as documents, raw UTF-8 in strings */
    const char *docs[] = {"0", "-0", "\"\"", "null", "[[]]", "{}", "\"caf\xc3\xa9 \xe2\x82\xac\"", "1.5e+300"};
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
        mc_json_free(parse_ok(docs[i]));
}

static void test_invalid_documents_with_positions(void **state)
{
    (void)state;
    BAD("", 1, 1, "expected a value");
    BAD("   ", 1, 4, "end of input");
    BAD("{", 1, 2, "expected a key");
    BAD("[1, 2", 1, 6, "expected ',' or ']'");
    BAD("[1,]", 1, 4, "expected a value");
    BAD("{\"a\": 1,}", 1, 9, "expected a key");
    BAD("{\"a\" 1}", 1, 6, "expected ':'");
    BAD("{\"a\": 1 \"b\": 2}", 1, 9, "expected ',' or '}'");
    BAD("{a: 1}", 1, 2, "expected a key");
    BAD("[1]\n  x", 2, 3, "after the document");
    BAD("[01]", 1, 3, "leading zero");
    BAD("[1.]", 1, 4, "after '.'");
    BAD("[.5]", 1, 2, "expected a value");
    BAD("[1e]", 1, 4, "exponent");
    BAD("[-]", 1, 3, "expected a digit");
    BAD("[+1]", 1, 2, "expected a value");
    BAD("[1e999]", 1, 2, "out of range");
    BAD("[NaN]", 1, 2, "expected a value");
    BAD("[Infinity]", 1, 2, "expected a value");
    BAD("[tru]", 1, 2, "expected a value");
    BAD("[truex]", 1, 2, "expected a value");
    BAD("\"abc", 1, 1, "unterminated string");
    BAD("\"a\\x\"", 1, 3, "invalid escape");
    BAD("\"a\\u12g4\"", 1, 3, "\\u escape");
    BAD("\"\\ud800\"", 1, 2, "surrogate");
    BAD("\"\\udc00\\ud800\"", 1, 2, "surrogate");
    BAD("\"\\u0000\"", 1, 2, "\\u0000");
    BAD("\"tab\there\"", 1, 5, "control character");
    BAD("[\n\"\xc3\x28\"]", 2, 2, "invalid UTF-8");
    BAD("\"\xe0\x80\xaf\"", 1, 2, "invalid UTF-8"); /* overlong */
    BAD("\"\xed\xa0\x80\"", 1, 2, "invalid UTF-8"); /* an encoded surrogate */
    BAD("\"\xf4\x90\x80\x80\"", 1, 2, "invalid UTF-8"); /* over U+10FFFF */
    BAD("{\"a\": 1,\n \"b\": 2, \"a\": 3}", 2, 15, "duplicate key \"a\"");
    BAD("\xef\xbb\xbf{}", 1, 1, "expected a value"); /* a byte-order mark is not JSON */
    parse_bad("[1,\0 2]", 7, 1, 4, "expected a value");
    /* line counting goes on through strings and nesting */
    BAD("{\n  \"a\": [\n    1,\n    2 3]}", 4, 7, "expected ',' or ']'");
}

static void test_limits(void **state)
{
    (void)state;
    enum { DEEP = 100000 };
    char *deep = malloc(2 * DEEP + 1);
    assert_non_null(deep);
    memset(deep, '[', DEEP);
    memset(deep + DEEP, ']', DEEP);
    deep[2 * DEEP] = '\0';
    struct mc_json_value *v = NULL;
    struct mc_json_error e;
    /* the default nesting limit: refused at the 65th '[' */
    assert_int_equal(mc_json_parse(deep, 2 * DEEP, NULL, &v, &e), -1);
    assert_int_equal(e.column, 65);
    assert_non_null(strstr(e.msg, "nesting"));
    /* a document as deep as the limit parses; one deeper does not */
    struct mc_json_limits lim = {.max_depth = 3000};
    char *ok = deep + DEEP - 3000;
    assert_int_equal(mc_json_parse(ok, 6000, &lim, &v, &e), 0);
    mc_json_free(v);
    assert_int_equal(mc_json_parse(ok - 1, 6002, &lim, &v, &e), -1);
    /* a depth asked for above the hard cap is capped, and the parse stays iterative */
    lim.max_depth = 1 << 30;
    assert_int_equal(mc_json_parse(deep, 2 * DEEP, &lim, &v, &e), -1);
    assert_non_null(strstr(e.msg, "4096"));
    free(deep);
    /* size */
    struct mc_json_limits small = {.max_bytes = 4};
    assert_int_equal(mc_json_parse("[1,2]", 5, &small, &v, &e), -1);
    assert_non_null(strstr(e.msg, "over the limit"));
    assert_int_equal(mc_json_parse("[12]", 4, &small, &v, &e), 0);
    mc_json_free(v);
    /* many members: duplicates found without quadratic work, and a wide array */
    enum { WIDE = 200000 };
    char *wide = malloc((size_t)WIDE * 16 + 8);
    assert_non_null(wide);
    size_t n = 0;
    wide[n++] = '{';
    for (int i = 0; i < WIDE; i++)
        n += (size_t)sprintf(wide + n, "%s\"k%d\":%d", i ? "," : "", i, i);
    wide[n++] = '}';
    assert_int_equal(mc_json_parse(wide, n, NULL, &v, &e), 0);
    assert_int_equal(v->len, WIDE);
    assert_true(mc_json_get(v, "k199999")->number == 199999.0);
    mc_json_free(v);
    free(wide);
    /* a file that is not there */
    assert_int_equal(mc_json_parse_file("/no/such/file.json", NULL, &v, &e), -1);
    assert_int_equal(e.line, 0);
    assert_non_null(strstr(e.msg, "cannot open"));
}

static char tmpdir[] = "/tmp/mixcheck-json-XXXXXX";

static const char *write_tmp(const char *name, const char *text)
{
    static char path[600];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_report_reader(void **state)
{
    (void)state;
    struct mc_report_doc doc;
    struct mc_error err = {0};
    const char *good = write_tmp("good.json",
                                 "{\"format\": \"mixcheck-report\", \"format_version\": 1, \"results\": [\n"
                                 "  {\"case\": \"c\", \"scenario\": \"prefill\", \"backend\": \"cpu\", \"dtype\": \"f32\", "
                                 "\"tensor\": \"output\", \"status\": \"pass\", \"headroom\": 0.25, \"max_abs_err\": 1e-6, "
                                 "\"first_fail_token\": null, \"worst_index\": {\"batch\": 0, \"token\": 3}, \"atol\": 1e-5, "
                                 "\"rtol\": 1e-4},\n"
                                 "  {\"case\": \"c\", \"scenario\": \"prefill\", \"backend\": \"cpu\", \"dtype\": \"f16\", "
                                 "\"tensor\": null, \"status\": \"unsupported\"},\n"
                                 "  {\"case\": \"c\", \"scenario\": \"decode\", \"backend\": \"cpu\", \"dtype\": \"f32\", "
                                 "\"tensor\": \"output\", \"status\": \"fail\", \"headroom\": null, \"max_abs_err\": 2, "
                                 "\"first_fail_token\": 7, \"worst_index\": null, \"atol\": 1e-5, \"rtol\": 1e-4}\n]}\n");
    assert_int_equal(mc_report_read(good, &doc, &err), MC_ERR_NONE);
    assert_int_equal(doc.n_records, 3);
    const struct mc_report_record *r = mc_report_find(&doc, "c/prefill/cpu/f32/output");
    assert_non_null(r);
    assert_true(r->headroom == 0.25);
    assert_string_equal(r->worst_index, "batch=0 token=3");
    assert_int_equal(r->first_fail_token, -1);
    r = mc_report_find(&doc, "c/decode/cpu/f32/output");
    assert_non_null(r);
    assert_true(r->headroom > 1e308);
    assert_int_equal(r->first_fail_token, 7);
    assert_non_null(mc_report_find(&doc, "c/prefill/cpu/f16/"));
    assert_null(mc_report_find(&doc, "c/prefill/cpu/f64/output"));
    mc_report_doc_free(&doc);

    static const struct {
        const char *text, *where;
    } bad[] = {
        {"{\"format\": \"mixcheck-report\", \"format_version\": 1, \"results\": [}", ":1:64: invalid JSON"},
        {"{\"format\": \"other\", \"format_version\": 1, \"results\": []}", ":1:12: not a mixcheck report"},
        {"{\"format\": \"mixcheck-report\", \"format_version\": 2, \"results\": []}", ":1:49: not a mixcheck report"},
        {"{\"format\": \"mixcheck-report\", \"format_version\": 1,\n \"results\": [\n  {\"case\": \"c\"}]}",
         ":3:3: not a mixcheck report: a record lacks the key \"scenario\""},
        {"{\"format\": \"mixcheck-report\", \"format_version\": 1, \"results\": [{\"case\": \"c\", \"scenario\": \"s\", "
         "\"backend\": \"b\", \"dtype\": \"f32\", \"tensor\": \"output\", \"status\": \"pass\", \"headroom\": \"x\"}]}",
         ":1:177: not a mixcheck report: expected a number or null for \"headroom\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *path = write_tmp("bad.json", bad[i].text);
        mc_error_clear(&err);
        assert_int_equal(mc_report_read(path, &doc, &err), MC_ERR_INPUT);
        if (strstr(err.msg, bad[i].where) == NULL)
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, bad[i].where);
        assert_int_equal(doc.n_records, 0);
    }
}

int main(void)
{
    if (mkdtemp(tmpdir) == NULL)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_documents),
        cmocka_unit_test(test_invalid_documents_with_positions),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_report_reader),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (mc_test_tmpdir_remove(tmpdir) != 0)
        rc = rc ? rc : 1;
    return rc;
}
