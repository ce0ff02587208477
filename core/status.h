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
    DGA_ERR_INTERRUPTED, /* the user asked to stop (dga_interrupt_request, e.g. on Ctrl-C) */
} dga_status;

/* Records a printf-style message for the calling thread and returns `status`, so a failure
 * reads `return dga_fail(DGA_ERR_FORMAT, "%s: line %d: ...", path, line);`. */
dga_status dga_fail(dga_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Like dga_fail, followed by ": <strerror(errno)>". */
dga_status dga_fail_errno(dga_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Puts context in front of the last failure's message: records "<context>: <cause>", where
 * <cause> is dga_last_error() as it was before the call, and returns `status`. The cause is
 * copied before formatting, so a caller never formats the message buffer into itself. */
dga_status dga_fail_wrap(dga_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The message of the calling thread's last failure ("" if none). */
const char *dga_last_error(void);

const char *dga_status_name(dga_status status);

/* Cooperative interruption of long computations. dga_interrupt_request only stores to a
 * volatile sig_atomic_t, so a signal handler may call it; the long loops of the core (every
 * model forward, the k-means iterations, corpus reading and embedding) call
 * dga_interrupt_check, which then fails with DGA_ERR_INTERRUPTED naming `where`. The flag
 * stays set until dga_interrupt_clear (the REPL clears it before each command). */
void       dga_interrupt_request(void);
void       dga_interrupt_clear(void);
dga_status dga_interrupt_check(const char *where);

#endif
