/* tmpdir — see tmpdir.h. */
#include "tmpdir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mc_test_tmpdir_remove(const char *dir)
{
    const size_t len = strlen(dir) + sizeof "rm -rf ";
    char *cmd = malloc(len);
    if (cmd == NULL)
        return -1;
    snprintf(cmd, len, "rm -rf %s", dir);
    const int rc = system(cmd) == 0 ? 0 : -1;
    free(cmd);
    return rc;
}
