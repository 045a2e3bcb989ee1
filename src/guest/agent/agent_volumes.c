/*
 * Volumes in the guest (agent_volumes.h). The host names each disk by the
 * virtio-blk serial it gave it, never by /dev/vdX (whose letters follow
 * probe order), and the guest path it wants; both are checked again here
 * since a guest's root may have replaced anything else. Runs from /init
 * after every boot and restore: after a restore the mounts are still in
 * the guest's memory, so an already mounted disk is not mounted twice.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/fs.h>

#include "guest/agent/agent_volumes.h"

static int
vfail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
vfail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static int
valid_path(const char *p)
{
	const char *c = p, *e;
	size_t n;

	if (p == NULL || p[0] != '/' || strlen(p) >= 256 || strcmp(p, "/") == 0)
		return 0;
	while (*c == '/') {
		c++;
		e = strchr(c, '/');
		n = e ? (size_t)(e - c) : strlen(c);
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		c += n;
	}
	return 1;
}

int
volumes_parse(json_t *v, char *err, size_t errlen)
{
	const char *s;
	json_t *e;
	size_t i;

	if (v == NULL)
		return 0;
	if (!json_is_array(v) || json_array_size(v) > AGENT_VOLUMES_MAX)
		return vfail(err, errlen, "volumes: must be an array of at most %d",
		    AGENT_VOLUMES_MAX);
	json_array_foreach(v, i, e) {
		s = json_string_value(json_object_get(e, "serial"));
		if (s == NULL || *s == '\0' || strlen(s) > 20 ||
		    strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(s))
			return vfail(err, errlen, "volumes[%zu].serial: 1-20 of [a-z0-9-]", i);
		if (!valid_path(json_string_value(json_object_get(e, "path"))))
			return vfail(err, errlen, "volumes[%zu].path: an absolute path without "
			    "\".\" or \"..\", not /", i);
		if (!json_is_boolean(json_object_get(e, "read_only")))
			return vfail(err, errlen, "volumes[%zu].read_only: must be a boolean", i);
		if (json_object_get(e, "size") != NULL &&
		    (!json_is_integer(json_object_get(e, "size")) ||
		    json_integer_value(json_object_get(e, "size")) < 0))
			return vfail(err, errlen, "volumes[%zu].size: must be a byte count", i);
	}
	return 0;
}

/* /dev/vdX of the disk whose serial is s, in out; 0 or -1. */
static int
find_disk(const char *s, char *out, size_t len)
{
	char path[300], buf[64];
	struct dirent *de;
	DIR *d;
	ssize_t n;
	int fd, found = -1;

	if ((d = opendir("/sys/block")) == NULL)
		return -1;
	while (found == -1 && (de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "vd", 2) != 0 || strlen(de->d_name) > 32)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%.32s/serial", de->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		if (strcmp(buf, s) == 0) {
			snprintf(out, len, "/dev/%.32s", de->d_name);
			found = 0;
		}
	}
	closedir(d);
	return found;
}

static int
mkdirs(const char *path)
{
	char buf[256], *p;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0755) == -1 && errno != EEXIST ? -1 : 0;
}

/* The disk's capacity in bytes (/sys/block/vdX/size counts 512-byte sectors); -1 unknown. */
static long long
disk_bytes(const char *dev)
{
	char path[300], buf[32];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/block/%.32s/size", dev + strlen("/dev/"));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return strtoll(buf, NULL, 10) * 512;
}

/*
 * A slot filled at a pool claim (docs/volumes.md): the guest booted with
 * its placeholder, so the disk grows to the volume only when virtio-blk's
 * config change is handled. Wait (at most VOLUME_GROW_MS) for the size
 * the host named. Then drop the disk's cached blocks (BLKFLSBUF): the
 * boot's partition scan read the placeholder's zeros, and while the last
 * close drops them anyway, anything that held the disk open since would
 * keep them, and the mount would read zeros for the superblock.
 */
#define VOLUME_GROW_MS	5000

static int
disk_settle(const char *dev, long long size, char *err, size_t errlen, size_t i)
{
	struct timespec ts = { 0, 5 * 1000 * 1000 };
	long long have = 0;
	int ms, fd;

	for (ms = 0; size > 0 && (have = disk_bytes(dev)) < size && ms < VOLUME_GROW_MS; ms += 5)
		nanosleep(&ts, NULL);
	if (size > 0 && have < size)
		return vfail(err, errlen, "volumes[%zu]: %s is %lld bytes, not the volume's %lld",
		    i, dev, have, size);
	if ((fd = open(dev, O_RDONLY | O_CLOEXEC)) == -1)
		return vfail(err, errlen, "volumes[%zu]: %s: %s", i, dev, strerror(errno));
	if (ioctl(fd, BLKFLSBUF, 0) == -1) {
		close(fd);
		return vfail(err, errlen, "volumes[%zu]: BLKFLSBUF %s: %s", i, dev,
		    strerror(errno));
	}
	close(fd);
	return 0;
}

/*
 * FIFREEZE (or FITHAW) the filesystem at path if it is the disk ds: 1 when
 * it was frozen (thawed) now or already, 0 when that disk is not mounted
 * there, -1 with errno.
 */
static int
volume_fz(const char *path, const struct stat *ds, int thaw)
{
	struct stat ps;
	int fd, rc;

	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? 0 : -1;
	if (fstat(fd, &ps) == -1 || ps.st_dev != ds->st_rdev) {
		close(fd);
		return 0;
	}
	rc = ioctl(fd, thaw ? FITHAW : FIFREEZE, 0);
	/* Frozen twice: EBUSY; thawed when not frozen: EINVAL. Both are the state asked for. */
	if (rc == -1 && errno == (thaw ? EINVAL : EBUSY))
		rc = 0;
	close(fd);
	return rc == -1 ? -1 : 1;
}

void
volumes_fz_load(json_t *v, int thaw, struct volumes_fz *f)
{
	json_t *e;
	size_t i;

	memset(f, 0, sizeof(*f));
	f->thaw = thaw;
	json_array_foreach(v, i, e) {
		if (json_is_true(json_object_get(e, "read_only")) || f->n >= AGENT_VOLUMES_MAX)
			continue;
		snprintf(f->serial[f->n], sizeof(f->serial[0]), "%s",
		    json_string_value(json_object_get(e, "serial")));
		snprintf(f->path[f->n], sizeof(f->path[0]), "%s",
		    json_string_value(json_object_get(e, "path")));
		f->n++;
	}
}

void
volumes_fz_run(struct volumes_fz *f)
{
	struct stat ds;
	char dev[64];
	int i, r;

	for (i = 0; i < f->n; i++) {
		if (find_disk(f->serial[i], dev, sizeof(dev)) == -1 || stat(dev, &ds) == -1)
			continue;	/* not this guest's disk: nothing of it to freeze */
		if ((r = volume_fz(f->path[i], &ds, f->thaw)) == -1) {
			f->rc = vfail(f->err, sizeof(f->err), "volumes: %s %s: %s", f->thaw ?
			    "FITHAW" : "FIFREEZE", f->path[i], strerror(errno));
			continue;
		}
		f->done += r;
	}
}

int
volumes_mount(json_t *v, char *err, size_t errlen)
{
	struct stat ds, ps;
	char dev[64];
	const char *serial, *path;
	json_t *e;
	size_t i;
	int ro;

	json_array_foreach(v, i, e) {
		serial = json_string_value(json_object_get(e, "serial"));
		path = json_string_value(json_object_get(e, "path"));
		ro = json_is_true(json_object_get(e, "read_only"));
		if (find_disk(serial, dev, sizeof(dev)) == -1)
			return vfail(err, errlen, "volumes[%zu]: no disk with serial %s", i, serial);
		if (stat(dev, &ds) == -1)
			return vfail(err, errlen, "volumes[%zu]: %s: %s", i, dev, strerror(errno));
		if (mkdirs(path) == -1)
			return vfail(err, errlen, "volumes[%zu]: mkdir %s: %s", i, path,
			    strerror(errno));
		/*
		 * Mounted already (a restored guest): its root's st_dev is the disk.
		 * A suspend froze it (volumes_fz_run): writable again from now on.
		 */
		if (stat(path, &ps) == 0 && ps.st_dev == ds.st_rdev) {
			if (!ro)
				(void)volume_fz(path, &ds, 1);
			continue;
		}
		if (disk_settle(dev, json_integer_value(json_object_get(e, "size")), err, errlen,
		    i) == -1)
			return -1;
		if (mount(dev, path, "ext4", MS_NOSUID | MS_NODEV | (ro ? MS_RDONLY : 0),
		    NULL) == -1)
			return vfail(err, errlen, "volumes[%zu]: mount %s on %s: %s", i, dev, path,
			    strerror(errno));
	}
	return 0;
}
