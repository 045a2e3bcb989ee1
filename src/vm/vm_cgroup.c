/* cgroup v1/v2 detection, per-sandbox creation with limits, removal. */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/util.h"
#include "vm/vm_cgroup.h"

#define VM_CGROUP_RMDIR_TRIES	50	/* x 10 ms: v1 memcg may lag the last exit */

static const char *const vm_cgroup_v1_ctrls[VM_CGROUP_V1_MAX] = { "memory", "cpu", "pids" };

static const char *
vm_cgroup_root(const char *root)
{
	const char *env = getenv("AIRLOCK_CGROUP_ROOT");

	if (root != NULL)
		return root;
	return env != NULL && *env != '\0' ? env : "/sys/fs/cgroup";
}

static int
file_has_word(const char *path, const char *word)
{
	char *text = NULL, *tok, *save = NULL;
	int found = 0;

	if (read_file(path, 4096, &text, NULL, NULL) == -1)
		return 0;
	for (tok = strtok_r(text, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save))
		if (strcmp(tok, word) == 0)
			found = 1;
	free(text);
	return found;
}

/* True when the comma-separated list holds word ("cpu,cpuacct" has "cpu"). */
static int
file_has_word_list(const char *list, const char *word)
{
	size_t wlen = strlen(word);
	const char *p = list;

	while (*p != '\0') {
		size_t n = strcspn(p, ",");
		if (n == wlen && strncmp(p, word, n) == 0)
			return 1;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

/* The v2 directory to use under root, or NULL. */
static char *
vm_cgroup_v2_dir(const char *root)
{
	char *p;

	xasprintf(&p, "%s/cgroup.controllers", root);
	if (file_has_word(p, "memory")) {
		free(p);
		return xstrdup(root);
	}
	free(p);
	xasprintf(&p, "%s/unified/cgroup.controllers", root);
	if (file_has_word(p, "memory")) {
		free(p);
		xasprintf(&p, "%s/unified", root);
		return p;
	}
	free(p);
	return NULL;
}

enum vm_cgroup_mode
vm_cgroup_detect(const char *root)
{
	char *p;
	int v1;

	root = vm_cgroup_root(root);
	if ((p = vm_cgroup_v2_dir(root)) != NULL) {
		free(p);
		return VM_CGROUP_V2;
	}
	xasprintf(&p, "%s/memory/cgroup.procs", root);
	v1 = access(p, F_OK) == 0;
	free(p);
	return v1 ? VM_CGROUP_V1 : VM_CGROUP_NONE;
}

const char *
vm_cgroup_mode_name(enum vm_cgroup_mode m)
{
	return m == VM_CGROUP_V1 ? "v1" : m == VM_CGROUP_V2 ? "v2" : "none";
}

/*
 * Our own cgroup in a hierarchy from /proc/self/cgroup: the line whose
 * controller list holds ctrl (v1), or the "0::" line (ctrl NULL, v2).
 */
static char *
vm_cgroup_self(const char *ctrl)
{
	char *text = NULL, *line, *save = NULL, *out = NULL;

	if (read_file("/proc/self/cgroup", 65536, &text, NULL, NULL) == -1)
		return xstrdup("/");
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2;

		if (c1 == NULL || (c2 = strchr(c1 + 1, ':')) == NULL)
			continue;
		*c2 = '\0';
		if (ctrl == NULL ? strcmp(c1 + 1, "") == 0 && strncmp(line, "0:", 2) == 0 :
		    file_has_word_list(c1 + 1, ctrl)) {
			out = xstrdup(c2 + 1);
			break;
		}
	}
	free(text);
	return out != NULL ? out : xstrdup("/");
}

static int
write_str(const char *dir, const char *file, const char *value, char **cause)
{
	char *p;
	int fd;
	ssize_t n;

	xasprintf(&p, "%s/%s", dir, file);
	/*
	 * O_CREAT and O_TRUNC are no-ops on cgroupfs (its files exist or
	 * cannot be made, and a write replaces the value) and let the unit
	 * tests read what was written last under a plain directory given as
	 * the root.
	 */
	if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644)) == -1) {
		cause_set(cause, "open %s: %s", p, strerror(errno));
		free(p);
		return -1;
	}
	n = write(fd, value, strlen(value));
	close(fd);
	if (n != (ssize_t)strlen(value)) {
		cause_set(cause, "write \"%s\" to %s: %s", value, p, strerror(errno));
		free(p);
		return -1;
	}
	free(p);
	return 0;
}

static int
vm_cgroup_mkdir(const char *path, char **cause)
{
	if (mkdir(path, 0755) == -1 && errno != EEXIST) {
		cause_set(cause, "mkdir %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Make the sandbox's own cgroup. One left by a daemon that died before
 * its VMM's exit was processed is empty: rmdir succeeds and it is
 * recreated. One that still holds a process is refused.
 */
static int
vm_cgroup_mkleaf(const char *dir, char **cause)
{
	if (mkdir(dir, 0755) == 0)
		return 0;
	if (errno == EEXIST && rmdir(dir) == 0 && mkdir(dir, 0755) == 0)
		return 0;
	if (errno == EBUSY)
		cause_set(cause, "cgroup %s is still in use (is a VMM of this sandbox running?)",
		    dir);
	else
		cause_set(cause, "mkdir %s: %s", dir, strerror(errno));
	return -1;
}

static void
vm_cgroup_add(struct vm_cgroup *cg, char *dir)
{
	cg->vc_dirs[cg->vc_ndirs] = dir;
	xasprintf(&cg->vc_procs[cg->vc_ndirs], "%s/cgroup.procs", dir);
	cg->vc_ndirs++;
	cg->vc_procs[cg->vc_ndirs] = NULL;
}

int
vm_cgroup_set_weight(const struct vm_cgroup *cg, unsigned weight, char **cause)
{
	unsigned long long shares = (unsigned long long)weight * 1024 / 100;
	char buf[32];

	if (weight < 1 || weight > VM_CGROUP_WEIGHT_MAX) {
		cause_set(cause, "cpu weight %u: not in 1..%d", weight, VM_CGROUP_WEIGHT_MAX);
		return -1;
	}
	switch (cg->vc_mode) {
	case VM_CGROUP_V2:
		snprintf(buf, sizeof(buf), "%u", weight);
		return write_str(cg->vc_dirs[0], "cpu.weight", buf, cause);
	case VM_CGROUP_V1:
		/* 1024 is v1's default as 100 is v2's; at least 2 (the kernel's floor). */
		snprintf(buf, sizeof(buf), "%llu", shares < 2 ? 2 : shares);
		return cg->vc_ndirs > 1 ? write_str(cg->vc_dirs[1], "cpu.shares", buf, cause) : 0;
	default:
		return 0;
	}
}

static int
vm_cgroup_create_v1(const char *root, const char *name, const struct vm_limits *lim,
    struct vm_cgroup *cg, char **cause)
{
	char *self, *parent, *dir, buf[64];
	int i;

	for (i = 0; i < VM_CGROUP_V1_MAX; i++) {
		self = vm_cgroup_self(vm_cgroup_v1_ctrls[i]);
		xasprintf(&parent, "%s/%s%s%s" VM_CGROUP_PARENT, root, vm_cgroup_v1_ctrls[i],
		    self, strcmp(self, "/") == 0 ? "" : "/");
		free(self);
		if (vm_cgroup_mkdir(parent, cause) == -1) {
			free(parent);
			return -1;
		}
		xasprintf(&dir, "%s/%s", parent, name);
		free(parent);
		if (vm_cgroup_mkleaf(dir, cause) == -1) {
			free(dir);
			return -1;
		}
		vm_cgroup_add(cg, dir);
	}
	if (lim->memory_bytes != 0) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)lim->memory_bytes);
		if (write_str(cg->vc_dirs[0], "memory.limit_in_bytes", buf, cause) == -1)
			return -1;
	}
	if (lim->cpu_millis != 0) {
		snprintf(buf, sizeof(buf), "%d", VM_CGROUP_CPU_PERIOD);
		if (write_str(cg->vc_dirs[1], "cpu.cfs_period_us", buf, cause) == -1)
			return -1;
		snprintf(buf, sizeof(buf), "%llu",
		    (unsigned long long)lim->cpu_millis * VM_CGROUP_CPU_PERIOD / 1000);
		if (write_str(cg->vc_dirs[1], "cpu.cfs_quota_us", buf, cause) == -1)
			return -1;
	}
	if (lim->cpu_weight != 0 && vm_cgroup_set_weight(cg, lim->cpu_weight, cause) == -1)
		return -1;
	if (lim->pids_max != 0) {
		snprintf(buf, sizeof(buf), "%u", lim->pids_max);
		if (write_str(cg->vc_dirs[2], "pids.max", buf, cause) == -1)
			return -1;
	}
	return 0;
}

static int
vm_cgroup_create_v2(const char *v2root, const char *name, const struct vm_limits *lim,
    struct vm_cgroup *cg, char **cause)
{
	char *self, *own, *parent, *dir, buf[64];

	self = vm_cgroup_self(NULL);
	xasprintf(&own, "%s%s", v2root, strcmp(self, "/") == 0 ? "" : self);
	free(self);
	xasprintf(&parent, "%s/" VM_CGROUP_PARENT, own);
	/*
	 * v2 lets a cgroup hand controllers to children only while it has no
	 * processes of its own (except the root): run airlockd with systemd's
	 * Delegate=yes in a leaf below its unit, or at the root.
	 */
	if (write_str(own, "cgroup.subtree_control", "+memory +cpu +pids", cause) == -1) {
		cause_wrap(cause, "cgroup v2: cannot delegate controllers below %s "
		    "(the daemon's cgroup must have no other processes, e.g. Delegate=yes)", own);
		free(own);
		free(parent);
		return -1;
	}
	free(own);
	if (vm_cgroup_mkdir(parent, cause) == -1 ||
	    write_str(parent, "cgroup.subtree_control", "+memory +cpu +pids", cause) == -1) {
		free(parent);
		return -1;
	}
	xasprintf(&dir, "%s/%s", parent, name);
	free(parent);
	if (vm_cgroup_mkleaf(dir, cause) == -1) {
		free(dir);
		return -1;
	}
	vm_cgroup_add(cg, dir);
	if (lim->memory_bytes != 0) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)lim->memory_bytes);
		if (write_str(dir, "memory.max", buf, cause) == -1)
			return -1;
		/* Best effort: hosts without swap accounting have no such file. */
		(void)write_str(dir, "memory.swap.max", "0", NULL);
	}
	if (lim->cpu_millis != 0) {
		snprintf(buf, sizeof(buf), "%llu %d",
		    (unsigned long long)lim->cpu_millis * VM_CGROUP_CPU_PERIOD / 1000,
		    VM_CGROUP_CPU_PERIOD);
		if (write_str(dir, "cpu.max", buf, cause) == -1)
			return -1;
	}
	if (lim->cpu_weight != 0 && vm_cgroup_set_weight(cg, lim->cpu_weight, cause) == -1)
		return -1;
	if (lim->pids_max != 0) {
		snprintf(buf, sizeof(buf), "%u", lim->pids_max);
		if (write_str(dir, "pids.max", buf, cause) == -1)
			return -1;
	}
	return 0;
}

int
vm_cgroup_create(const char *root, const char *name, const struct vm_limits *lim,
    struct vm_cgroup *cg, char **cause)
{
	enum vm_cgroup_mode mode;
	char *v2;
	int rc;

	memset(cg, 0, sizeof(*cg));
	if (!paths_valid_name(name)) {
		cause_set(cause, "cgroup: invalid name \"%s\"", name);
		return -1;
	}
	root = vm_cgroup_root(root);
	mode = vm_cgroup_detect(root);
	cg->vc_mode = mode;
	switch (mode) {
	case VM_CGROUP_V1:
		rc = vm_cgroup_create_v1(root, name, lim, cg, cause);
		break;
	case VM_CGROUP_V2:
		v2 = vm_cgroup_v2_dir(root);
		rc = vm_cgroup_create_v2(v2, name, lim, cg, cause);
		free(v2);
		break;
	default:
		cause_set(cause, "no usable cgroup hierarchy under %s (need the memory "
		    "controller on v1 or v2)", root);
		return -1;
	}
	if (rc == -1) {
		cause_wrap(cause, "cgroup %s (%s)", name, vm_cgroup_mode_name(mode));
		vm_cgroup_destroy(cg, NULL);
	}
	return rc;
}

int
vm_cgroup_destroy(struct vm_cgroup *cg, char **cause)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	int i, tries, rc = 0;

	for (i = cg->vc_ndirs - 1; i >= 0; i--) {
		for (tries = 0; tries < VM_CGROUP_RMDIR_TRIES; tries++) {
			if (rmdir(cg->vc_dirs[i]) == 0 || errno == ENOENT)
				break;
			if (errno != EBUSY)
				break;
			nanosleep(&ts, NULL);
		}
		if (access(cg->vc_dirs[i], F_OK) == 0) {
			if (rc == 0)
				cause_set(cause, "rmdir %s: %s", cg->vc_dirs[i], strerror(errno));
			rc = -1;
			continue;
		}
		free(cg->vc_dirs[i]);
		free(cg->vc_procs[i]);
		cg->vc_dirs[i] = cg->vc_procs[i] = NULL;
	}
	if (rc == 0) {
		cg->vc_ndirs = 0;
		cg->vc_mode = VM_CGROUP_NONE;
	}
	return rc;
}

/* The existing cgroup dirs of sandbox name (memory only: nothing is created). */
static int
vm_cgroup_find(const char *root, const char *name, struct vm_cgroup *cg, char **cause)
{
	char *self, *dir, *v2;
	int i;

	memset(cg, 0, sizeof(*cg));
	if (!paths_valid_name(name)) {
		cause_set(cause, "cgroup: invalid name \"%s\"", name);
		return -1;
	}
	root = vm_cgroup_root(root);
	cg->vc_mode = vm_cgroup_detect(root);
	if (cg->vc_mode == VM_CGROUP_V1) {
		for (i = 0; i < VM_CGROUP_V1_MAX; i++) {
			self = vm_cgroup_self(vm_cgroup_v1_ctrls[i]);
			xasprintf(&dir, "%s/%s%s%s" VM_CGROUP_PARENT "/%s", root,
			    vm_cgroup_v1_ctrls[i], self, strcmp(self, "/") == 0 ? "" : "/", name);
			free(self);
			if (access(dir, F_OK) == 0)
				vm_cgroup_add(cg, dir);
			else
				free(dir);
		}
	} else if (cg->vc_mode == VM_CGROUP_V2) {
		v2 = vm_cgroup_v2_dir(root);
		self = vm_cgroup_self(NULL);
		xasprintf(&dir, "%s%s/" VM_CGROUP_PARENT "/%s", v2,
		    strcmp(self, "/") == 0 ? "" : self, name);
		free(self);
		free(v2);
		if (access(dir, F_OK) == 0)
			vm_cgroup_add(cg, dir);
		else
			free(dir);
	}
	return 0;
}

int
vm_cgroup_remove_stale(const char *root, const char *name, char **cause)
{
	struct vm_cgroup cg;

	if (vm_cgroup_find(root, name, &cg, cause) == -1)
		return -1;
	return vm_cgroup_destroy(&cg, cause);
}

void
vm_cgroup_clear(struct vm_cgroup *cg)
{
	int i;

	for (i = 0; i < cg->vc_ndirs; i++) {
		free(cg->vc_dirs[i]);
		free(cg->vc_procs[i]);
	}
	memset(cg, 0, sizeof(*cg));
}

/* 1 when pid is listed in the cgroup.procs file procs. */
static int
vm_cgroup_has_pid(const char *procs, pid_t pid)
{
	char *text = NULL, *line, *save = NULL;
	int found = 0;

	if (read_file(procs, 1 << 20, &text, NULL, NULL) == -1)
		return 0;
	for (line = strtok_r(text, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save))
		found = atoi(line) == (int)pid;
	free(text);
	return found;
}

int
vm_cgroup_open(const char *root, const char *name, pid_t pid, struct vm_cgroup *cg,
    char **cause)
{
	int i, want;

	if (vm_cgroup_find(root, name, cg, cause) == -1)
		return -1;
	want = cg->vc_mode == VM_CGROUP_V1 ? VM_CGROUP_V1_MAX : 1;
	if (cg->vc_ndirs != want) {
		cause_set(cause, "cgroup %s: %d of %d %s directories exist", name, cg->vc_ndirs,
		    want, vm_cgroup_mode_name(cg->vc_mode));
		vm_cgroup_clear(cg);
		return -1;
	}
	/* A VMM outside its cgroup would run without its limits. */
	for (i = 0; i < cg->vc_ndirs; i++) {
		if (!vm_cgroup_has_pid(cg->vc_procs[i], pid)) {
			cause_set(cause, "pid %d is not in its cgroup %s", (int)pid, cg->vc_dirs[i]);
			vm_cgroup_clear(cg);
			return -1;
		}
	}
	return 0;
}

/* "key N" from a flat keyed file. */
static long long
keyed_value(const char *path, const char *key)
{
	char *text = NULL, *p;
	long long v = -1;
	size_t klen = strlen(key);

	if (read_file(path, 65536, &text, NULL, NULL) == -1)
		return -1;
	for (p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, klen) == 0 && p[klen] == ' ') {
			v = strtoll(p + klen + 1, NULL, 10);
			break;
		}
	}
	free(text);
	return v;
}

static long long
single_value(const char *dir, const char *file)
{
	char *p, *text = NULL;
	long long v = -1;

	xasprintf(&p, "%s/%s", dir, file);
	if (read_file(p, 64, &text, NULL, NULL) == 0) {
		v = strncmp(text, "max", 3) == 0 ? -1 : strtoll(text, NULL, 10);
		free(text);
	}
	free(p);
	return v;
}

long
vm_cgroup_oom_kills(const struct vm_cgroup *cg)
{
	char *p;
	long long v;

	if (cg->vc_ndirs == 0)
		return 0;
	xasprintf(&p, "%s/%s", cg->vc_dirs[0],
	    cg->vc_mode == VM_CGROUP_V1 ? "memory.oom_control" : "memory.events");
	v = keyed_value(p, "oom_kill");
	free(p);
	return v < 0 ? 0 : (long)v;
}

long long
vm_cgroup_memory(const struct vm_cgroup *cg)
{
	if (cg->vc_ndirs == 0)
		return -1;
	return single_value(cg->vc_dirs[0], cg->vc_mode == VM_CGROUP_V1 ?
	    "memory.usage_in_bytes" : "memory.current");
}

long long
vm_cgroup_memory_limit(const struct vm_cgroup *cg)
{
	if (cg->vc_ndirs == 0)
		return -1;
	return single_value(cg->vc_dirs[0], cg->vc_mode == VM_CGROUP_V1 ?
	    "memory.limit_in_bytes" : "memory.max");
}
