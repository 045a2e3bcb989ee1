/* Sandbox directories, jail uid allocation, CoW rootfs, space checks. */
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/util.h"
#include "images/reflink.h"
#include "images/stor_sandbox.h"

static uint32_t
stor_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s != '\0')
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

int
stor_uid_alloc(const char *name, uid_t *uid, char **cause)
{
	char *dir, *p;
	uint32_t start, i;
	int fd;

	dir = paths_data("run/uids");
	if (mkdir_p(dir, 0700, cause) == -1) {
		free(dir);
		return -1;
	}
	/* Start from a hash of the name so restarts rarely collide on one slot. */
	start = stor_hash(name) % STOR_UID_COUNT;
	for (i = 0; i < STOR_UID_COUNT; i++) {
		uid_t u = STOR_UID_BASE + (start + i) % STOR_UID_COUNT;

		xasprintf(&p, "%s/%u", dir, (unsigned)u);
		fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		free(p);
		if (fd == -1 && errno == EEXIST)
			continue;
		if (fd == -1) {
			cause_set(cause, "claim uid %u in %s: %s", (unsigned)u, dir, strerror(errno));
			free(dir);
			return -1;
		}
		if (write(fd, name, strlen(name)) < 0) {
			/* the claim is the file's existence; its content is a hint */
		}
		close(fd);
		free(dir);
		*uid = u;
		return 0;
	}
	cause_set(cause, "all %d jail uids are in use (%s)", STOR_UID_COUNT, dir);
	free(dir);
	return -1;
}

void
stor_uid_release(uid_t uid)
{
	char *p = paths_data("run/uids/%u", (unsigned)uid);

	unlink(p);
	free(p);
}

int
stor_uid_reconcile(void)
{
	struct dirent *de;
	char *dir, *p, *name = NULL, *sb;
	int n = 0;
	DIR *d;

	dir = paths_data("run/uids");
	if ((d = opendir(dir)) == NULL) {
		free(dir);
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		xasprintf(&p, "%s/%s", dir, de->d_name);
		if (read_file(p, AIRLOCK_NAME_MAX + 1, &name, NULL, NULL) == 0) {
			/* A claim is only valid while its sandbox exists. */
			sb = paths_data("sandboxes/%s", name);
			if (!paths_valid_name(name) || access(sb, F_OK) == -1) {
				if (unlink(p) == 0)
					n++;
			}
			free(sb);
			free(name);
			name = NULL;
		}
		free(p);
	}
	closedir(d);
	free(dir);
	return n;
}

uint64_t
stor_free_bytes(void)
{
	struct statvfs sv;

	if (statvfs(paths_data_dir(), &sv) == -1)
		return 0;
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

int
stor_space(uint64_t *avail, uint64_t *total, char **cause)
{
	struct statvfs sv;

	if (statvfs(paths_data_dir(), &sv) == -1) {
		cause_set(cause, "statvfs %s: %s", paths_data_dir(), strerror(errno));
		return -1;
	}
	*avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	*total = (uint64_t)sv.f_blocks * sv.f_frsize;
	return 0;
}

int
stor_floor_check(uint64_t floor_bytes, const char *what, char **cause)
{
	uint64_t avail, total;

	if (floor_bytes == 0)
		return 0;
	/* A statvfs that fails says nothing about space: refuse rather than guess. */
	if (stor_space(&avail, &total, cause) == -1)
		return -1;
	if (avail >= floor_bytes)
		return 0;
	cause_set(cause, "%s refused: the data dir %s has %llu MiB free, below the floor of "
	    "%llu MiB (disk_free_floor_mb) that keeps running sandboxes from filling the host",
	    what, paths_data_dir(), (unsigned long long)(avail >> 20),
	    (unsigned long long)(floor_bytes >> 20));
	return -1;
}

uint64_t
stor_usage(const char *path)
{
	struct stat st;
	struct dirent *de;
	uint64_t total;
	DIR *d;

	if (lstat(path, &st) == -1)
		return 0;
	total = (uint64_t)st.st_blocks * 512;
	if (!S_ISDIR(st.st_mode) || (d = opendir(path)) == NULL)
		return total;
	while ((de = readdir(d)) != NULL) {
		char *p;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		xasprintf(&p, "%s/%s", path, de->d_name);
		total += stor_usage(p);
		free(p);
	}
	closedir(d);
	return total;
}

int
stor_give(const struct stor_sandbox *ss, const char *path, mode_t mode, char **cause)
{
	if (chown(path, ss->ss_uid, ss->ss_gid) == -1 || chmod(path, mode) == -1) {
		cause_set(cause, "chown/chmod %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Turn ENOSPC into a message that says where and how much. */
static void
stor_space_cause(char **cause, const char *what)
{
	cause_set(cause, "%s: no space left in %s (%llu MiB free)", what, paths_data_dir(),
	    (unsigned long long)(stor_free_bytes() >> 20));
}

int
stor_reflink_from_sandbox(const struct stor_sandbox *ss, const char *src, const char *dst,
    char **cause)
{
	struct stat st;
	int in, rc;

	if ((in = open(src, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) == -1) {
		cause_set(cause, "open %s: %s", src, errno == ELOOP ?
		    "is a symlink (refused: the VMM owns this directory)" : strerror(errno));
		return -1;
	}
	if (fstat(in, &st) == -1 || !S_ISREG(st.st_mode) || st.st_uid != ss->ss_uid) {
		cause_set(cause, "%s: not a regular file of the sandbox's uid %u (refused)", src,
		    (unsigned)ss->ss_uid);
		close(in);
		return -1;
	}
	rc = reflink_fd(in, src, dst, cause);
	if (rc == -1 && errno == ENOSPC && cause != NULL) {
		free(*cause);
		*cause = NULL;
		stor_space_cause(cause, "reflink");
	}
	close(in);
	return rc;
}

void
stor_writeback_start(const struct stor_sandbox *ss, const char *path)
{
	struct stat st;
	int fd;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) == -1)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ss->ss_uid)
		(void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	close(fd);
}

/* Fill the paths of sandbox name (memory only). */
static void
stor_sandbox_paths(const char *name, struct stor_sandbox *ss)
{
	ss->ss_name = xstrdup(name);
	ss->ss_dir = paths_data("sandboxes/%s", name);
	xasprintf(&ss->ss_vmdir, "%s/vm", ss->ss_dir);
	xasprintf(&ss->ss_jaildir, "%s/jail", ss->ss_dir);
	xasprintf(&ss->ss_rootfs, "%s/rootfs.ext4", ss->ss_vmdir);
	xasprintf(&ss->ss_mem, "%s/mem", ss->ss_vmdir);
	xasprintf(&ss->ss_console, "%s/console.log", ss->ss_dir);
	xasprintf(&ss->ss_qemulog, "%s/qemu.log", ss->ss_dir);
}

int
stor_sandbox_create(const char *name, const char *rootfs_src, uint64_t mem_bytes,
    struct stor_sandbox *ss, char **cause)
{
	uint64_t need, avail;
	char *parent;
	int fd, have_uid = 0, have_dir = 0;

	memset(ss, 0, sizeof(*ss));
	if (!paths_valid_name(name)) {
		cause_set(cause, "invalid sandbox name \"%s\"", name);
		return -1;
	}
	/*
	 * The rootfs is CoW (almost free now) but the memory file can grow to
	 * the guest RAM size: refuse up front instead of failing mid-run.
	 */
	need = mem_bytes + STOR_SPACE_MARGIN;
	if ((avail = stor_free_bytes()) < need) {
		cause_set(cause, "sandbox %s: needs %llu MiB free in %s, %llu MiB available",
		    name, (unsigned long long)(need >> 20), paths_data_dir(),
		    (unsigned long long)(avail >> 20));
		return -1;
	}
	stor_sandbox_paths(name, ss);

	parent = paths_data("sandboxes");
	if (mkdir_p(parent, 0700, cause) == -1) {
		free(parent);
		goto bad;
	}
	free(parent);
	if (mkdir(ss->ss_dir, 0700) == -1) {
		cause_set(cause, "sandbox %s: mkdir %s: %s", name, ss->ss_dir,
		    errno == EEXIST ? "already exists" : strerror(errno));
		goto bad;
	}
	have_dir = 1;
	if (stor_uid_alloc(name, &ss->ss_uid, cause) == -1)
		goto bad;
	have_uid = 1;
	ss->ss_gid = (gid_t)ss->ss_uid;
	if (mkdir(ss->ss_vmdir, 0700) == -1 || mkdir(ss->ss_jaildir, 0755) == -1) {
		cause_set(cause, "mkdir in %s: %s", ss->ss_dir, strerror(errno));
		goto bad;
	}
	if (stor_give(ss, ss->ss_vmdir, 0700, cause) == -1)
		goto bad;
	if (reflink_copy(rootfs_src, ss->ss_rootfs, cause) == -1) {
		if (errno == ENOSPC || (cause && *cause && strstr(*cause, "No space") != NULL)) {
			free(*cause);
			*cause = NULL;
			stor_space_cause(cause, "reflink rootfs");
		}
		goto bad;
	}
	if (stor_give(ss, ss->ss_rootfs, 0600, cause) == -1)
		goto bad;
	/* Host-written logs exist before QEMU so their owner and mode are ours. */
	if ((fd = open(ss->ss_qemulog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
	    0600)) == -1) {
		cause_set(cause, "create %s: %s", ss->ss_qemulog, strerror(errno));
		goto bad;
	}
	close(fd);
	return 0;
bad:
	cause_wrap(cause, "sandbox %s", name);
	if (have_dir)
		remove_tree(ss->ss_dir, NULL);
	if (have_uid)
		stor_uid_release(ss->ss_uid);
	stor_sandbox_free(ss);
	return -1;
}

int
stor_sandbox_grow(const struct stor_sandbox *ss, uint64_t bytes, char **cause)
{
	struct stat st;
	int fd;

	/* vm/ belongs to the sandbox uid: the image must still be the file we made. */
	if ((fd = open(ss->ss_rootfs, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		cause_set(cause, "open %s: %s", ss->ss_rootfs, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) || st.st_uid != ss->ss_uid) {
		cause_set(cause, "%s: not a regular file of the sandbox's uid %u", ss->ss_rootfs,
		    (unsigned)ss->ss_uid);
		close(fd);
		return -1;
	}
	if (bytes > (uint64_t)st.st_size && ftruncate(fd, (off_t)bytes) == -1) {
		cause_set(cause, "grow %s to %llu MiB: %s", ss->ss_rootfs,
		    (unsigned long long)(bytes >> 20), strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int
stor_sandbox_attach(const char *name, uid_t uid, struct stor_sandbox *ss, char **cause)
{
	struct stat st;
	char *claim, *text = NULL;

	memset(ss, 0, sizeof(*ss));
	if (!paths_valid_name(name)) {
		cause_set(cause, "invalid sandbox name \"%s\"", name);
		return -1;
	}
	claim = paths_data("run/uids/%u", (unsigned)uid);
	if (read_file(claim, AIRLOCK_NAME_MAX + 1, &text, NULL, cause) == -1 ||
	    strcmp(text, name) != 0) {
		if (text != NULL)
			cause_set(cause, "uid %u is claimed by \"%s\"", (unsigned)uid, text);
		cause_wrap(cause, "sandbox %s", name);
		free(text);
		free(claim);
		return -1;
	}
	free(text);
	free(claim);
	stor_sandbox_paths(name, ss);
	ss->ss_uid = uid;
	ss->ss_gid = (gid_t)uid;
	/* The vm/ dir is the jail's: it must be owned by that very uid. */
	if (lstat(ss->ss_vmdir, &st) == -1 || !S_ISDIR(st.st_mode) || st.st_uid != uid) {
		cause_set(cause, "sandbox %s: %s is missing or not a directory of uid %u", name,
		    ss->ss_vmdir, (unsigned)uid);
		stor_sandbox_free(ss);
		return -1;
	}
	return 0;
}

int
stor_sandbox_destroy(struct stor_sandbox *ss, char **cause)
{
	if (ss->ss_dir == NULL)
		return 0;
	if (remove_tree(ss->ss_dir, cause) == -1) {
		cause_wrap(cause, "sandbox %s", ss->ss_name);
		return -1;
	}
	stor_uid_release(ss->ss_uid);
	stor_sandbox_free(ss);
	return 0;
}

void
stor_sandbox_free(struct stor_sandbox *ss)
{
	free(ss->ss_name);
	free(ss->ss_dir);
	free(ss->ss_vmdir);
	free(ss->ss_jaildir);
	free(ss->ss_rootfs);
	free(ss->ss_mem);
	free(ss->ss_console);
	free(ss->ss_qemulog);
	memset(ss, 0, sizeof(*ss));
}
