/* FICLONE-based copies: a sandbox rootfs costs metadata, not a copy of the template. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/util.h"
#include "images/reflink.h"

int
reflink_fds(int in, int out, const char *src, const char *dst, char **cause)
{
	int e;

	if (ioctl(out, FICLONE, in) == -1) {
		e = errno;
		cause_set(cause, "reflink %s to %s: %s%s", src, dst, strerror(e),
		    e == EOPNOTSUPP || e == EXDEV || e == EINVAL ?
		    " (the data dir must be on btrfs or XFS with reflink; make up creates one)" : "");
		errno = e;
		return -1;
	}
	return 0;
}

int
reflink_fd(int in, const char *src, const char *dst, char **cause)
{
	int out, e;

	if ((out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) == -1) {
		cause_set(cause, "create %s: %s", dst, strerror(errno));
		return -1;
	}
	if (reflink_fds(in, out, src, dst, cause) == -1) {
		e = errno;
		close(out);
		unlink(dst);
		errno = e;
		return -1;
	}
	if (close(out) == -1) {
		e = errno;
		cause_set(cause, "close %s: %s", dst, strerror(e));
		unlink(dst);
		errno = e;
		return -1;
	}
	return 0;
}

int
reflink_copy(const char *src, const char *dst, char **cause)
{
	int in, rc;

	if ((in = open(src, O_RDONLY | O_CLOEXEC)) == -1) {
		cause_set(cause, "open %s: %s", src, strerror(errno));
		return -1;
	}
	rc = reflink_fd(in, src, dst, cause);
	close(in);
	return rc;
}

int
reflink_supported(const char *dir, char **cause)
{
	char *a, *b;
	int fd, rc = -1;

	xasprintf(&a, "%s/.reflink-probe.%ld", dir, (long)getpid());
	xasprintf(&b, "%s.clone", a);
	if ((fd = open(a, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) == -1) {
		cause_set(cause, "create %s: %s", a, strerror(errno));
		goto out;
	}
	if (write(fd, "airlock", 7) != 7) {
		cause_set(cause, "write %s: %s", a, strerror(errno));
		close(fd);
		goto out;
	}
	close(fd);
	rc = reflink_copy(a, b, cause);
out:
	unlink(b);
	unlink(a);
	free(a);
	free(b);
	return rc;
}
