/*
 * writer.h — a small buffered text sink shared by the file reports: escaping for JSON and XML,
 * numbers that print the same on every run, and an atomic write (temporary file, then rename).
 */
#ifndef MC_REPORT_WRITER_H
#define MC_REPORT_WRITER_H

#include <stdio.h>

#include "base/error.h"

struct mc_writer {
    FILE *f;
    char *tmp_path;
    const char *path;
};

enum mc_err_code mc_writer_open(struct mc_writer *w, const char *path, struct mc_error *err);
/* Flushes, closes and renames onto the final path; on a write error removes the temporary file. */
enum mc_err_code mc_writer_commit(struct mc_writer *w, struct mc_error *err);
void mc_writer_abort(struct mc_writer *w);

void mc_writer_json_string(struct mc_writer *w, const char *s);
/* A JSON number with %.17g, or null when not finite. */
void mc_writer_json_number(struct mc_writer *w, double v);
void mc_writer_xml_text(struct mc_writer *w, const char *s);

#endif
