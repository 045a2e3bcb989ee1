/*
 * The superblock check that decides whether a read-only volume's journal
 * is replayed before it is attached (sbm_volreplay.c): flagged images
 * only, nothing that is not ext4, a superblock cut short; and the layout
 * against a real mkfs.ext4 image, before and after debugfs sets the
 * recovery flag (skipped where e2fsprogs is missing).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/sbm_volume.h"
#include "t.h"

static void
put_le32(unsigned char *p, unsigned v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff;
	p[3] = (v >> 24) & 0xff;
}

static void
test_fields(void)
{
	unsigned char sb[1024];

	memset(sb, 0, sizeof(sb));
	CHECK(sbm_ext4_needs_replay(sb, sizeof(sb)) == 0);		/* no magic */
	sb[0x38] = 0x53;
	sb[0x39] = 0xef;
	CHECK(sbm_ext4_needs_replay(sb, sizeof(sb)) == 0);		/* clean */
	put_le32(sb + 0x60, 0x4);
	CHECK(sbm_ext4_needs_replay(sb, sizeof(sb)) == 0);		/* flag, no journal */
	put_le32(sb + 0x5c, 0x4);
	CHECK(sbm_ext4_needs_replay(sb, sizeof(sb)) == 1);		/* journal to replay */
	CHECK(sbm_ext4_needs_replay(sb, 0x60) == 0);			/* cut short */
	put_le32(sb + 0x60, 0x2c2);	/* the usual ext4 features, no recover bit */
	CHECK(sbm_ext4_needs_replay(sb, sizeof(sb)) == 0);
	sb[0x39] = 0x00;
	put_le32(sb + 0x60, 0x4);
	CHECK(sbm_ext4_needs_replay(sb, sizeof(sb)) == 0);		/* not ext4 */
}

static int
superblock_of(const char *img, unsigned char *sb)
{
	int fd = open(img, O_RDONLY);
	ssize_t n = fd == -1 ? -1 : pread(fd, sb, 1024, 1024);

	if (fd != -1)
		close(fd);
	return n == 1024 ? 0 : -1;
}

static void
test_real_image(void)
{
	char dir[] = "/tmp/airlock-volreplay-XXXXXX", img[64], cmd[256];
	unsigned char sb[1024];

	if (access("/usr/sbin/mkfs.ext4", X_OK) != 0 || access("/usr/sbin/debugfs", X_OK) != 0) {
		fprintf(stderr, "e2fsprogs missing: real image skipped\n");
		return;
	}
	CHECK(mkdtemp(dir) != NULL);
	snprintf(img, sizeof(img), "%s/v.ext4", dir);
	snprintf(cmd, sizeof(cmd), "/usr/sbin/mkfs.ext4 -q -F %s 16M >/dev/null 2>&1", img);
	CHECK(system(cmd) == 0);
	CHECK(superblock_of(img, sb) == 0 && sbm_ext4_needs_replay(sb, sizeof(sb)) == 0);
	snprintf(cmd, sizeof(cmd), "/usr/sbin/debugfs -w -R 'feature needs_recovery' %s "
	    ">/dev/null 2>&1", img);
	CHECK(system(cmd) == 0);
	CHECK(superblock_of(img, sb) == 0 && sbm_ext4_needs_replay(sb, sizeof(sb)) == 1);
	unlink(img);
	rmdir(dir);
}

int
main(void)
{
	T_RUN(test_fields);
	T_RUN(test_real_image);
	return t_done();
}
