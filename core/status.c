#include "status.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

static void record(const char *fmt, va_list ap, const char *suffix)
{
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    if (suffix && n >= 0 && (size_t)n < sizeof last_error)
        snprintf(last_error + n, sizeof last_error - (size_t)n, ": %s", suffix);
}

dga_status dga_fail(dga_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(fmt, ap, NULL);
    va_end(ap);
    return status;
}

dga_status dga_fail_errno(dga_status status, const char *fmt, ...)
{
    const char *reason = strerror(errno);   /* before vsnprintf can touch errno */
    va_list ap;
    va_start(ap, fmt);
    record(fmt, ap, reason);
    va_end(ap);
    return status;
}

dga_status dga_fail_wrap(dga_status status, const char *fmt, ...)
{
    char cause[sizeof last_error];
    memcpy(cause, last_error, sizeof cause);
    va_list ap;
    va_start(ap, fmt);
    record(fmt, ap, cause[0] ? cause : NULL);
    va_end(ap);
    return status;
}

const char *dga_last_error(void) { return last_error; }

static volatile sig_atomic_t interrupt_flag;

void dga_interrupt_request(void) { interrupt_flag = 1; }
void dga_interrupt_clear(void) { interrupt_flag = 0; }

dga_status dga_interrupt_check(const char *where)
{
    return interrupt_flag ? dga_fail(DGA_ERR_INTERRUPTED, "interrupted (in %s)", where) : DGA_OK;
}

const char *dga_status_name(dga_status status)
{
    switch (status) {
    case DGA_OK: return "ok";
    case DGA_ERR_INVALID: return "invalid argument";
    case DGA_ERR_NOMEM: return "out of memory";
    case DGA_ERR_IO: return "i/o error";
    case DGA_ERR_FORMAT: return "malformed file";
    case DGA_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}
