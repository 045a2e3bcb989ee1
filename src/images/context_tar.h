/*
 * Build contexts uploaded as tarballs (POST /v1/templates/{name}/build).
 * The whole archive is checked before anything uses it: every entry a
 * relative path without "." or ".." components, a regular file, directory,
 * hard link to an earlier entry or a symlink whose target stays inside the
 * context; no device nodes, FIFOs or sockets; bounded entry count and
 * unpacked size. The host never unpacks it: the build VM does, as root in
 * its own tmpfs (docs/templates.md "Build context").
 */
#ifndef AIRLOCK_CONTEXT_TAR_H
#define AIRLOCK_CONTEXT_TAR_H

#include <stddef.h>
#include <stdint.h>

#define CONTEXT_ENTRIES_MAX	100000

struct context_limits {
	uint64_t	 max_bytes;	/* unpacked size of all regular files */
	size_t		 max_entries;
};

/*
 * Check the archive in buf (plain tar: ustar, pax or GNU).
 * -1 with a cause naming the entry. When want is not NULL and the archive
 * holds that regular file (at most want_max bytes), its bytes come back in
 * *data (malloc'd, NUL-terminated) and *len; a missing one is an error.
 */
int context_tar_check(const void *buf, size_t n, const struct context_limits *lim,
    const char *want, size_t want_max, char **data, size_t *len, char **cause);

/* The same for a file on disk (read through libarchive, not into memory). */
int context_tar_check_file(const char *path, const struct context_limits *lim,
    const char *want, size_t want_max, char **data, size_t *len, char **cause);

#endif
