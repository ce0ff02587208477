/* Reading raw text: JSON Lines files ({"text": ...} per line, other fields ignored) and plain
 * .txt files (one file = one document), from one file or a directory tree.
 *
 * A directory is walked recursively; its .jsonl and .txt files are visited in byte-wise
 * sorted order of their paths (so a walk is reproducible on any machine); other files and
 * hidden entries (names starting with '.') are ignored. A file named explicitly is read as
 * plain text if its name ends in ".txt", as JSON Lines otherwise.
 *
 * Bad input never stops the walk: a line that is not JSON, not an object, has no string
 * "text", or holds invalid UTF-8 (a .txt file with invalid UTF-8 likewise) is skipped and
 * counted in dga_text_stats, which keeps the first few "file:line: reason" messages. Blank
 * lines are counted but are not errors; a UTF-8 byte-order mark opening a .jsonl file is
 * ignored. Only a missing path or a failing read is an error.
 *
 * Two ways to read: a pull reader (dga_text_open / dga_text_next / dga_text_close) or a
 * callback walk (dga_text_foreach). Neither is thread-safe on one reader; separate readers
 * are independent. */
#ifndef DGA_JSONL_H
#define DGA_JSONL_H

#include <stddef.h>

#include "status.h"

#define DGA_TEXT_MAX_MESSAGES 8
#define DGA_TEXT_MESSAGE_LEN 256

typedef struct {
    size_t files;       /* files opened */
    size_t lines;       /* JSON Lines lines read (blank ones included) */
    size_t docs;        /* documents delivered */
    size_t bytes;       /* text bytes delivered */
    size_t blank;       /* blank lines (ignored, not errors) */
    size_t bad_json;    /* not parseable as JSON */
    size_t not_object;  /* valid JSON but not an object */
    size_t no_text;     /* object without a "text" member, or "text" is not a string */
    size_t bad_utf8;    /* invalid UTF-8 in the line (or in a .txt file) */
    size_t skipped;     /* bad_json + not_object + no_text + bad_utf8 */
    int    n_messages;  /* messages kept (at most DGA_TEXT_MAX_MESSAGES) */
    char   messages[DGA_TEXT_MAX_MESSAGES][DGA_TEXT_MESSAGE_LEN]; /* "file:line: reason" */
} dga_text_stats;

typedef struct {
    const char *text;   /* the document's bytes (UTF-8; may contain NUL when JSON had \u0000) */
    size_t      len;
    const char *file;   /* path of the file it came from */
    size_t      line;   /* 1-based line number (1 for a .txt file) */
    size_t      index;  /* 0-based number of this document within the walk */
} dga_text_doc;

typedef struct dga_text_reader dga_text_reader;

/* Opens a reader over a file or a directory tree. A path that does not exist (or cannot be
 * listed) is DGA_ERR_IO. */
dga_status dga_text_open(const char *path_or_dir, dga_text_reader **out);
/* The next document into *doc (its pointers stay valid until the next call or close).
 * At the end returns DGA_OK with doc->text == NULL. DGA_ERR_IO if a file cannot be read. */
dga_status dga_text_next(dga_text_reader *r, dga_text_doc *doc);
/* Adds the counters of one walk to a running total (several sources read one after the
 * other); the total keeps the first DGA_TEXT_MAX_MESSAGES messages. */
void dga_text_stats_add(dga_text_stats *acc, const dga_text_stats *s);
/* Counters so far (valid until close). */
const dga_text_stats *dga_text_reader_stats(const dga_text_reader *r);
void dga_text_close(dga_text_reader *r);   /* NULL is fine */

/* Callback walk. Return 0 to go on, nonzero to stop early (the walk then returns DGA_OK).
 * A callback that fails keeps its error in `ud` and stops. */
typedef int (*dga_text_fn)(const dga_text_doc *doc, void *ud);
/* stats may be NULL; it is filled even when the walk fails part-way. */
dga_status dga_text_foreach(const char *path_or_dir, dga_text_fn fn, void *ud,
                            dga_text_stats *stats);

/* The files a walk over path_or_dir would read, in order. Free with dga_text_free_files. */
dga_status dga_text_list_files(const char *path_or_dir, char ***files, size_t *n);
void dga_text_free_files(char **files, size_t n);

/* 1 if buf[0..len) is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF), else 0;
 * *bad_offset (may be NULL) gets the offset of the first bad byte. */
int dga_utf8_valid(const char *buf, size_t len, size_t *bad_offset);

#endif
