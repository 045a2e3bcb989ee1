/*
 * Sandbox storage on a deliberately small data dir (a 400 MiB btrfs on a
 * loop device): reflinked disks cost no data, a sandbox whose RAM file could
 * not fit is refused up front with the numbers, a full filesystem refuses
 * new sandboxes with a clear error and leaves nothing half-made, and
 * snapshot directories appear only when complete.
 */
#include <sys/mount.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/subproc.h"
#include "common/digest.h"
#include "common/util.h"
#include "images/stor_sandbox.h"
#include "images/stor_snapshot.h"
#include "../unit/t.h"

static char top[] = "/tmp/airlock-stor-XXXXXX";
static char *img, *mnt, *tmpl;

static int
setup(void)
{
	char *cause = NULL, *buf;
	int fd, i;

	if (mkdtemp(top) == NULL)
		return -1;
	xasprintf(&img, "%s/data.btrfs", top);
	xasprintf(&mnt, "%s/data", top);
	mkdir(mnt, 0755);
	fd = open(img, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd == -1 || ftruncate(fd, 400 << 20) == -1)
		return -1;
	close(fd);
	const char *mkfs[] = { "mkfs.btrfs", "-q", "-f", img, NULL };
	const char *mnt_argv[] = { "mount", "-o", "loop", img, mnt, NULL };
	if (subproc_run(mkfs, NULL, SUBPROC_OUTPUT_TAIL, &cause) == -1 ||
	    subproc_run(mnt_argv, NULL, SUBPROC_OUTPUT_TAIL, &cause) == -1) {
		fprintf(stderr, "setup: %s\n", cause);
		free(cause);
		return -1;
	}
	setenv("AIRLOCK_DATA_DIR", mnt, 1);
	/* A 32 MiB "template" with real data in it. */
	tmpl = paths_data("rootfs.ext4");
	fd = open(tmpl, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	buf = xmalloc(1 << 20);
	for (i = 0; i < 32; i++) {
		memset(buf, 'a' + i % 26, 1 << 20);
		if (write(fd, buf, 1 << 20) != 1 << 20)
			return -1;
	}
	free(buf);
	fsync(fd);
	close(fd);
	return 0;
}

static void
teardown(void)
{
	const char *um[] = { "umount", mnt, NULL };

	if (mnt != NULL && subproc_run(um, NULL, SUBPROC_OUTPUT_TAIL, NULL) == -1)
		umount2(mnt, MNT_DETACH);
	remove_tree(top, NULL);
	free(img);
	free(mnt);
	free(tmpl);
}

static int
count_entries(const char *rel)
{
	char *cmd = paths_data("%s", rel), *out = NULL;
	const char *argv[] = { "ls", "-A", cmd, NULL };
	int n = 0;

	if (subproc_capture(argv, 65536, &out, NULL) == 0) {
		for (char *p = out; *p; p++)
			if (*p == '\n')
				n++;
		if (*out != '\0')
			n++;
	}
	free(out);
	free(cmd);
	return n;
}

static void
test_cow_and_refusals(void)
{
	struct stor_sandbox a, b;
	char *cause = NULL;
	uint64_t before, after;
	char *fill;
	int fd;

	/* Guest RAM that cannot fit is refused before anything is made. */
	CHECK(stor_sandbox_create("big", tmpl, 1024ULL << 20, &b, &cause) == -1);
	CHECK_CAUSE(cause, "needs 1280 MiB free in");
	CHECK_CAUSE(cause, "MiB available");
	fprintf(stderr, "   %s\n", cause);
	free(cause);
	cause = NULL;
	CHECK(count_entries("sandboxes") == 0);

	/* The disk is a reflink: free space hardly moves. */
	sync();
	before = stor_free_bytes();
	CHECK(stor_sandbox_create("small", tmpl, 16ULL << 20, &a, &cause) == 0);
	sync();
	after = stor_free_bytes();
	CHECK(before - after < (8ULL << 20));
	CHECK(stor_usage(a.ss_rootfs) >= (32ULL << 20));
	CHECK(count_entries("run/uids") == 1);

	/* Fill the filesystem; the next sandbox is refused cleanly. */
	fill = paths_data("fill");
	fd = open(fill, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd != -1);
	if (fd != -1) {
		uint64_t left = stor_free_bytes();
		if (left > (2ULL << 20) && fallocate(fd, 0, 0, (off_t)(left - (2ULL << 20))) == -1)
			fprintf(stderr, "   fallocate: %s\n", strerror(errno));
		fsync(fd);
		close(fd);
	}
	/* btrfs updates its free space accounting at commit. */
	sync();
	fprintf(stderr, "   filled: %llu MiB free\n", (unsigned long long)(stor_free_bytes() >> 20));
	if (stor_sandbox_create("after-full", tmpl, 16ULL << 20, &b, &cause) == 0) {
		CHECK(!"created on a full filesystem");
		stor_sandbox_destroy(&b, NULL);
	}
	CHECK_CAUSE(cause, "MiB available");
	fprintf(stderr, "   %s\n", cause);
	free(cause);
	cause = NULL;
	CHECK(count_entries("sandboxes") == 1);
	CHECK(count_entries("run/uids") == 1);

	/* Destroy frees the space and the uid. */
	unlink(fill);
	free(fill);
	CHECK(stor_sandbox_destroy(&a, &cause) == 0);
	CHECK(count_entries("sandboxes") == 0);
	CHECK(count_entries("run/uids") == 0);
}

static void
test_snapshot_dirs(void)
{
	struct stor_snapshot sn, dup;
	struct stor_snap_header h, back;
	char *p, *cause = NULL;
	static const char *const files[] = { STOR_SNAP_DEVSTATE, STOR_SNAP_MEM, STOR_SNAP_ROOTFS };
	size_t i;

	CHECK(stor_snapshot_begin("s1", &sn, &cause) == 0);
	/* Not visible under its final name while it is being written. */
	CHECK(access(sn.sn_dir, F_OK) == -1);
	for (i = 0; i < 3; i++) {
		p = stor_snapshot_tmp_path(&sn, files[i]);
		CHECK(write_file_atomic(p, "x", 1, 0600, NULL) == 0);
		free(p);
	}
	memset(&h, 0, sizeof(h));
	h.format = STOR_SNAP_FORMAT;
	h.template = "base";
	h.kernel = "k";
	h.memory_mb = 256;
	h.vcpus = 2;
	h.devices = "virtio-blk";
	sha256_hex("x", 1, h.devstate_sha256);
	h.devstate_size = 1;
	h.mem_size = 1;
	h.created = "now";
	CHECK(stor_snapshot_commit(&sn, &h, &cause) == 0);
	CHECK(access(sn.sn_tmp, F_OK) == -1);
	CHECK(stor_snapshot_load(sn.sn_dir, &back, &cause) == 0);
	CHECK_STR(back.devstate_sha256, h.devstate_sha256);
	stor_snap_header_free(&back);
	/* Snapshot ids are unique. */
	CHECK(stor_snapshot_begin("s1", &dup, &cause) == -1);
	CHECK_CAUSE(cause, "already exists");
	free(cause);
	cause = NULL;
	/* An aborted one leaves nothing. */
	CHECK(stor_snapshot_begin("s2", &dup, &cause) == 0);
	stor_snapshot_abort(&dup);
	CHECK(access(dup.sn_tmp, F_OK) == -1 && access(dup.sn_dir, F_OK) == -1);
	stor_snapshot_free(&dup);
	CHECK(stor_snapshot_remove(sn.sn_dir, &cause) == 0);
	stor_snapshot_free(&sn);
}

int
main(void)
{
	int rc;

	if (geteuid() != 0) {
		fprintf(stderr, "needs root (loop mount)\n");
		return 77;
	}
	if (setup() == -1) {
		teardown();
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	T_RUN(test_cow_and_refusals);
	T_RUN(test_snapshot_dirs);
	rc = t_done();
	teardown();
	return rc;
}
