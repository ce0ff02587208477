#include "stale.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "fileio.h"

/* The PID in name when name is prefix + digits + suffix exactly, else 0. */
static long pid_in(const char *name, const char *prefix, const char *suffix)
{
    size_t p = strlen(prefix), s = strlen(suffix), n = strlen(name);
    if (n <= p + s || strncmp(name, prefix, p) != 0 || strcmp(name + n - s, suffix) != 0) return 0;
    long pid = 0;
    for (size_t i = p; i < n - s; i++) {
        if (name[i] < '0' || name[i] > '9' || pid > 100000000L) return 0;
        pid = pid * 10 + (name[i] - '0');
    }
    return pid;
}

static int gone(long pid)
{
    return pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) == -1 && errno == ESRCH;
}

/* Over the entries of directory path: checks that each is a regular file (unlink = 0) or
 * removes it (unlink = 1); 1 when every entry passed. */
static int each_file(const char *path, int unlink_them)
{
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *e;
    struct stat sb;
    int ok = 1;
    char p[4096];
    while (ok && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int n = snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        ok = n > 0 && (size_t)n < sizeof p && lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) &&
             (!unlink_them || unlink(p) == 0);
    }
    closedir(d);
    return ok;
}

/* Removes a file, or a directory of regular files (checked before anything is removed);
 * 1 on success. */
static int remove_leftover(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return 0;
    if (!S_ISDIR(sb.st_mode)) return unlink(path) == 0;
    return each_file(path, 0) && each_file(path, 1) && rmdir(path) == 0;
}

dga_status dga_stale_remove(const char *out, int *removed)
{
    if (removed) *removed = 0;
    char path[4096];
    dga_status st = dga_path_trim(path, sizeof path - 64, out);
    if (st != DGA_OK) return st;
    char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[4096];
    if (slash == path) snprintf(dir, sizeof dir, "/");
    else if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else snprintf(dir, sizeof dir, ".");
    if (!*base) return DGA_OK;
    char tmp_p[4200], old_p[4200], tok_p[4200];
    snprintf(tmp_p, sizeof tmp_p, "%s.tmp.", base);
    snprintf(old_p, sizeof old_p, "%s.old.", base);
    snprintf(tok_p, sizeof tok_p, "%s.tokenizer.", base);
    DIR *d = opendir(dir);
    if (!d) return DGA_OK;   /* no directory, no leftovers; the writer reports what it finds */
    struct dirent *e;
    char victim[8400];
    while ((e = readdir(d)) != NULL) {
        long pid = pid_in(e->d_name, tmp_p, "");
        if (!pid) pid = pid_in(e->d_name, old_p, "");
        if (!pid) pid = pid_in(e->d_name, tok_p, ".json");
        if (!gone(pid)) continue;
        snprintf(victim, sizeof victim, "%s/%s", dir, e->d_name);
        if (remove_leftover(victim) && removed) (*removed)++;
    }
    closedir(d);
    return DGA_OK;
}
