/* capture — see capture.h. */
#include "capture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

int mc_capture_status(const char *cmd, char *out, size_t cap)
{
    assert_non_null(cmd);
    assert_true(out != NULL && cap > 0);
    const size_t len = strlen(cmd);
    char *full = malloc(len + sizeof " 2>&1");
    assert_non_null(full);
    memcpy(full, cmd, len);
    memcpy(full + len, " 2>&1", sizeof " 2>&1");
    FILE *p = popen(full, "r");
    free(full);
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    while (fgetc(p) != EOF) {
    }
    return pclose(p);
}

int mc_capture(const char *cmd, char *out, size_t cap)
{
    const int st = mc_capture_status(cmd, out, cap);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
