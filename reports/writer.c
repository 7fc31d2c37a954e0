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

/* The length of the well-formed UTF-8 sequence at p (1 for ASCII), or 0 when the bytes there are not
 * one (a string cut inside a character, or a backend's message in another encoding): the writers put
 * U+FFFD there, so a report is always valid UTF-8. */
static int utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    int n = (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && p[0] < 0xC2) || (n == 4 && p[0] > 0xF4))
        return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if ((n == 3 && p[0] == 0xE0 && p[1] < 0xA0) || (n == 3 && p[0] == 0xED && p[1] >= 0xA0) ||
        (n == 4 && p[0] == 0xF0 && p[1] < 0x90) || (n == 4 && p[0] == 0xF4 && p[1] >= 0x90))
        return 0;
    return n;
}

/* Writes the character at *p (a whole UTF-8 sequence, or U+FFFD for a malformed byte) and advances *p
 * to its last byte. */
static void put_char(struct mc_writer *w, const unsigned char **p)
{
    int n = utf8_len(*p);
    if (n == 0) {
        fputs("\xef\xbf\xbd", w->f);
        return;
    }
    fwrite(*p, 1, (size_t)n, w->f);
    *p += n - 1;
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
                put_char(w, &p);
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
                put_char(w, &p);
        }
    }
}
