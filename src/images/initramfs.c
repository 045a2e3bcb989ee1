/* initramfs writer on libarchive (cpio newc). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "common/util.h"
#include "images/initramfs.h"

#define INITRAMFS_FILE_MAX	(64 * 1024 * 1024)

static int
add_entry(struct archive *a, const char *name, mode_t mode, dev_t rdev,
    const char *data, size_t len, char **cause)
{
	struct archive_entry *e = archive_entry_new();
	int rc = 0;

	archive_entry_set_pathname(e, name);
	archive_entry_set_mode(e, mode);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	archive_entry_set_mtime(e, 0, 0);	/* reproducible output */
	archive_entry_set_nlink(e, S_ISDIR(mode) ? 2 : 1);
	if (S_ISCHR(mode))
		archive_entry_set_rdev(e, rdev);
	archive_entry_set_size(e, S_ISREG(mode) ? (la_int64_t)len : 0);
	if (archive_write_header(a, e) != ARCHIVE_OK ||
	    (len > 0 && archive_write_data(a, data, len) != (la_ssize_t)len)) {
		cause_set(cause, "cpio entry %s: %s", name, archive_error_string(a));
		rc = -1;
	}
	archive_entry_free(e);
	return rc;
}

static int
add_file(struct archive *a, const char *src, const char *name, mode_t mode, char **cause)
{
	char *data;
	size_t len;
	int rc;

	if (read_file(src, INITRAMFS_FILE_MAX, &data, &len, cause) == -1)
		return -1;
	rc = add_entry(a, name, S_IFREG | mode, 0, data, len, cause);
	free(data);
	return rc;
}

static int
cmp_name(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static int
add_modules(struct archive *a, const char *dir, char **cause)
{
	char **names = NULL, *src, *dst;
	size_t n = 0, i;
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if ((d = opendir(dir)) == NULL) {
		cause_set(cause, "modules dir %s: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		if (len < 4 || strcmp(de->d_name + len - 3, ".ko") != 0)
			continue;
		names = xreallocarray(names, n + 1, sizeof(char *));
		names[n++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (n == 0) {
		cause_set(cause, "modules dir %s: no .ko files", dir);
		return -1;
	}
	qsort(names, n, sizeof(char *), cmp_name);
	for (i = 0; i < n; i++) {
		if (rc == 0) {
			xasprintf(&src, "%s/%s", dir, names[i]);
			xasprintf(&dst, "lib/modules/%s", names[i]);
			rc = add_file(a, src, dst, 0644, cause);
			free(src);
			free(dst);
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int
initramfs_write(const char *init_bin, const char *modules_dir, const char *out,
    char **cause)
{
	static const char *const dirs[] = { "dev", "proc", "sys", "lib", "lib/modules", "newroot" };
	struct archive *a;
	char *tmp;
	size_t i;
	int rc = -1;

	xasprintf(&tmp, "%s.tmp.%ld", out, (long)getpid());
	a = archive_write_new();
	if (archive_write_set_format_cpio_newc(a) != ARCHIVE_OK ||
	    archive_write_open_filename(a, tmp) != ARCHIVE_OK) {
		cause_set(cause, "open %s: %s", tmp, archive_error_string(a));
		goto out;
	}
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (add_entry(a, dirs[i], S_IFDIR | 0755, 0, NULL, 0, cause) == -1)
			goto out;
	/* The kernel opens /dev/console for init's stdio before devtmpfs is mounted. */
	if (add_entry(a, "dev/console", S_IFCHR | 0600, makedev(5, 1), NULL, 0, cause) == -1 ||
	    add_file(a, init_bin, "init", 0755, cause) == -1 ||
	    add_modules(a, modules_dir, cause) == -1)
		goto out;
	if (archive_write_close(a) != ARCHIVE_OK) {
		cause_set(cause, "write %s: %s", tmp, archive_error_string(a));
		goto out;
	}
	if (rename(tmp, out) == -1) {
		cause_set(cause, "rename %s: %s", out, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	archive_write_free(a);
	if (rc == -1)
		unlink(tmp);
	free(tmp);
	return rc;
}
