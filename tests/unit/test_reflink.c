/*
 * reflink_fd, the one FICLONE wrapper (template → sandbox rootfs, a
 * sandbox's files → a snapshot): a copy that shares blocks where the
 * filesystem can, and a failure that leaves no half-made file where it
 * cannot. The success half needs a reflink-capable directory: the data
 * dir (btrfs or XFS) when it is one, else it is skipped and said so.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "common/util.h"
#include "images/reflink.h"
#include "t.h"

static int
make_src(const char *dir, char **path)
{
	int fd;

	xasprintf(path, "%s/src", dir);
	if ((fd = open(*path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) == -1)
		return -1;
	CHECK(write(fd, "airlock reflink", 15) == 15);
	return fd;
}

/* A filesystem without FICLONE: -1 with errno and a cause, no dst left. */
static void
test_unsupported(void)
{
	char dir[] = "/dev/shm/airlock-reflink-XXXXXX", *src, *dst, *cause = NULL;
	int fd;

	CHECK(mkdtemp(dir) != NULL);
	CHECK((fd = make_src(dir, &src)) != -1);
	xasprintf(&dst, "%s/dst", dir);
	errno = 0;
	CHECK(reflink_fd(fd, src, dst, &cause) == -1);
	CHECK(errno == EOPNOTSUPP || errno == EXDEV || errno == EINVAL);
	CHECK_CAUSE(cause, "btrfs or XFS");
	CHECK(access(dst, F_OK) == -1 && errno == ENOENT);
	/* The source fd is the caller's: still open. */
	CHECK(fcntl(fd, F_GETFD) != -1);
	free(cause);
	cause = NULL;
	/* An existing dst is never overwritten. */
	CHECK(reflink_fd(fd, src, src, &cause) == -1);
	CHECK_CAUSE(cause, "create");
	free(cause);
	close(fd);
	unlink(src);
	rmdir(dir);
	free(src);
	free(dst);
}

static void
test_clone(void)
{
	const char *base = getenv("AIRLOCK_DATA_DIR") != NULL ? getenv("AIRLOCK_DATA_DIR") :
	    "/var/lib/airlock";
	char *dir, *src, *dst, *data = NULL, *cause = NULL;
	struct statfs sf;
	size_t len;
	int fd;

	if (statfs(base, &sf) == -1 || (sf.f_type != BTRFS_SUPER_MAGIC && sf.f_type != XFS_SUPER_MAGIC) ||
	    access(base, W_OK) == -1) {
		fprintf(stderr, "skip test_clone: %s is not a writable btrfs/XFS\n", base);
		return;
	}
	xasprintf(&dir, "%s/.test-reflink-XXXXXX", base);
	CHECK(mkdtemp(dir) != NULL);
	CHECK((fd = make_src(dir, &src)) != -1);
	xasprintf(&dst, "%s/dst", dir);
	CHECK(reflink_fd(fd, src, dst, &cause) == 0);
	CHECK(cause == NULL);
	CHECK(read_file(dst, 100, &data, &len, &cause) == 0 && len == 15);
	CHECK_STR(data, "airlock reflink");
	free(data);
	/* reflink_copy is the same over a path. */
	unlink(dst);
	CHECK(reflink_copy(src, dst, &cause) == 0);
	close(fd);
	unlink(dst);
	unlink(src);
	rmdir(dir);
	free(dir);
	free(src);
	free(dst);
}

int
main(void)
{
	T_RUN(test_unsupported);
	T_RUN(test_clone);
	return t_done();
}
