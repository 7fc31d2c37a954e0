/* cli.c — see cli.h. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"
#include "exec/pybackend.h"
#include "reference.h"

int mc_cli_register_builtins(struct mc_registry *reg, struct mc_error *err)
{
    const struct mc_backend_ops *const builtins[] = {
        mc_reference_mamba2_ops(),
        mc_reference_mamba1_ops(),
        mc_reference_gdn_ops(),
        mc_reference_shortconv_ops(),
        mc_reference_attention_ops(),
        mc_reference_lightning_ops(),
        mc_reference_kda_ops(),
        mc_cpu_mamba2_ops(),
        mc_cpu_mamba1_ops(),
        mc_cpu_shortconv_ops(),
        mc_cpu_gdn_ops(),
        mc_cpu_attention_ops(),
        mc_cpu_lightning_ops(),
        mc_cpu_kda_ops(),
    };
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (mc_registry_add(reg, builtins[i], "built-in", err) != MC_ERR_NONE)
            return -1;
    return 0;
}

int mc_cli_load_backends(struct mc_registry *reg, struct mc_plugins *plugins, const char *const *paths, int n,
                         int bisect)
{
    struct mc_error err = {0};
    if (mc_cli_register_builtins(reg, &err) != 0) {
        fprintf(stderr, "mixcheck: %s\n", err.msg);
        return mc_error_exit_code(err.code);
    }
    for (int i = 0; i < n; i++) {
        if (mc_plugins_load(plugins, paths[i], reg, &err) != MC_ERR_NONE) {
            fprintf(stderr, "mixcheck: %s\n", err.msg);
            /* git bisect: a commit whose plugin does not build or load could not be tested (125);
             * a usage mistake (too many plugins) stays 2 */
            return bisect && err.code == MC_ERR_INPUT ? 125 : mc_error_exit_code(err.code);
        }
    }
    return 0;
}

int mc_cli_load_python(struct mc_registry *reg, const struct mc_plugins *plugins, const struct mc_python_options *opt,
                       const char *const *specs, int n, int bisect)
{
    struct mc_error err = {0};
    /* each spec counts as one more plugin: its backends run on every case of their family */
    if (n > 0 && mc_python_load(opt, specs, n, reg, plugins->n + 1, &err) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: %s\n", err.msg);
        return bisect && err.code == MC_ERR_INPUT ? 125 : mc_error_exit_code(err.code);
    }
    return 0;
}

int mc_cli_python_option(struct mc_cli_python *py, const char *option, const char *value)
{
    if (strcmp(option, "--python") == 0) {
        py->opt.python = value;
    } else if (strcmp(option, "--python-device") == 0) {
        if (value[0] == '\0') {
            fprintf(stderr, "mixcheck: --python-device: expected a device name, e.g. cuda (got '%s')\n", value);
            return 2;
        }
        py->opt.device = value;
    } else if (strcmp(option, "--python-backend") == 0) {
        if (py->n >= MC_PYTHON_MAX_BACKENDS) {
            fprintf(stderr, "mixcheck: --python-backend: at most %d (got '%s' too)\n", MC_PYTHON_MAX_BACKENDS, value);
            return 2;
        }
        py->specs[py->n++] = value;
    } else {
        fprintf(stderr, "mixcheck: internal error: '%s' is not a Python backend option\n", option);
        return 2;
    }
    return 0;
}

int mc_cli_python_check(const struct mc_cli_python *py)
{
    if ((py->opt.python || py->opt.device) && py->n == 0) {
        fprintf(stderr, "mixcheck: --python%s: needs --python-backend SPEC (the backends to run)\n",
                py->opt.device ? "-device" : "");
        return 2;
    }
    return 0;
}

int mc_cli_python_start(struct mc_registry *reg, const struct mc_plugins *plugins, struct mc_cli_python *py,
                        int bisect)
{
    if (py->n == 0)
        return 0;
    if (py->opt.python == NULL)
        py->opt.python = "python3";
    return mc_cli_load_python(reg, plugins, &py->opt, py->specs, py->n, bisect);
}

int mc_cli_parse_count(const char *text, int max, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < 1 || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

int mc_cli_use_color(const char *when)
{
    if (when && strcmp(when, "always") == 0)
        return 1;
    if (when && strcmp(when, "never") == 0)
        return 0;
    return isatty(fileno(stdout)) && getenv("NO_COLOR") == NULL;
}

void mc_cli_append_arg(char *buf, size_t len, size_t *used, const char *word)
{
    int plain = word[0] != '\0';
    for (const char *p = word; *p && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%", *p) != NULL;
    if (*used >= len)
        return;
    if (plain) {
        *used += (size_t)snprintf(buf + *used, len - *used, "%s%s", *used ? " " : "", word);
        return;
    }
    *used += (size_t)snprintf(buf + *used, len - *used, "%s'", *used ? " " : "");
    for (const char *p = word; *p && *used < len; p++)
        *used += (size_t)(*p == '\'' ? snprintf(buf + *used, len - *used, "'\\''")
                                     : snprintf(buf + *used, len - *used, "%c", *p));
    if (*used < len)
        *used += (size_t)snprintf(buf + *used, len - *used, "'");
}
