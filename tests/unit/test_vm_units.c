/*
 * VM engine pieces without a VM: QEMU argv for the driver, cgroup
 * detection (fake hierarchies) and creation (this host's), snapshot
 * headers, the sealed base memfd, jail uid allocation.
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/util.h"
#include "images/stor_sandbox.h"
#include "images/stor_snapshot.h"
#include "vm/qemu_argv.h"
#include "vm/vm_adopt.h"
#include "vm/vm_cgroup.h"
#include "t.h"

static char dir[] = "/tmp/airlock-vmu-XXXXXX";

static int
has(const struct argv *a, const char *s)
{
	size_t i;

	for (i = 0; i < a->ac; i++)
		if (strstr(a->av[i], s) != NULL)
			return 1;
	return 0;
}

static void
test_argv_driver(void)
{
	struct vm_spec s;
	struct argv a;
	char *cause = NULL, devs[128];

	memset(&s, 0, sizeof(s));
	s.accel = VM_ACCEL_TCG;
	s.tsc_khz = 2600000;
	s.vcpus = 2;
	s.memory_mb = 256;
	s.rootfs = "/sandbox/rootfs.ext4";
	s.console_socket = "/sandbox/console.sock";
	s.qmp_socket = "/sandbox/qmp.sock";
	s.agent_socket = "/sandbox/agent.sock";
	s.mem_path = "/proc/self/fd/4";
	s.mem_share = 0;
	s.incoming = 1;
	s.net = 1;
	s.tap_fd = 5;
	s.guest_mac = "52:54:00:0a:00:02";
	s.seccomp = 1;
	s.tcg_tb_mb = 64;
	s.name = "sb1";
	CHECK(qemu_argv_build(&s, &a, &cause) == 0);
	CHECK(has(&a, "tcg,tb-size=64"));
	CHECK(has(&a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"));
	CHECK(has(&a, "memory-backend-file,id=mem,size=256M,mem-path=/proc/self/fd/4,share=off"));
	CHECK(has(&a, "memory-backend=mem"));
	CHECK(has(&a, "defer"));
	CHECK(has(&a, "tap,id=net0,fd=5"));
	CHECK(has(&a, "socket,id=con0,path=/sandbox/console.sock,server=on,wait=off"));
	CHECK(!has(&a, "-kernel"));
	CHECK(!has(&a, "file,id=con0"));
	argv_free(&a);
	qemu_argv_devices(&s, devs, sizeof(devs));
	CHECK_STR(devs, "virtio-blk,virtio-rng,virtio-serial,virtio-net");
	s.net = 0;
	qemu_argv_devices(&s, devs, sizeof(devs));
	CHECK_STR(devs, "virtio-blk,virtio-rng,virtio-serial");
	/* A NIC needs its fd and MAC; option injection through paths is refused. */
	s.net = 1;
	s.guest_mac = NULL;
	CHECK(qemu_argv_build(&s, &a, &cause) == -1);
	CHECK_CAUSE(cause, "net");
	free(cause);
	cause = NULL;
	s.net = 0;
	s.mem_path = "/x,share=on";
	CHECK(qemu_argv_build(&s, &a, &cause) == -1);
	CHECK_CAUSE(cause, "mem_path");
	free(cause);
}

static void
mkfile(const char *path, const char *content)
{
	CHECK(write_file_atomic(path, content, strlen(content), 0644, NULL) == 0);
}

/* argv joined as /proc/PID/cmdline shows it. */
static char *
cmdline(const struct argv *a, size_t *len)
{
	char *buf = NULL;
	size_t i, n = 0, l;

	for (i = 0; i < a->ac; i++) {
		l = strlen(a->av[i]) + 1;
		buf = xreallocarray(buf, n + l, 1);
		memcpy(buf + n, a->av[i], l);
		n += l;
	}
	*len = n;
	return buf;
}

static void
test_adopt_cmdline(void)
{
	struct vm_spec s;
	struct vm_proc vp;
	struct argv a;
	char *cause = NULL, *cmd;
	size_t len;

	memset(&s, 0, sizeof(s));
	s.accel = VM_ACCEL_TCG;
	s.tsc_khz = 2600000;
	s.vcpus = 2;
	s.memory_mb = 384;
	s.rootfs = "/sandbox/rootfs.ext4";
	s.console_socket = "/sandbox/console.sock";
	s.qmp_socket = "/sandbox/qmp.sock";
	s.agent_socket = "/sandbox/agent.sock";
	s.kernel = "/ro/vmlinux";
	s.initrd = "/ro/initrd";
	s.mem_path = "/sandbox/mem";
	s.mem_share = 1;
	s.seccomp = 1;
	s.name = "sb1";
	CHECK(qemu_argv_build(&s, &a, &cause) == 0);
	cmd = cmdline(&a, &len);
	CHECK(vm_proc_check_cmdline(cmd, len, "sb1", &vp, &cause) == 0);
	CHECK(vp.vp_memory_mb == 384 && vp.vp_vcpus == 2 && !vp.vp_net && vp.vp_own_mem &&
	    !vp.vp_slots);
	CHECK(vm_proc_check_cmdline(cmd, len, "sb2", &vp, &cause) == -1);
	CHECK_CAUSE(cause, "not \"sb2\"");
	free(cause);
	cause = NULL;
	/* Truncated: the last argument has no NUL. */
	CHECK(vm_proc_check_cmdline(cmd, len - 1, "sb1", &vp, &cause) == -1);
	free(cause);
	cause = NULL;
	free(cmd);
	argv_free(&a);
	/* A shared-base clone with a NIC: cannot snapshot, has virtio-net. */
	s.kernel = s.initrd = NULL;
	s.mem_path = "/proc/self/fd/4";
	s.mem_share = 0;
	s.incoming = 1;
	s.net = 1;
	s.tap_fd = 5;
	s.guest_mac = "52:54:00:0a:00:02";
	s.slots = 1;	/* with the volume slots (a template VM) */
	CHECK(qemu_argv_build(&s, &a, &cause) == 0);
	cmd = cmdline(&a, &len);
	CHECK(vm_proc_check_cmdline(cmd, len, "sb1", &vp, &cause) == 0);
	CHECK(vp.vp_net && !vp.vp_own_mem && vp.vp_slots);
	free(cmd);
	argv_free(&a);
	/* Some other program that happens to run as the uid. */
	CHECK(vm_proc_check_cmdline("/bin/sleep\0" "100\0", 15, "sb1", &vp, &cause) == -1);
	CHECK_CAUSE(cause, "not QEMU");
	free(cause);
}

static void
test_cgroup_detect(void)
{
	char *r, *p;

	/* Pure v2 with the memory controller. */
	xasprintf(&r, "%s/cg2", dir);
	CHECK(mkdir_p(r, 0755, NULL) == 0);
	xasprintf(&p, "%s/cgroup.controllers", r);
	mkfile(p, "cpuset cpu io memory pids\n");
	CHECK(vm_cgroup_detect(r) == VM_CGROUP_V2);
	free(p);
	free(r);
	/* This host's shape: v1 controllers, v2 beside them without memory. */
	xasprintf(&r, "%s/hybrid", dir);
	xasprintf(&p, "%s/unified", r);
	CHECK(mkdir_p(p, 0755, NULL) == 0);
	free(p);
	xasprintf(&p, "%s/unified/cgroup.controllers", r);
	mkfile(p, "hugetlb\n");
	free(p);
	xasprintf(&p, "%s/memory", r);
	CHECK(mkdir_p(p, 0755, NULL) == 0);
	free(p);
	xasprintf(&p, "%s/memory/cgroup.procs", r);
	mkfile(p, "");
	CHECK(vm_cgroup_detect(r) == VM_CGROUP_V1);
	free(p);
	/* Hybrid with memory on the unified hierarchy: v2 wins. */
	xasprintf(&p, "%s/unified/cgroup.controllers", r);
	mkfile(p, "memory pids\n");
	CHECK(vm_cgroup_detect(r) == VM_CGROUP_V2);
	free(p);
	free(r);
	xasprintf(&r, "%s/none", dir);
	CHECK(mkdir_p(r, 0755, NULL) == 0);
	CHECK(vm_cgroup_detect(r) == VM_CGROUP_NONE);
	free(r);
}

static long long
read_ll(const char *d, const char *f)
{
	char *p, *t = NULL;
	long long v = -1;

	xasprintf(&p, "%s/%s", d, f);
	if (read_file(p, 128, &t, NULL, NULL) == 0)
		v = strtoll(t, NULL, 10);
	free(t);
	free(p);
	return v;
}

/* Our cgroup path in a hierarchy, as /proc/self/cgroup names it (ctrl NULL: v2). */
static char *
self_cgroup(const char *ctrl)
{
	char *text = NULL, *line, *save = NULL, *out = NULL;

	CHECK(read_file("/proc/self/cgroup", 65536, &text, NULL, NULL) == 0);
	for (line = strtok_r(text, "\n", &save); line && out == NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2 == NULL)
			continue;
		*c2 = '\0';
		if (ctrl == NULL ? strncmp(line, "0::", 3) == 0 || (c1[1] == '\0' && line[0] == '0') :
		    strcmp(c1 + 1, ctrl) == 0 || (strncmp(c1 + 1, ctrl, strlen(ctrl)) == 0 &&
		    c1[1 + strlen(ctrl)] == ','))
			out = xstrdup(strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1);
	}
	free(text);
	return out != NULL ? out : xstrdup("");
}

static char *
read_text(const char *d, const char *f)
{
	char *p, *t = NULL;

	xasprintf(&p, "%s/%s", d, f);
	if (read_file(p, 128, &t, NULL, NULL) == -1)
		t = NULL;
	free(p);
	return t;
}

/*
 * What each hierarchy is told, under a plain directory as the root: the
 * CPU cap is the vCPUs' worth of quota, the weight is cpu.weight on v2 and
 * cpu.shares (x1024/100) on v1, memory and pids as given.
 */
static void
test_cgroup_files(void)
{
	static const char *const ctrls[] = { "memory", "cpu", "pids" };
	struct vm_limits lim = { 256ULL << 20, 2000, 512, 100 };
	struct vm_cgroup cg;
	char *r, *p, *self, *t, *cause = NULL;
	size_t i;

	/* v2: one directory with everything. */
	xasprintf(&r, "%s/files-v2", dir);
	self = self_cgroup(NULL);
	xasprintf(&p, "%s%s", r, self);
	CHECK(mkdir_p(p, 0755, NULL) == 0);
	free(p);
	free(self);
	xasprintf(&p, "%s/cgroup.controllers", r);
	mkfile(p, "cpu memory pids\n");
	free(p);
	CHECK(vm_cgroup_create(r, "sbv2", &lim, &cg, &cause) == 0);
	if (cause != NULL)
		fprintf(stderr, "   %s\n", cause);
	CHECK(cg.vc_mode == VM_CGROUP_V2 && cg.vc_ndirs == 1);
	CHECK((t = read_text(cg.vc_dirs[0], "cpu.max")) != NULL && strcmp(t, "200000 100000") == 0);
	free(t);
	CHECK((t = read_text(cg.vc_dirs[0], "cpu.weight")) != NULL && strcmp(t, "100") == 0);
	free(t);
	CHECK(read_ll(cg.vc_dirs[0], "memory.max") == (long long)(256ULL << 20));
	CHECK(read_ll(cg.vc_dirs[0], "pids.max") == 512);
	/* A live cgroup's weight changes (the pool's refill and claim priorities). */
	CHECK(vm_cgroup_set_weight(&cg, 25, &cause) == 0);
	CHECK(read_ll(cg.vc_dirs[0], "cpu.weight") == 25);
	CHECK(vm_cgroup_set_weight(&cg, 0, &cause) == -1 && cause != NULL);
	free(cause);
	cause = NULL;
	CHECK(vm_cgroup_set_weight(&cg, 10001, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(read_ll(cg.vc_dirs[0], "cpu.weight") == 25);
	vm_cgroup_clear(&cg);
	free(r);

	/* v1 (this host's shape): cpu quota, period and shares in the cpu hierarchy. */
	xasprintf(&r, "%s/files-v1", dir);
	for (i = 0; i < 3; i++) {
		self = self_cgroup(ctrls[i]);
		xasprintf(&p, "%s/%s%s", r, ctrls[i], self);
		CHECK(mkdir_p(p, 0755, NULL) == 0);
		free(p);
		free(self);
	}
	xasprintf(&p, "%s/memory/cgroup.procs", r);
	mkfile(p, "");
	free(p);
	lim.cpu_millis = 1000;
	lim.cpu_weight = 250;
	CHECK(vm_cgroup_create(r, "sbv1", &lim, &cg, &cause) == 0);
	if (cause != NULL)
		fprintf(stderr, "   %s\n", cause);
	CHECK(cg.vc_mode == VM_CGROUP_V1 && cg.vc_ndirs == 3);
	CHECK(strstr(cg.vc_dirs[1], "/cpu") != NULL);
	CHECK(read_ll(cg.vc_dirs[1], "cpu.cfs_period_us") == 100000);
	CHECK(read_ll(cg.vc_dirs[1], "cpu.cfs_quota_us") == 100000);
	CHECK(read_ll(cg.vc_dirs[1], "cpu.shares") == 2560);
	CHECK(read_ll(cg.vc_dirs[0], "memory.limit_in_bytes") == (long long)(256ULL << 20));
	CHECK(read_ll(cg.vc_dirs[2], "pids.max") == 512);
	/* v1: the shares file in the cpu hierarchy, never memory or pids. */
	CHECK(vm_cgroup_set_weight(&cg, 25, &cause) == 0);
	CHECK(read_ll(cg.vc_dirs[1], "cpu.shares") == 256);
	CHECK(vm_cgroup_set_weight(&cg, 1, &cause) == 0);
	CHECK(read_ll(cg.vc_dirs[1], "cpu.shares") == 10);
	CHECK(read_ll(cg.vc_dirs[0], "cpu.shares") == -1 && read_ll(cg.vc_dirs[2], "cpu.shares") == -1);
	vm_cgroup_clear(&cg);
	/* No weight asked: the kernel's default stays (no file written). */
	lim.cpu_weight = 0;
	CHECK(vm_cgroup_create(r, "sbv1b", &lim, &cg, &cause) == 0);
	CHECK(read_ll(cg.vc_dirs[1], "cpu.shares") == -1);
	vm_cgroup_clear(&cg);
	free(r);
}

/* The real hierarchy of this host: limits land where the kernel reads them. */
static void
test_cgroup_real(void)
{
	struct vm_limits lim = { 300ULL << 20, 1500, 100, 50 };
	struct vm_cgroup cg;
	char name[32], *cause = NULL, *d0 = NULL;
	int i;

	if (geteuid() != 0 || vm_cgroup_detect(NULL) == VM_CGROUP_NONE) {
		fprintf(stderr, "   skipped: needs root and a cgroup hierarchy\n");
		return;
	}
	snprintf(name, sizeof(name), "tu%ld", (long)getpid());
	if (vm_cgroup_create(NULL, name, &lim, &cg, &cause) == -1) {
		fprintf(stderr, "   %s\n", cause);
		CHECK(0);
		free(cause);
		return;
	}
	CHECK(cg.vc_ndirs >= 1 && cg.vc_procs[cg.vc_ndirs] == NULL);
	CHECK(vm_cgroup_memory_limit(&cg) == (long long)(300ULL << 20));
	if (cg.vc_mode == VM_CGROUP_V1) {
		CHECK(read_ll(cg.vc_dirs[1], "cpu.cfs_quota_us") == 150000);
		CHECK(read_ll(cg.vc_dirs[1], "cpu.shares") == 512);
		CHECK(read_ll(cg.vc_dirs[2], "pids.max") == 100);
	} else
		CHECK(read_ll(cg.vc_dirs[0], "cpu.weight") == 50);
	for (i = 0; i < cg.vc_ndirs; i++)
		CHECK(strstr(cg.vc_dirs[i], "/airlock/") != NULL);
	/*
	 * A leftover (empty) cgroup of the same name, as a daemon killed before
	 * it saw its VMM exit leaves behind, is recreated; one holding a
	 * process is refused and stays intact.
	 */
	struct vm_cgroup dup;
	CHECK(vm_cgroup_create(NULL, name, &lim, &dup, &cause) == 0);
	CHECK(dup.vc_ndirs == cg.vc_ndirs);
	for (i = 0; i < dup.vc_ndirs; i++) {
		free(dup.vc_dirs[i]);
		free(dup.vc_procs[i]);
	}
	{
		int sp[2];
		char ok = 0;
		pid_t child;

		/* The child says when it is in every dir: a sleep raced on a loaded host. */
		CHECK(pipe(sp) == 0);
		if ((child = fork()) == 0) {
			close(sp[0]);
			for (i = 0; i < cg.vc_ndirs; i++) {
				int fd = open(cg.vc_procs[i], O_WRONLY);
				if (fd == -1 || write(fd, "0", 1) != 1)
					_exit(1);
				close(fd);
			}
			if (write(sp[1], "1", 1) != 1)
				_exit(1);
			pause();
			_exit(0);
		}
		close(sp[1]);
		CHECK(read(sp[0], &ok, 1) == 1 && ok == '1');
		close(sp[0]);
		CHECK(vm_cgroup_create(NULL, name, &lim, &dup, &cause) == -1);
		CHECK_CAUSE(cause, "still in use");
		free(cause);
		cause = NULL;
		/* Adoption after a restart finds the dirs by name and the pid in them. */
		CHECK(vm_cgroup_open(NULL, name, child, &dup, &cause) == 0);
		CHECK(dup.vc_ndirs == cg.vc_ndirs);
		vm_cgroup_clear(&dup);
		CHECK(vm_cgroup_open(NULL, name, getpid(), &dup, &cause) == -1);
		CHECK_CAUSE(cause, "is not in its cgroup");
		free(cause);
		cause = NULL;
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	CHECK(access(cg.vc_dirs[0], F_OK) == 0);
	d0 = xstrdup(cg.vc_dirs[0]);
	/* A daemon that crashed forgets cg: the stale dirs are found by name. */
	CHECK(vm_cgroup_remove_stale(NULL, name, &cause) == 0);
	CHECK(access(d0, F_OK) == -1);
	for (i = 0; i < cg.vc_ndirs; i++) {
		free(cg.vc_dirs[i]);
		free(cg.vc_procs[i]);
	}
	CHECK(vm_cgroup_remove_stale(NULL, name, &cause) == 0);
	free(d0);
	CHECK(vm_cgroup_create(NULL, "../escape", &lim, &cg, &cause) == -1);
	CHECK_CAUSE(cause, "invalid name");
	free(cause);
}

static char *
write_header(const char *name, const char *json)
{
	char *d, *p;

	xasprintf(&d, "%s/%s", dir, name);
	CHECK(mkdir_p(d, 0755, NULL) == 0);
	xasprintf(&p, "%s/%s", d, STOR_SNAP_HEADER);
	mkfile(p, json);
	free(p);
	return d;
}

static void
test_snapshot_header(void)
{
	static const char good[] = "{\"format\": 1, \"template\": \"base\", \"kernel\": \"k1\","
	    " \"memory_mb\": 256, \"vcpus\": 2, \"devices\": \"virtio-blk\","
	    " \"devstate_sha256\": \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
	    " \"devstate_size\": 100, \"mem_size\": 268435456, \"created\": \"x\"}";
	struct stor_snap_header h;
	char *d, *cause = NULL;

	d = write_header("good", good);
	CHECK(stor_snapshot_load(d, &h, &cause) == 0);
	CHECK_STR(h.template, "base");
	CHECK(h.memory_mb == 256 && h.vcpus == 2 && h.devstate_size == 100);
	stor_snap_header_free(&h);
	free(d);

	d = write_header("nosha", "{\"format\": 1, \"template\": \"base\", \"kernel\": \"k\","
	    " \"memory_mb\": 256, \"vcpus\": 2, \"devices\": \"d\", \"devstate_sha256\": \"xyz\","
	    " \"devstate_size\": 1, \"mem_size\": 1, \"created\": \"x\"}");
	CHECK(stor_snapshot_load(d, &h, &cause) == -1);
	CHECK_CAUSE(cause, "not a SHA-256");
	free(cause);
	cause = NULL;
	free(d);

	d = write_header("missing", "{\"format\": 1, \"template\": \"base\"}");
	CHECK(stor_snapshot_load(d, &h, &cause) == -1);
	CHECK_CAUSE(cause, "\"kernel\" missing");
	free(cause);
	cause = NULL;
	free(d);

	d = write_header("dup", "{\"format\": 1, \"format\": 1}");
	CHECK(stor_snapshot_load(d, &h, &cause) == -1);
	CHECK_CAUSE(cause, "corrupt header");
	free(cause);
	cause = NULL;
	free(d);

	xasprintf(&d, "%s/absent", dir);
	CHECK(stor_snapshot_load(d, &h, &cause) == -1);
	CHECK(cause != NULL);
	free(cause);
	free(d);
}

static void
test_fd_sha256(void)
{
	char *p, want[65], got[65], *cause = NULL;
	uint64_t size = 0;
	int fd;

	xasprintf(&p, "%s/blob", dir);
	mkfile(p, "airlock device state");
	sha256_hex("airlock device state", 20, want);
	fd = open(p, O_RDONLY);
	CHECK(stor_fd_sha256(fd, 1 << 20, got, &size, &cause) == 0);
	CHECK_STR(got, want);
	CHECK(size == 20 && lseek(fd, 0, SEEK_CUR) == 0);
	CHECK(stor_fd_sha256(fd, 10, got, &size, &cause) == -1);
	CHECK_CAUSE(cause, "larger than");
	free(cause);
	close(fd);
	free(p);
}

/* The shared base: same bytes, holes kept, immutable, private writes stay private. */
static void
test_memfd(void)
{
	const size_t size = 4 << 20;
	char *d, *p, buf[16], *cause = NULL;
	unsigned char *m;
	int fd, memfd = -1;

	xasprintf(&d, "%s/snapmem", dir);
	CHECK(mkdir_p(d, 0755, NULL) == 0);
	xasprintf(&p, "%s/%s", d, STOR_SNAP_MEM);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd != -1 && ftruncate(fd, (off_t)size) == 0);
	CHECK(pwrite(fd, "hello", 5, 4096) == 5 && pwrite(fd, "world", 5, (off_t)size - 5) == 5);
	close(fd);
	CHECK(stor_snapshot_memfd(d, size - 1, &memfd, &cause) == -1);
	CHECK_CAUSE(cause, "header says");
	free(cause);
	cause = NULL;
	CHECK(stor_snapshot_memfd(d, size, &memfd, &cause) == 0);
	CHECK(pread(memfd, buf, 5, 4096) == 5 && memcmp(buf, "hello", 5) == 0);
	CHECK(pread(memfd, buf, 5, (off_t)size - 5) == 5 && memcmp(buf, "world", 5) == 0);
	CHECK((fcntl(memfd, F_GET_SEALS) & (F_SEAL_WRITE | F_SEAL_SEAL)) ==
	    (F_SEAL_WRITE | F_SEAL_SEAL));
	CHECK(pwrite(memfd, "x", 1, 0) == -1 && errno == EPERM);
	CHECK(mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0) == MAP_FAILED);
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, memfd, 0);
	CHECK(m != MAP_FAILED);
	if (m != MAP_FAILED) {
		CHECK(memcmp(m + 4096, "hello", 5) == 0);
		memcpy(m + 4096, "HELLO", 5);
		munmap(m, size);
	}
	CHECK(pread(memfd, buf, 5, 4096) == 5 && memcmp(buf, "hello", 5) == 0);
	close(memfd);
	free(p);
	free(d);
}

static void
test_uids(void)
{
	uid_t a, b;
	char *cause = NULL;

	setenv("AIRLOCK_DATA_DIR", dir, 1);
	CHECK(stor_uid_alloc("same-name", &a, &cause) == 0);
	CHECK(stor_uid_alloc("same-name", &b, &cause) == 0);
	CHECK(a != b && a >= STOR_UID_BASE && b < STOR_UID_BASE + STOR_UID_COUNT);
	stor_uid_release(a);
	CHECK(stor_uid_alloc("same-name", &a, &cause) == 0);
	stor_uid_release(a);
	/* b's sandbox dir does not exist: reconcile drops the claim. */
	CHECK(stor_uid_alloc("live", &a, &cause) == 0);
	{
		char *sb;
		xasprintf(&sb, "%s/sandboxes/live", dir);
		CHECK(mkdir_p(sb, 0700, NULL) == 0);
		free(sb);
	}
	CHECK(stor_uid_reconcile() == 1);
	CHECK(stor_uid_alloc("x", &b, &cause) == 0);	/* b's old slot may be reused */
	stor_uid_release(a);
	stor_uid_release(b);
	unsetenv("AIRLOCK_DATA_DIR");
}

int
main(void)
{
	int rc;

	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	T_RUN(test_argv_driver);
	T_RUN(test_adopt_cmdline);
	T_RUN(test_cgroup_detect);
	T_RUN(test_cgroup_files);
	T_RUN(test_cgroup_real);
	T_RUN(test_snapshot_header);
	T_RUN(test_fd_sha256);
	T_RUN(test_memfd);
	T_RUN(test_uids);
	rc = t_done();
	remove_tree(dir, NULL);
	return rc;
}
