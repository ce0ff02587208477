/* Status codes and the error message of the last failure.
 *
 * The core never calls exit() and never long-jumps: a function that can fail returns a
 * dga_status, and on failure records a sentence saying what went wrong (naming the file,
 * the field, what was expected). Bindings turn that sentence into a Lua error. */
#ifndef DGA_STATUS_H
#define DGA_STATUS_H

typedef enum {
    DGA_OK = 0,
    DGA_ERR_INVALID,   /* an argument is out of its domain: shape, range, non-finite value */
    DGA_ERR_NOMEM,     /* an allocation failed */
    DGA_ERR_IO,        /* open/read/write/rename failed (errno text is in the message) */
    DGA_ERR_FORMAT,    /* a file exists but is malformed, truncated or of the wrong kind */
} dga_status;

/* Records a printf-style message for the calling thread and returns `status`, so a failure
 * reads `return dga_fail(DGA_ERR_FORMAT, "%s: line %d: ...", path, line);`. */
dga_status dga_fail(dga_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Like dga_fail, followed by ": <strerror(errno)>". */
dga_status dga_fail_errno(dga_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The message of the calling thread's last failure ("" if none). */
const char *dga_last_error(void);

const char *dga_status_name(dga_status status);

#endif
