/* writer.c — see writer.h. */
#include "writer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum mc_err_code mc_writer_open(struct mc_writer *w, const char *path, struct mc_error *err)
{
    memset(w, 0, sizeof *w);
    size_t len = strlen(path) + 8;
    w->tmp_path = malloc(len);
    if (w->tmp_path == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    snprintf(w->tmp_path, len, "%s.tmp", path);
    w->path = path;
    w->f = fopen(w->tmp_path, "w");
    if (w->f == NULL) {
        enum mc_err_code rc = mc_error_set(err, MC_ERR_USAGE, "%s: cannot write: %s", w->tmp_path, strerror(errno));
        free(w->tmp_path);
        w->tmp_path = NULL;
        return rc;
    }
    return MC_ERR_NONE;
}

enum mc_err_code mc_writer_commit(struct mc_writer *w, struct mc_error *err)
{
    int bad = ferror(w->f);
    if (fclose(w->f) != 0)
        bad = 1;
    w->f = NULL;
    enum mc_err_code rc = MC_ERR_NONE;
    if (bad) {
        rc = mc_error_set(err, MC_ERR_USAGE, "%s: write failed", w->tmp_path);
        unlink(w->tmp_path);
    } else if (rename(w->tmp_path, w->path) != 0) {
        rc = mc_error_set(err, MC_ERR_USAGE, "%s: cannot rename to %s: %s", w->tmp_path, w->path, strerror(errno));
        unlink(w->tmp_path);
    }
    free(w->tmp_path);
    w->tmp_path = NULL;
    return rc;
}

void mc_writer_abort(struct mc_writer *w)
{
    if (w->f != NULL)
        fclose(w->f);
    if (w->tmp_path != NULL) {
        unlink(w->tmp_path);
        free(w->tmp_path);
    }
    memset(w, 0, sizeof *w);
}

void mc_writer_json_string(struct mc_writer *w, const char *s)
{
    fputc('"', w->f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", w->f);
            break;
        case '\\':
            fputs("\\\\", w->f);
            break;
        case '\n':
            fputs("\\n", w->f);
            break;
        case '\t':
            fputs("\\t", w->f);
            break;
        case '\r':
            fputs("\\r", w->f);
            break;
        default:
            if (*p < 0x20)
                fprintf(w->f, "\\u%04x", *p);
            else
                fputc(*p, w->f);
        }
    }
    fputc('"', w->f);
}

void mc_writer_json_number(struct mc_writer *w, double v)
{
    if (isfinite(v))
        fprintf(w->f, "%.17g", v);
    else
        fputs("null", w->f);
}

void mc_writer_xml_text(struct mc_writer *w, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '<':
            fputs("&lt;", w->f);
            break;
        case '>':
            fputs("&gt;", w->f);
            break;
        case '&':
            fputs("&amp;", w->f);
            break;
        case '"':
            fputs("&quot;", w->f);
            break;
        case '\'':
            fputs("&apos;", w->f);
            break;
        default:
            if (*p < 0x20 && *p != '\n' && *p != '\t')
                fputc('?', w->f); /* not representable in XML 1.0 */
            else
                fputc(*p, w->f);
        }
    }
}
