/* Packing a build context (cli_context.h) with libarchive. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "cli/cli_context.h"
#include "common/util.h"

static int
ctx_copy_data(struct archive *out, const char *path, char **cause)
{
	char buf[64 * 1024];
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		cause_set(cause, "context: %s: %s", path, strerror(errno));
		return -1;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (archive_write_data(out, buf, (size_t)n) != n) {
			cause_set(cause, "context: writing %s: %s", path, archive_error_string(out));
			close(fd);
			return -1;
		}
	}
	close(fd);
	if (n == -1) {
		cause_set(cause, "context: %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static void
ctx_owner_root(struct archive_entry *e)
{
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	archive_entry_set_uname(e, "root");
	archive_entry_set_gname(e, "root");
}

static int
ctx_walk(struct archive *out, const char *dir, char **cause)
{
	struct archive *disk = archive_read_disk_new();
	struct archive_entry *e;
	size_t dl = strlen(dir);
	int r, rc = 0;

	archive_read_disk_set_symlink_physical(disk);
	if (archive_read_disk_open(disk, dir) != ARCHIVE_OK) {
		cause_set(cause, "context %s: %s", dir, archive_error_string(disk));
		archive_read_free(disk);
		return -1;
	}
	for (;;) {
		const char *src, *rel;
		char *name;
		mode_t t;

		e = archive_entry_new();
		r = archive_read_next_header2(disk, e);
		if (r == ARCHIVE_EOF) {
			archive_entry_free(e);
			break;
		}
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			cause_set(cause, "context %s: %s", dir, archive_error_string(disk));
			archive_entry_free(e);
			rc = -1;
			break;
		}
		archive_read_disk_descend(disk);
		src = archive_entry_sourcepath(e);
		if (src == NULL)
			src = archive_entry_pathname(e);
		rel = src + (strncmp(src, dir, dl) == 0 ? dl : 0);
		rel += strspn(rel, "/");
		t = archive_entry_filetype(e);
		if (t != AE_IFREG && t != AE_IFDIR && t != AE_IFLNK) {
			fprintf(stderr, "airlock: context: leaving out %s (not a file, directory or "
			    "symlink)\n", src);
			archive_entry_free(e);
			continue;
		}
		xasprintf(&name, "./%s", rel);
		archive_entry_set_pathname(e, name);
		free(name);
		archive_entry_set_hardlink(e, NULL);
		ctx_owner_root(e);
		if (t != AE_IFREG)
			archive_entry_set_size(e, 0);
		if (archive_write_header(out, e) != ARCHIVE_OK ||
		    (t == AE_IFREG && ctx_copy_data(out, src, cause) == -1)) {
			if (cause != NULL && *cause == NULL)
				cause_set(cause, "context: %s: %s", src, archive_error_string(out));
			archive_entry_free(e);
			rc = -1;
			break;
		}
		archive_entry_free(e);
	}
	archive_read_close(disk);
	archive_read_free(disk);
	return rc;
}

int
cli_context_tar(const char *dir, const char *dockerfile, char **cause)
{
	struct archive *out;
	struct archive_entry *e;
	struct stat st;
	FILE *tmp;
	int fd = -1;

	if ((tmp = tmpfile()) == NULL) {
		cause_set(cause, "context: temporary file: %s", strerror(errno));
		return -1;
	}
	out = archive_write_new();
	archive_write_set_format_pax_restricted(out);
	if (archive_write_open_fd(out, fileno(tmp)) != ARCHIVE_OK) {
		cause_set(cause, "context: %s", archive_error_string(out));
		goto out;
	}
	if (dir != NULL && ctx_walk(out, dir, cause) == -1)
		goto out;
	if (stat(dockerfile, &st) == -1 || !S_ISREG(st.st_mode)) {
		cause_set(cause, "dockerfile %s: %s", dockerfile,
		    errno ? strerror(errno) : "not a file");
		goto out;
	}
	e = archive_entry_new();
	archive_entry_set_pathname(e, CLI_CONTEXT_DOCKERFILE);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, st.st_size);
	ctx_owner_root(e);
	if (archive_write_header(out, e) != ARCHIVE_OK ||
	    ctx_copy_data(out, dockerfile, cause) == -1) {
		if (*cause == NULL)
			cause_set(cause, "context: %s", archive_error_string(out));
		archive_entry_free(e);
		goto out;
	}
	archive_entry_free(e);
	if (archive_write_close(out) != ARCHIVE_OK) {
		cause_set(cause, "context: %s", archive_error_string(out));
		goto out;
	}
	if ((fd = dup(fileno(tmp))) == -1 || lseek(fd, 0, SEEK_SET) == -1) {
		cause_set(cause, "context: %s", strerror(errno));
		if (fd != -1)
			close(fd);
		fd = -1;
	}
out:
	archive_write_free(out);
	fclose(tmp);
	return fd;
}
