/* JSON Lines / .txt reading: a sorted recursive walk, a pull reader, and skip accounting. */
#include "jsonl.h"
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Symlinked directories could loop forever; real corpora are shallow. */
#define WALK_MAX_DEPTH 64

struct dga_text_reader {
    char         **files;
    size_t         n_files, next_file;
    const char    *cur_path;
    FILE          *fp;            /* open .jsonl file, NULL when none */
    char          *line;          /* getline buffer */
    size_t         line_cap;
    size_t         line_no;
    char          *whole;         /* contents of the current .txt file */
    json_t        *json;          /* parsed current line: owns the delivered text */
    dga_text_stats stats;
};

/* ---------- UTF-8 ---------- */

int dga_utf8_valid(const char *buf, size_t len, size_t *bad_offset)
{
    const unsigned char *s = (const unsigned char *)buf;
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;   /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) { need = 2; lo = 0xA0; }            /* no overlongs */
        else if (c == 0xED) { need = 2; hi = 0x9F; }            /* no surrogates */
        else if (c >= 0xE1 && c <= 0xEF) need = 2;
        else if (c == 0xF0) { need = 3; lo = 0x90; }            /* no overlongs */
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        else if (c == 0xF4) { need = 3; hi = 0x8F; }            /* <= U+10FFFF */
        else goto bad;
        if (len - i <= need) goto bad;
        if (s[i + 1] < lo || s[i + 1] > hi) goto bad;
        for (size_t k = 2; k <= need; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) goto bad;
        i += need + 1;
    }
    return 1;
bad:
    if (bad_offset) *bad_offset = i;
    return 0;
}

/* ---------- the walk ---------- */

typedef struct {
    char  **items;
    size_t  n, cap;
} strvec;

static dga_status strvec_push(strvec *v, char *s)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        char **p = realloc(v->items, cap * sizeof *p);
        if (!p) { free(s); return dga_fail(DGA_ERR_NOMEM, "text walk: out of memory"); }
        v->items = p;
        v->cap = cap;
    }
    v->items[v->n++] = s;
    return DGA_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join_path(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    int slash = a > 0 && dir[a - 1] != '/';
    char *p = malloc(a + (size_t)slash + b + 1);
    if (!p) return NULL;
    memcpy(p, dir, a);
    if (slash) p[a] = '/';
    memcpy(p + a + (size_t)slash, name, b + 1);
    return p;
}

static dga_status walk_dir(const char *dir, int depth, strvec *out)
{
    if (depth > WALK_MAX_DEPTH)
        return dga_fail(DGA_ERR_IO, "%s: directories nested deeper than %d (a symlink loop?)",
                        dir, WALK_MAX_DEPTH);
    DIR *d = opendir(dir);
    if (!d) return dga_fail_errno(DGA_ERR_IO, "%s: cannot list directory", dir);
    strvec names = {0};
    dga_status st = DGA_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;   /* ".", "..", hidden files */
        char *s = strdup(e->d_name);
        if (!s) { st = dga_fail(DGA_ERR_NOMEM, "text walk: out of memory"); break; }
        if ((st = strvec_push(&names, s)) != DGA_OK) break;
    }
    closedir(d);
    /* an empty directory leaves items NULL, which qsort must not be given */
    if (st == DGA_OK && names.n > 1) qsort(names.items, names.n, sizeof *names.items, cmp_str);
    for (size_t i = 0; st == DGA_OK && i < names.n; i++) {
        char *path = join_path(dir, names.items[i]);
        if (!path) { st = dga_fail(DGA_ERR_NOMEM, "text walk: out of memory"); break; }
        struct stat sb;
        if (stat(path, &sb) != 0) {   /* a dangling symlink: not a text file, ignore it */
            free(path);
            continue;
        }
        if (S_ISDIR(sb.st_mode)) {
            st = walk_dir(path, depth + 1, out);
            free(path);
        } else if (S_ISREG(sb.st_mode) &&
                   (ends_with(path, ".jsonl") || ends_with(path, ".txt"))) {
            st = strvec_push(out, path);
        } else {
            free(path);
        }
    }
    for (size_t i = 0; i < names.n; i++) free(names.items[i]);
    free(names.items);
    return st;
}

void dga_text_free_files(char **files, size_t n)
{
    if (!files) return;
    for (size_t i = 0; i < n; i++) free(files[i]);
    free(files);
}

dga_status dga_text_list_files(const char *path_or_dir, char ***files, size_t *n)
{
    *files = NULL;
    *n = 0;
    if (!path_or_dir || !*path_or_dir)
        return dga_fail(DGA_ERR_INVALID, "text walk: empty path");
    struct stat sb;
    if (stat(path_or_dir, &sb) != 0)
        return dga_fail_errno(DGA_ERR_IO, "%s: cannot open", path_or_dir);
    strvec v = {0};
    dga_status st;
    if (S_ISDIR(sb.st_mode)) {
        st = walk_dir(path_or_dir, 0, &v);
    } else {
        char *s = strdup(path_or_dir);
        st = s ? strvec_push(&v, s) : dga_fail(DGA_ERR_NOMEM, "text walk: out of memory");
    }
    if (st != DGA_OK) {
        dga_text_free_files(v.items, v.n);
        return st;
    }
    *files = v.items;
    *n = v.n;
    return DGA_OK;
}

/* ---------- the reader ---------- */

static void note(dga_text_reader *r, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note(dga_text_reader *r, size_t line, const char *fmt, ...)
{
    dga_text_stats *s = &r->stats;
    s->skipped++;
    if (s->n_messages >= DGA_TEXT_MAX_MESSAGES) return;
    char *m = s->messages[s->n_messages++];
    int k = snprintf(m, DGA_TEXT_MESSAGE_LEN, "%s:%zu: ", r->cur_path, line);
    if (k < 0 || k >= DGA_TEXT_MESSAGE_LEN) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m + k, DGA_TEXT_MESSAGE_LEN - (size_t)k, fmt, ap);
    va_end(ap);
}

dga_status dga_text_open(const char *path_or_dir, dga_text_reader **out)
{
    *out = NULL;
    dga_text_reader *r = calloc(1, sizeof *r);
    if (!r) return dga_fail(DGA_ERR_NOMEM, "text reader: out of memory");
    dga_status st = dga_text_list_files(path_or_dir, &r->files, &r->n_files);
    if (st != DGA_OK) {
        free(r);
        return st;
    }
    *out = r;
    return DGA_OK;
}

const dga_text_stats *dga_text_reader_stats(const dga_text_reader *r) { return &r->stats; }

static void drop_current(dga_text_reader *r)
{
    if (r->json) { json_decref(r->json); r->json = NULL; }
    free(r->whole);
    r->whole = NULL;
}

void dga_text_close(dga_text_reader *r)
{
    if (!r) return;
    drop_current(r);
    if (r->fp) fclose(r->fp);
    free(r->line);
    dga_text_free_files(r->files, r->n_files);
    free(r);
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

static void deliver(dga_text_reader *r, dga_text_doc *doc, const char *text, size_t len,
                    size_t line)
{
    doc->text = text;
    doc->len = len;
    doc->file = r->cur_path;
    doc->line = line;
    doc->index = r->stats.docs++;
    r->stats.bytes += len;
}

/* One line of a .jsonl file: 1 when a document was delivered, 0 when skipped. */
static int parse_line(dga_text_reader *r, size_t n, dga_text_doc *doc)
{
    dga_text_stats *s = &r->stats;
    const char *line = r->line;
    if (r->line_no == 1 && n >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
        line += 3;   /* a UTF-8 byte-order mark some editors write: not part of the JSON */
        n -= 3;
    }
    if (is_blank(line, n)) { s->blank++; return 0; }
    size_t bad;
    if (!dga_utf8_valid(line, n, &bad)) {
        s->bad_utf8++;
        note(r, r->line_no, "invalid UTF-8 at byte %zu", bad + 1);
        return 0;
    }
    json_error_t err;
    json_t *j = json_loadb(line, n, JSON_ALLOW_NUL, &err);
    if (!j) {
        s->bad_json++;
        note(r, r->line_no, "not valid JSON (column %d: %s)", err.column, err.text);
        return 0;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        s->not_object++;
        note(r, r->line_no, "expected a JSON object, found another value");
        return 0;
    }
    json_t *t = json_object_get(j, "text");
    if (!t || !json_is_string(t)) {
        json_decref(j);
        s->no_text++;
        note(r, r->line_no, t ? "\"text\" is not a string" : "no \"text\" field");
        return 0;
    }
    r->json = j;
    deliver(r, doc, json_string_value(t), json_string_length(t), r->line_no);
    return 1;
}

dga_status dga_text_next(dga_text_reader *r, dga_text_doc *doc)
{
    memset(doc, 0, sizeof *doc);
    drop_current(r);
    for (;;) {
        if (r->fp) {
            errno = 0;
            ssize_t n = getline(&r->line, &r->line_cap, r->fp);
            if (n < 0) {
                int bad = ferror(r->fp);
                fclose(r->fp);
                r->fp = NULL;
                if (bad) return dga_fail(DGA_ERR_IO, "%s: read failed after line %zu",
                                         r->cur_path, r->line_no);
                continue;
            }
            r->line_no++;
            r->stats.lines++;
            if (parse_line(r, (size_t)n, doc)) return DGA_OK;
            continue;
        }
        if (r->next_file >= r->n_files) return DGA_OK;   /* the end: doc->text == NULL */
        r->cur_path = r->files[r->next_file++];
        r->stats.files++;
        r->line_no = 0;
        if (ends_with(r->cur_path, ".txt")) {
            char *buf = NULL;
            size_t len = 0, bad = 0;
            dga_status st = dga_file_read_all(r->cur_path, &buf, &len);
            if (st != DGA_OK) return st;
            if (!dga_utf8_valid(buf, len, &bad)) {
                size_t line = 1;
                for (size_t i = 0; i < bad; i++) line += buf[i] == '\n';
                free(buf);
                r->stats.bad_utf8++;
                /* a .txt file is one document: the whole file is skipped */
                note(r, line, "invalid UTF-8 at byte %zu of the file; file skipped", bad + 1);
                continue;
            }
            r->whole = buf;
            deliver(r, doc, buf, len, 1);
            return DGA_OK;
        }
        dga_status st = dga_fopen_regular(r->cur_path, &r->fp);
        if (st != DGA_OK) return st;
    }
}

dga_status dga_text_foreach(const char *path_or_dir, dga_text_fn fn, void *ud,
                            dga_text_stats *stats)
{
    if (stats) memset(stats, 0, sizeof *stats);
    dga_text_reader *r;
    dga_status st = dga_text_open(path_or_dir, &r);
    if (st != DGA_OK) return st;
    dga_text_doc doc;
    while ((st = dga_text_next(r, &doc)) == DGA_OK && doc.text)
        if (fn(&doc, ud)) break;
    if (stats) *stats = r->stats;
    dga_text_close(r);
    return st;
}

/* Adds the counters of one walk to a running total; keeps the first messages. */
void dga_text_stats_add(dga_text_stats *acc, const dga_text_stats *s)
{
    acc->files += s->files, acc->lines += s->lines, acc->docs += s->docs;
    acc->bytes += s->bytes, acc->blank += s->blank, acc->bad_json += s->bad_json;
    acc->not_object += s->not_object, acc->no_text += s->no_text;
    acc->bad_utf8 += s->bad_utf8, acc->skipped += s->skipped;
    for (int i = 0; i < s->n_messages && acc->n_messages < DGA_TEXT_MAX_MESSAGES; i++)
        memcpy(acc->messages[acc->n_messages++], s->messages[i], DGA_TEXT_MESSAGE_LEN);
}
