/* Build context tarballs: the checks of context_tar.h, on libarchive. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <archive.h>
#include <archive_entry.h>

#include "common/util.h"
#include "images/context_tar.h"

/* "./a/b" → "a/b"; "./" and "." → "". */
static const char *
ctx_strip(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2 + strspn(p + 2, "/");
	return strcmp(p, ".") == 0 ? "" : p;
}

/* A relative path with no "." or ".." components (empty ones are harmless). */
static int
ctx_path_ok(const char *p)
{
	const char *c = p;
	size_t n;

	if (p[0] == '/')
		return 0;
	while (*c != '\0') {
		n = strcspn(c, "/");
		if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		c += n;
		c += strspn(c, "/");
	}
	return 1;
}

/* Does a symlink at entry with target stay inside the context once resolved? */
static int
ctx_link_ok(const char *entry, const char *target)
{
	int depth = 0;
	const char *c;
	size_t n;

	if (target[0] == '/' || target[0] == '\0')
		return 0;
	/* Depth of the link's directory: every component but the last. */
	for (c = entry; *c != '\0';) {
		n = strcspn(c, "/");
		if (c[n] == '\0')
			break;
		if (n > 0)
			depth++;
		c += n;
		c += strspn(c, "/");
	}
	for (c = target; *c != '\0';) {
		n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.') {
			if (--depth < 0)
				return 0;
		} else if (n > 0 && !(n == 1 && c[0] == '.'))
			depth++;
		c += n;
		c += strspn(c, "/");
	}
	return 1;
}

static int
ctx_walk(struct archive *a, const struct context_limits *lim, const char *want,
    size_t want_max, char **data, size_t *len, char **cause)
{
	struct archive_entry *e;
	uint64_t total = 0;
	size_t entries = 0;
	int r, found = 0;

	if (data != NULL)
		*data = NULL;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		const char *raw = archive_entry_pathname(e), *path, *hl, *sl;
		mode_t type = archive_entry_filetype(e);

		if (raw == NULL) {
			cause_set(cause, "context: entry %zu has no path name", entries + 1);
			return -1;
		}
		path = ctx_strip(raw);
		if (++entries > lim->max_entries) {
			cause_set(cause, "context: more than %zu entries", lim->max_entries);
			return -1;
		}
		if (!ctx_path_ok(path)) {
			cause_set(cause, "context: entry \"%s\": absolute paths and . or .. components "
			    "are not allowed", raw);
			return -1;
		}
		if ((hl = archive_entry_hardlink(e)) != NULL) {
			if (!ctx_path_ok(ctx_strip(hl)) || *ctx_strip(hl) == '\0') {
				cause_set(cause, "context: hard link \"%s\" → \"%s\" leaves the context",
				    raw, hl);
				return -1;
			}
			continue;
		}
		switch (type) {
		case AE_IFREG:
			if (archive_entry_size(e) < 0 ||
			    (total += (uint64_t)archive_entry_size(e)) > lim->max_bytes) {
				cause_set(cause, "context: larger than %llu bytes unpacked",
				    (unsigned long long)lim->max_bytes);
				return -1;
			}
			break;
		case AE_IFDIR:
			break;
		case AE_IFLNK:
			sl = archive_entry_symlink(e);
			if (sl == NULL || !ctx_link_ok(path, sl)) {
				cause_set(cause, "context: symlink \"%s\" → \"%s\" points outside the "
				    "context", raw, sl ? sl : "");
				return -1;
			}
			break;
		default:
			cause_set(cause, "context: entry \"%s\" is a device, FIFO or socket; only "
			    "files, directories and links are allowed", raw);
			return -1;
		}
		if (want != NULL && type == AE_IFREG && strcmp(path, want) == 0 && data != NULL) {
			la_int64_t sz = archive_entry_size(e);
			la_ssize_t got;
			if ((size_t)sz > want_max) {
				cause_set(cause, "context: %s is larger than %zu bytes", want, want_max);
				return -1;
			}
			free(*data);
			*data = xmalloc((size_t)sz + 1);
			got = archive_read_data(a, *data, (size_t)sz);
			if (got != sz) {
				cause_set(cause, "context: reading %s: %s", want,
				    got < 0 ? archive_error_string(a) : "short read");
				return -1;
			}
			(*data)[sz] = '\0';
			*len = (size_t)sz;
			found = 1;
		}
	}
	if (r != ARCHIVE_EOF) {
		cause_set(cause, "context: not a readable tar archive: %s",
		    archive_error_string(a) ? archive_error_string(a) : "unknown error");
		return -1;
	}
	if (want != NULL && !found) {
		cause_set(cause, "context: has no file %s", want);
		return -1;
	}
	return 0;
}

static struct archive *
ctx_reader(void)
{
	struct archive *a = archive_read_new();

	/*
	 * Plain tar only: checking it skips file data by seeking, so a 256 MiB
	 * context is checked in milliseconds on airlockd's loop (a compressed
	 * one would have to be inflated there); zip and friends carry no modes.
	 */
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	return a;
}

/*
 * The one unwind for both sources: opened is archive_read_open_*'s result;
 * a is freed, and *data (when wanted) is left NULL on any failure of the walk.
 */
static int
ctx_check(struct archive *a, int opened, const struct context_limits *lim, const char *want,
    size_t want_max, char **data, size_t *len, char **cause)
{
	int rc;

	if (opened != ARCHIVE_OK) {
		cause_set(cause, "context: not a tar archive: %s", archive_error_string(a));
		archive_read_free(a);
		return -1;
	}
	rc = ctx_walk(a, lim, want, want_max, data, len, cause);
	archive_read_free(a);
	if (rc == -1 && data != NULL) {
		free(*data);
		*data = NULL;
	}
	return rc;
}

int
context_tar_check(const void *buf, size_t n, const struct context_limits *lim,
    const char *want, size_t want_max, char **data, size_t *len, char **cause)
{
	struct archive *a = ctx_reader();

	return ctx_check(a, archive_read_open_memory(a, buf, n), lim, want, want_max, data, len,
	    cause);
}

int
context_tar_check_file(const char *path, const struct context_limits *lim,
    const char *want, size_t want_max, char **data, size_t *len, char **cause)
{
	struct archive *a = ctx_reader();

	return ctx_check(a, archive_read_open_filename(a, path, 64 * 1024), lim, want, want_max,
	    data, len, cause);
}
