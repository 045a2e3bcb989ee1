/*
 * OCI layers onto a root directory (oci_layer.h). The writer is ours, not
 * libarchive's archive_write_disk: its secure modes refuse any path that
 * crosses a symlink, which real images need (usrmerge's /lib -> usr/lib),
 * and it knows nothing of whiteouts. So libarchive only reads, and every
 * filesystem call here is relative to a directory fd found by openat2 with
 * RESOLVE_IN_ROOT: the rootfs's own symlinks are followed the way the guest
 * will see them, and never out of it.
 */
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <linux/openat2.h>
#include <openssl/evp.h>

#include "common/util.h"
#include "images/oci_layer.h"
#include "images/oci_parse.h"

#define OCI_READ_BLOCK	(256 * 1024)

/* The blob reader: libarchive pulls from fd, and every byte goes through the digest. */
struct oci_src {
	int		 fd;
	EVP_MD_CTX	*md;
	char		 buf[OCI_READ_BLOCK];
};

struct oci_apply {
	int			 rootfd;	/* -1: check only */
	const char		*what;
	struct oci_budget	*b;
	char			**seen;		/* paths this layer wrote (opaque dirs keep them) */
	size_t			 nseen, cap;
};

int
oci_open_in(int rootfd, const char *path, int flags)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)flags | O_CLOEXEC;
	how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
	return (int)syscall(SYS_openat2, rootfd, *path ? path : ".", &how, sizeof(how));
}

static ssize_t
oci_src_read(struct archive *a, void *arg, const void **buf)
{
	struct oci_src *s = arg;
	ssize_t n;

	do
		n = read(s->fd, s->buf, sizeof(s->buf));
	while (n == -1 && errno == EINTR);
	if (n == -1) {
		archive_set_error(a, errno, "read: %s", strerror(errno));
		return -1;
	}
	if (s->md != NULL && n > 0)
		EVP_DigestUpdate(s->md, s->buf, (size_t)n);
	*buf = s->buf;
	return n;
}

/*
 * The parent directory of rel (created, 0755 root, when missing and
 * create is set), and rel's last component in *base. rel is normalized.
 */
static int
oci_parent(int rootfd, const char *rel, const char **base, int create, char **cause)
{
	const char *slash = strrchr(rel, '/'), *pbase;
	char *dir;
	int fd, pfd;

	*base = slash != NULL ? slash + 1 : rel;
	dir = slash != NULL ? xstrndup(rel, (size_t)(slash - rel)) : xstrdup("");
	fd = oci_open_in(rootfd, dir, O_PATH | O_DIRECTORY);
	if (fd == -1 && errno == ENOENT && create) {
		/* The missing ancestors first, each resolved inside the root again. */
		if ((pfd = oci_parent(rootfd, dir, &pbase, 1, cause)) == -1) {
			free(dir);
			return -1;
		}
		if (mkdirat(pfd, pbase, 0755) == 0 || errno == EEXIST)
			fd = oci_open_in(rootfd, dir, O_PATH | O_DIRECTORY);
		close(pfd);
	}
	if (fd == -1)
		cause_set(cause, "parent directory \"/%s\": %s", dir, strerror(errno));
	free(dir);
	return fd;
}

/* Remove name under dirfd, a whole tree if it is a directory; never follows a symlink. */
static int
oci_rmtree_at(int at, const char *name)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(at, name, 0) == -1 && errno != ENOENT ? -1 : 0;
	if ((fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while (rc == 0 && (de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			rc = oci_rmtree_at(dirfd(d), de->d_name);
	closedir(d);
	if (rc == 0 && unlinkat(at, name, AT_REMOVEDIR) == -1)
		rc = -1;
	return rc;
}

static int
oci_seen_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
oci_was_seen(struct oci_apply *ap, const char *path)
{
	return ap->nseen > 0 && bsearch(&path, ap->seen, ap->nseen, sizeof(*ap->seen),
	    oci_seen_cmp) != NULL;
}

static void
oci_seen_add(struct oci_apply *ap, const char *path)
{
	if (ap->nseen == ap->cap) {
		ap->cap = ap->cap ? ap->cap * 2 : 256;
		ap->seen = xreallocarray(ap->seen, ap->cap, sizeof(*ap->seen));
	}
	ap->seen[ap->nseen++] = xstrdup(path);
}

/* An opaque dir: everything below that this layer did not write goes (docker's rule). */
static int
oci_clear(struct oci_apply *ap, int dirfd, const char *prefix)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	char *full;
	int fd, rc = 0;

	if ((fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		xasprintf(&full, "%s%s%s", prefix, *prefix ? "/" : "", de->d_name);
		if (!oci_was_seen(ap, full))
			rc = oci_rmtree_at(fd, de->d_name);
		else if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode)) {
			int cfd = openat(fd, de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
			rc = cfd == -1 ? -1 : oci_clear(ap, cfd, full);
			if (cfd != -1)
				close(cfd);
		}
		free(full);
	}
	closedir(d);
	return rc;
}

/* Owner, mode, xattrs, times on an open file or directory. */
static int
oci_meta_fd(int fd, struct archive_entry *e, char **cause)
{
	const char *name;
	const void *value;
	size_t size;
	struct timespec ts[2];

	if (fchown(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e)) == -1) {
		cause_set(cause, "chown: %s", strerror(errno));
		return -1;
	}
	/* After chown, which clears set-id bits. */
	if (fchmod(fd, archive_entry_perm(e) & 07777) == -1) {
		cause_set(cause, "chmod: %s", strerror(errno));
		return -1;
	}
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
		if (fsetxattr(fd, name, value, size, 0) == -1 && errno != ENOTSUP) {
			cause_set(cause, "xattr %s: %s", name, strerror(errno));
			return -1;
		}
	}
	ts[0].tv_sec = ts[1].tv_sec = archive_entry_mtime(e);
	ts[0].tv_nsec = ts[1].tv_nsec = archive_entry_mtime_nsec(e);
	(void)futimens(fd, ts);
	return 0;
}

static int
oci_write_data(struct archive *a, int fd, struct oci_budget *b, char **cause)
{
	const void *buf;
	size_t len;
	la_int64_t off;
	int r;

	for (;;) {
		r = archive_read_data_block(a, &buf, &len, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK) {
			cause_set(cause, "data: %s", archive_error_string(a));
			return -1;
		}
		if ((b->bytes += len) > b->max_bytes) {
			cause_set(cause, "the image's files exceed %llu MiB",
			    (unsigned long long)(b->max_bytes >> 20));
			return -1;
		}
		if (fd == -1)
			continue;
		/* pwrite at the block's offset keeps sparse files sparse. */
		while (len > 0) {
			ssize_t n = pwrite(fd, buf, len, off);
			if (n == -1) {
				if (errno == EINTR)
					continue;
				cause_set(cause, "write: %s", strerror(errno));
				return -1;
			}
			buf = (const char *)buf + n;
			len -= (size_t)n;
			off += n;
		}
	}
	return 0;
}

static int
oci_put(struct oci_apply *ap, struct archive *a, struct archive_entry *e, const char *rel,
    char **cause)
{
	const char *base, *hl = archive_entry_hardlink(e);
	mode_t type = archive_entry_filetype(e);
	struct stat st;
	char *target = NULL;
	int pfd, fd = -1, rc = -1, exists;

	if (hl != NULL && oci_link_path(hl, &target, cause) == -1)
		return -1;
	if (hl == NULL && (type == AE_IFCHR || type == AE_IFBLK)) {
		cause_set(cause, "device node: not accepted in an image (the guest's /dev is "
		    "devtmpfs)");
		return -1;
	}
	if (hl == NULL && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK &&
	    type != AE_IFIFO) {
		free(target);
		return 0;	/* sockets: nothing to keep */
	}
	if (type == AE_IFLNK && (archive_entry_symlink(e) == NULL ||
	    strlen(archive_entry_symlink(e)) > OCI_PATH_MAX)) {
		cause_set(cause, "symlink without a target, or a target over %d bytes",
		    OCI_PATH_MAX);
		return -1;
	}
	if (ap->rootfd == -1) {
		free(target);
		return type == AE_IFREG && hl == NULL ? oci_write_data(a, -1, ap->b, cause) : 0;
	}
	if ((pfd = oci_parent(ap->rootfd, rel, &base, 1, cause)) == -1) {
		free(target);
		return -1;
	}
	exists = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
	/* A directory over a directory merges; anything else replaces what was there. */
	if (exists && !(hl == NULL && type == AE_IFDIR && S_ISDIR(st.st_mode)) &&
	    oci_rmtree_at(pfd, base) == -1) {
		cause_set(cause, "replace: %s", strerror(errno));
		goto out;
	}
	if (hl != NULL) {
		const char *tbase;
		int tfd = oci_parent(ap->rootfd, target, &tbase, 0, cause);
		if (tfd == -1)
			goto out;
		rc = linkat(tfd, tbase, pfd, base, 0);
		if (rc == -1)
			cause_set(cause, "hard link to /%s: %s", target, strerror(errno));
		close(tfd);
		goto out;
	}
	switch (type) {
	case AE_IFDIR:
		if (!(exists && S_ISDIR(st.st_mode)) && mkdirat(pfd, base, 0700) == -1) {
			cause_set(cause, "mkdir: %s", strerror(errno));
			goto out;
		}
		if ((fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
			cause_set(cause, "open: %s", strerror(errno));
			goto out;
		}
		rc = oci_meta_fd(fd, e, cause);
		break;
	case AE_IFREG:
		if ((fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    0600)) == -1) {
			cause_set(cause, "create: %s", strerror(errno));
			goto out;
		}
		rc = oci_write_data(a, fd, ap->b, cause);
		if (rc == 0 && ftruncate(fd, archive_entry_size(e)) == -1) {
			cause_set(cause, "truncate: %s", strerror(errno));
			rc = -1;
		}
		if (rc == 0)
			rc = oci_meta_fd(fd, e, cause);
		break;
	case AE_IFLNK:
		if (symlinkat(archive_entry_symlink(e), pfd, base) == -1 ||
		    fchownat(pfd, base, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e),
		    AT_SYMLINK_NOFOLLOW) == -1) {
			cause_set(cause, "symlink: %s", strerror(errno));
			goto out;
		}
		rc = 0;
		break;
	case AE_IFIFO:
		if (mkfifoat(pfd, base, 0600) == -1 ||
		    fchownat(pfd, base, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e),
		    AT_SYMLINK_NOFOLLOW) == -1 ||
		    fchmodat(pfd, base, archive_entry_perm(e) & 07777, 0) == -1) {
			cause_set(cause, "fifo: %s", strerror(errno));
			goto out;
		}
		rc = 0;
		break;
	}
out:
	if (fd != -1)
		close(fd);
	close(pfd);
	free(target);
	return rc;
}

static int
oci_whiteout(struct oci_apply *ap, const char *rel, enum oci_entry_kind kind, char **cause)
{
	const char *base;
	int pfd, dfd, rc;

	if (ap->rootfd == -1)
		return 0;
	if (kind == OCI_ENTRY_WHITEOUT) {
		if ((pfd = oci_parent(ap->rootfd, rel, &base, 0, NULL)) == -1)
			return 0;	/* its directory is gone already: so is it */
		rc = oci_rmtree_at(pfd, base);
		if (rc == -1)
			cause_set(cause, "whiteout: %s", strerror(errno));
		close(pfd);
		return rc;
	}
	if ((dfd = oci_open_in(ap->rootfd, rel, O_PATH | O_DIRECTORY)) == -1)
		return 0;	/* nothing below to hide */
	if (ap->nseen > 0)	/* qsort and bsearch want a non-NULL base even for 0 */
		qsort(ap->seen, ap->nseen, sizeof(*ap->seen), oci_seen_cmp);
	rc = oci_clear(ap, dfd, rel);
	if (rc == -1)
		cause_set(cause, "opaque directory: %s", strerror(errno));
	close(dfd);
	return rc;
}

static int
oci_entries(struct oci_apply *ap, struct archive *a, char **cause)
{
	struct archive_entry *e;
	enum oci_entry_kind kind;
	const char *name;
	char *rel, *why = NULL;
	int r, rc;

	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		name = archive_entry_pathname(e);
		if (name == NULL) {
			cause_set(cause, "%s: an entry has no name", ap->what);
			return -1;
		}
		if (++ap->b->entries > ap->b->max_entries) {
			cause_set(cause, "%s: more than %llu entries in the image", ap->what,
			    (unsigned long long)ap->b->max_entries);
			return -1;
		}
		if (oci_entry_path(name, &rel, &kind, &why) == -1)
			goto bad;
		if (kind == OCI_ENTRY_ROOT)
			rc = 0;
		else if (kind == OCI_ENTRY_PLAIN) {
			rc = oci_put(ap, a, e, rel, &why);
			if (rc == 0 && ap->rootfd != -1)
				oci_seen_add(ap, rel);
		} else
			rc = oci_whiteout(ap, rel, kind, &why);
		free(rel);
		if (rc == -1)
			goto bad;
	}
	if (r != ARCHIVE_EOF) {
		cause_set(cause, "%s: not a readable tar: %s", ap->what, archive_error_string(a));
		return -1;
	}
	return 0;
bad:
	cause_set(cause, "%s: entry \"%s\": %s", ap->what, name, why);
	free(why);
	return -1;
}

int
oci_layer_read(int fd, int rootfd, const char *what, const char *digest,
    struct oci_budget *b, char **cause)
{
	struct oci_apply ap;
	struct oci_src *src;
	struct archive *a;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0, i;
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	int rc;

	if (lseek(fd, 0, SEEK_SET) == -1) {
		cause_set(cause, "%s: seek: %s", what, strerror(errno));
		return -1;
	}
	memset(&ap, 0, sizeof(ap));
	ap.rootfd = rootfd;
	ap.what = what;
	ap.b = b;
	src = xcalloc(1, sizeof(*src));
	src->fd = fd;
	if (digest != NULL) {
		src->md = xnonnull(EVP_MD_CTX_new(), "EVP_MD_CTX_new");
		EVP_DigestInit_ex(src->md, EVP_sha256(), NULL);
	}
	a = xnonnull(archive_read_new(), "archive_read_new");
	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	if (archive_read_open(a, src, NULL, oci_src_read, NULL) != ARCHIVE_OK) {
		cause_set(cause, "%s: not a tar layer: %s", what, archive_error_string(a));
		rc = -1;
	} else
		rc = oci_entries(&ap, a, cause);
	if (rc == 0 && src->md != NULL) {
		/* The tar reader stops at the end-of-archive blocks: hash the padding too. */
		const void *buf;
		while (oci_src_read(a, src, &buf) > 0)
			;
		EVP_DigestFinal_ex(src->md, md, &mdlen);
		for (i = 0; i < mdlen; i++)
			snprintf(hex + 2 * i, 3, "%02x", md[i]);
		if (strcmp(hex, digest + 7) != 0) {
			cause_set(cause, "%s: digest mismatch (the blob's sha256 is %s)", what, hex);
			rc = -1;
		}
	}
	archive_read_free(a);
	if (src->md != NULL)
		EVP_MD_CTX_free(src->md);
	free(src);
	for (i = 0; i < ap.nseen; i++)
		free(ap.seen[i]);
	free(ap.seen);
	return rc;
}

int
oci_unpack_outer(int fd, int dirfd, struct oci_budget *b, char **cause)
{
	struct oci_apply ap;
	struct oci_src *src;
	struct archive *a;
	struct archive_entry *e;
	enum oci_entry_kind kind;
	const char *name;
	char *rel, *why = NULL;
	int r = ARCHIVE_OK, rc = 0;
	size_t i;

	memset(&ap, 0, sizeof(ap));
	ap.rootfd = dirfd;
	ap.what = "image tar";
	ap.b = b;
	src = xcalloc(1, sizeof(*src));
	src->fd = fd;
	a = xnonnull(archive_read_new(), "archive_read_new");
	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_none(a);
	if (archive_read_open(a, src, NULL, oci_src_read, NULL) != ARCHIVE_OK) {
		cause_set(cause, "image: neither an OCI layout directory nor a tar: %s",
		    archive_error_string(a));
		rc = -1;
		goto out;
	}
	while (rc == 0 && ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK ||
	    r == ARCHIVE_WARN)) {
		mode_t t = archive_entry_filetype(e);
		rel = why = NULL;
		kind = OCI_ENTRY_PLAIN;
		if ((name = archive_entry_pathname(e)) == NULL)
			why = xstrdup("an entry has no name");
		else if (oci_entry_path(name, &rel, &kind, &why) == 0 &&
		    (kind == OCI_ENTRY_WHITEOUT || kind == OCI_ENTRY_OPAQUE ||
		    archive_entry_hardlink(e) != NULL ||
		    (t != AE_IFREG && t != AE_IFDIR && t != AE_IFLNK)))
			why = xstrdup("only files, directories and symlinks belong in an image tar");
		if (why == NULL && kind != OCI_ENTRY_ROOT)
			(void)oci_put(&ap, a, e, rel, &why);
		if (why != NULL) {
			cause_set(cause, "image tar: entry \"%s\": %s", name ? name : "", why);
			rc = -1;
		}
		free(rel);
		free(why);
	}
	if (rc == 0 && r != ARCHIVE_EOF) {
		cause_set(cause, "image: not a readable tar: %s", archive_error_string(a));
		rc = -1;
	}
out:
	archive_read_free(a);
	free(src);
	for (i = 0; i < ap.nseen; i++)
		free(ap.seen[i]);
	free(ap.seen);
	return rc;
}
