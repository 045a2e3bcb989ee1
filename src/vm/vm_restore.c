/*
 * Restore from a snapshot directory, in two halves (vm.h):
 *
 *   spawn     vm_spawn_incoming: jailed QEMU with -incoming defer on its
 *             RAM and disk, QMP up, capabilities x-ignore-shared + events.
 *             A spare waits here.
 *   incoming  vm_incoming: header and device state checked against the
 *             VMM's config, device state sealed in a memfd handed over with
 *             getfd, migrate-incoming fd:, the MIGRATION event "completed",
 *             cont.
 *
 * vm_restore() is the two in sequence, with every check done before the
 * spawn so a bad snapshot starts nothing. No query-status polling: the
 * events capability makes QEMU say when the stream is loaded (or failed);
 * a timer bounds the wait. The device state never goes through a shell:
 * the jail runs QEMU with -sandbox ...,spawn=deny, so exec: could not run
 * anyway, and the memfd holds exactly the bytes whose checksum was checked.
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "images/reflink.h"
#include "images/stor_snapshot.h"
#include "vm/vm_priv.h"

#define VM_DEVSTATE_CHUNK	(64 * 1024)

/* What a restore checked before touching the VMM. */
struct vm_plan {
	struct stor_snap_header	 h;
	int			 devfd;		/* sealed memfd: the checked device state */
	double			 checked;	/* ms since t0 */
};

static void
vm_plan_clear(struct vm_plan *p)
{
	if (p->devfd != -1)
		close(p->devfd);
	p->devfd = -1;
	stor_snap_header_free(&p->h);
}

/* Compare the snapshot header with what is (about to be) running. */
static int
vm_restore_check(const char *template_name, const char *kernel_id, unsigned memory_mb,
    unsigned vcpus, const char *devices, const struct stor_snap_header *h,
    const char *snapdir, char **cause)
{
	if (strcmp(h->template, template_name) != 0) {
		cause_set(cause, "snapshot %s is of template \"%s\", not \"%s\"", snapdir,
		    h->template, template_name);
		return -1;
	}
	if (strcmp(h->kernel, kernel_id) != 0) {
		cause_set(cause, "snapshot %s was taken with kernel %s, this host boots %s",
		    snapdir, h->kernel, kernel_id);
		return -1;
	}
	if (h->memory_mb != memory_mb || h->vcpus != vcpus) {
		cause_set(cause, "snapshot %s has %u MiB / %u vCPUs, asked for %u MiB / %u vCPUs",
		    snapdir, h->memory_mb, h->vcpus, memory_mb, vcpus);
		return -1;
	}
	if (strcmp(h->devices, devices) != 0) {
		cause_set(cause, "snapshot %s has devices %s, this sandbox needs %s", snapdir,
		    h->devices, devices);
		return -1;
	}
	if (h->mem_size != (uint64_t)memory_mb << 20) {
		cause_set(cause, "snapshot %s: memory file size %llu does not match %u MiB",
		    snapdir, (unsigned long long)h->mem_size, memory_mb);
		return -1;
	}
	return 0;
}

/*
 * Copy the device state into a memfd, seal it, then checksum the sealed
 * bytes: what QEMU reads is what was checked, whatever happens to the file.
 */
static int
vm_devstate_memfd(const char *snapdir, const struct stor_snap_header *h, int *out,
    char **cause)
{
	char *path, *buf = NULL, sha[65];
	uint64_t size;
	ssize_t n, w;
	int in = -1, fd = -1;

	xasprintf(&path, "%s/%s", snapdir, STOR_SNAP_DEVSTATE);
	if ((in = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		cause_set(cause, "open %s: %s", path, strerror(errno));
		goto bad;
	}
	if ((fd = memfd_create("airlock-devstate", MFD_CLOEXEC | MFD_ALLOW_SEALING)) == -1) {
		cause_set(cause, "memfd_create: %s", strerror(errno));
		goto bad;
	}
	buf = xmalloc(VM_DEVSTATE_CHUNK);
	size = 0;
	while ((n = read(in, buf, VM_DEVSTATE_CHUNK)) > 0) {
		if ((size += (uint64_t)n) > STOR_SNAP_DEVSTATE_MAX) {
			cause_set(cause, "%s: larger than %llu bytes", path,
			    (unsigned long long)STOR_SNAP_DEVSTATE_MAX);
			goto bad;
		}
		for (w = 0; w < n; ) {
			ssize_t k = write(fd, buf + w, (size_t)(n - w));
			if (k == -1 && errno == EINTR)
				continue;
			if (k <= 0) {
				cause_set(cause, "memfd write: %s", strerror(errno));
				goto bad;
			}
			w += k;
		}
	}
	if (n == -1) {
		cause_set(cause, "read %s: %s", path, strerror(errno));
		goto bad;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW |
	    F_SEAL_SEAL) == -1) {
		cause_set(cause, "seal device state memfd: %s", strerror(errno));
		goto bad;
	}
	/* Leaves the offset at 0, where QEMU starts reading. */
	if (stor_fd_sha256(fd, STOR_SNAP_DEVSTATE_MAX, sha, &size, cause) == -1) {
		cause_wrap(cause, "%s", path);
		goto bad;
	}
	if (size != h->devstate_size || strcmp(sha, h->devstate_sha256) != 0) {
		cause_set(cause, "snapshot %s is corrupt: device state checksum mismatch "
		    "(%llu bytes, sha256 %.12s..., header says %llu bytes, %.12s...)", snapdir,
		    (unsigned long long)size, sha, (unsigned long long)h->devstate_size,
		    h->devstate_sha256);
		goto bad;
	}
	close(in);
	free(buf);
	free(path);
	*out = fd;
	return 0;
bad:
	if (in != -1)
		close(in);
	if (fd != -1)
		close(fd);
	free(buf);
	free(path);
	return -1;
}

int
vm_snapshot_slotless(const char *snapdir)
{
	struct stor_snap_header h;
	int r;

	memset(&h, 0, sizeof(h));
	if (stor_snapshot_load(snapdir, &h, NULL) == -1)
		return 0;	/* vm_plan_load says why */
	r = h.devices != NULL && strstr(h.devices, "airlock-slot") == NULL;
	stor_snap_header_free(&h);
	return r;
}

/* Header and device state of snapdir, checked against a VMM's config. */
static int
vm_plan_load(const char *snapdir, const char *template_name, const char *kernel_id,
    unsigned memory_mb, unsigned vcpus, const char *devices, struct vm_plan *p,
    char **cause)
{
	memset(p, 0, sizeof(*p));
	p->devfd = -1;
	if (stor_snapshot_load(snapdir, &p->h, cause) == -1 ||
	    vm_restore_check(template_name, kernel_id, memory_mb, vcpus, devices, &p->h,
	    snapdir, cause) == -1 ||
	    vm_devstate_memfd(snapdir, &p->h, &p->devfd, cause) == -1) {
		vm_plan_clear(p);
		return -1;
	}
	return 0;
}

static int
vm_base_memfd_check(int base_memfd, uint64_t size, struct stat *st, char **cause)
{
	if (base_memfd == -1 || fstat(base_memfd, st) == -1 || (uint64_t)st->st_size != size) {
		cause_set(cause, "base memory fd missing or not %llu bytes",
		    (unsigned long long)size);
		return -1;
	}
	return 0;
}

/* --- incoming half ---------------------------------------------------- */

static void
vm_restore_running(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_RESTORE)
		return;
	if (error != NULL) {
		vm_op_fail(vm, "cont: %s", error);
		return;
	}
	vm->vm_state = VM_RUNNING;
	vm->vm_times.running = monotonic_ms_since(vm->vm_t0);
	vm_op_done(vm, NULL);
}

/*
 * Both the migrate-incoming answer and the MIGRATION "completed" event are
 * needed; they may come in either order. QEMU sets the run state (paused:
 * the source was stopped) before it sends "completed".
 */
static void
vm_incoming_maybe_cont(struct vm *vm)
{
	if (vm->vm_mig_replied && vm->vm_mig_done)
		vm_cmd(vm, "cont", NULL, vm_restore_running);
}

static void
vm_incoming_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct vm *vm = arg;

	if (vm->vm_op == VM_OP_RESTORE)
		vm_op_fail(vm, "restore did not finish within %d ms", VM_MIGRATE_TIMEOUT_MS);
}

void
vm_incoming_migration(struct vm *vm, const char *status)
{
	if (vm->vm_op != VM_OP_RESTORE || status == NULL)
		return;
	if (strcmp(status, "completed") == 0) {
		vm->vm_mig_done = 1;
		vm_incoming_maybe_cont(vm);
	} else if (strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0)
		/* QEMU's reason is in qemu.log, which vm_op_fail quotes. */
		vm_op_fail(vm, "device state load %s", status);
}

static void
vm_restore_incoming(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_RESTORE)
		return;
	if (error != NULL) {
		vm_op_fail(vm, "migrate-incoming: %s", error);
		return;
	}
	vm->vm_mig_replied = 1;
	vm_incoming_maybe_cont(vm);
}

static void
vm_restore_gotfd(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;

	if (vm->vm_op != VM_OP_RESTORE)
		return;
	if (error != NULL) {
		vm_op_fail(vm, "getfd: %s", error);
		return;
	}
	vm_timer_in(vm, VM_MIGRATE_TIMEOUT_MS, vm_incoming_timeout);
	vm_cmd(vm, "migrate-incoming", json_pack("{s:s}", "uri", "fd:" VM_DEVSTATE_FDNAME),
	    vm_restore_incoming);
}

/* Hand QEMU the sealed device state over the QMP socket, then load it. */
static void
vm_incoming_send(struct vm *vm)
{
	char *cause = NULL;
	int rc;

	vm->vm_mig_replied = vm->vm_mig_done = 0;
	vm_trace(vm, "getfd");
	rc = qmp_command_fd(vm->vm_qmp, "getfd", json_pack("{s:s}", "fdname",
	    VM_DEVSTATE_FDNAME), vm->vm_devfd, VM_CMD_TIMEOUT_MS, vm_restore_gotfd, vm, &cause);
	/* Sent (SCM_RIGHTS) or not: QEMU has its own copy now, ours goes. */
	close(vm->vm_devfd);
	vm->vm_devfd = -1;
	if (rc == -1) {
		vm_op_fail(vm, "getfd: %s", cause);
		free(cause);
	}
}

static void
vm_restore_caps(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_RESTORE && vm->vm_op != VM_OP_SPAWN)
		return;
	if (error != NULL) {
		vm_op_fail(vm, "migrate-set-capabilities: %s", error);
		return;
	}
	if (vm->vm_op == VM_OP_RESTORE) {
		vm_incoming_send(vm);
		return;
	}
	/* A spare: ready for vm_incoming. */
	vm->vm_spare = 1;
	vm_op_done(vm, NULL);
}

void
vm_incoming_qmp_ready(struct vm *vm)
{
	json_t *caps;

	caps = json_pack("{s:[{s:s, s:b}, {s:s, s:b}]}", "capabilities",
	    "capability", "x-ignore-shared", "state", 1, "capability", "events", "state", 1);
	vm_cmd(vm, "migrate-set-capabilities", caps, vm_restore_caps);
}

/* --- spawn half ------------------------------------------------------- */

/*
 * Spawn an -incoming defer VMM for cfg on its RAM: the base memfd (shared)
 * or the sandbox's RAM file, which mem_ready says already holds the
 * snapshot's RAM (vm_restore) or is made empty here (a spare: filled by
 * vm_incoming). The op is VM_OP_RESTORE (devfd set) or VM_OP_SPAWN.
 */
static struct vm *
vm_spawn_for(struct event_base *base, const struct vm_config *cfg, enum vm_restore_mem mode,
    int base_memfd, int mem_ready, struct vm_plan *plan, double t0,
    vm_event_cb ev, vm_done_cb done, void *arg, char **cause)
{
	struct vm_spec spec;
	struct stat st;
	struct vm *vm = NULL;
	char *mempath = NULL;
	uint64_t mem_size = (uint64_t)cfg->memory_mb << 20;
	int fds[2 + 2 * VM_VOLUMES_MAX], nfds = 0, memfd = -1, fd;

	vm_spec_common(cfg, &spec);
	if (mode == VM_RESTORE_SHARED) {
		if (vm_base_memfd_check(base_memfd, mem_size, &st, cause) == -1)
			return NULL;
		if ((memfd = fcntl(base_memfd, F_DUPFD_CLOEXEC, 3)) == -1) {
			cause_set(cause, "dup base memfd: %s", strerror(errno));
			return NULL;
		}
		fds[nfds++] = memfd;
		/* QEMU 7.2 opens mem-path O_RDWR: a sealed memfd allows that and
		 * MAP_PRIVATE, but no write reaches the pages other clones share. */
		xasprintf(&mempath, "/proc/self/fd/%d", 3 + nfds - 1);
		spec.mem_share = 0;
	} else {
		if (!mem_ready) {
			/* A spare's RAM file: sparse, filled in place by vm_incoming. */
			unlink(cfg->sandbox->ss_mem);
			if ((fd = open(cfg->sandbox->ss_mem, O_WRONLY | O_CREAT | O_EXCL |
			    O_CLOEXEC | O_NOFOLLOW, 0600)) == -1 ||
			    ftruncate(fd, (off_t)mem_size) == -1) {
				cause_set(cause, "memory file %s: %s", cfg->sandbox->ss_mem,
				    strerror(errno));
				if (fd != -1)
					close(fd);
				return NULL;
			}
			close(fd);
			if (stor_give(cfg->sandbox, cfg->sandbox->ss_mem, 0600, cause) == -1)
				return NULL;
		}
		if (lstat(cfg->sandbox->ss_mem, &st) == -1) {
			cause_set(cause, "memory file %s: %s", cfg->sandbox->ss_mem,
			    strerror(errno));
			return NULL;
		}
		mempath = xstrdup(VM_JAIL_SANDBOX "/mem");
		spec.mem_share = 1;
	}
	if (cfg->tap_fd != -1) {
		fds[nfds++] = cfg->tap_fd;
		spec.tap_fd = 3 + nfds - 1;
	}
	vm_spec_volumes(cfg, &spec, fds, &nfds);
	spec.mem_path = mempath;
	spec.incoming = 1;
	vm = vm_new(base, cfg, ev, done, arg);
	vm->vm_t0 = t0;
	vm->vm_mem_mode = mode;
	vm->vm_mem_dev = st.st_dev;
	vm->vm_mem_ino = st.st_ino;
	vm->vm_own_mem = mode == VM_RESTORE_OWN;
	if (plan != NULL) {
		vm->vm_op = VM_OP_RESTORE;
		vm->vm_times.checked = plan->checked;
		vm->vm_devfd = plan->devfd;
		plan->devfd = -1;
	} else
		vm->vm_op = VM_OP_SPAWN;
	if (vm_spawn(vm, cfg, &spec, fds, nfds, NULL, 0, cause) == -1) {
		vm->vm_op = VM_OP_NONE;
		vm_free(vm);
		vm = NULL;
	}
	if (memfd != -1)
		close(memfd);
	free(mempath);
	return vm;
}

struct vm *
vm_spawn_incoming(struct event_base *base, const struct vm_config *cfg,
    enum vm_restore_mem mode, int base_memfd, vm_event_cb ev, vm_done_cb done, void *arg,
    char **cause)
{
	double t0;
	struct vm *vm;

	t0 = monotonic_msf();
	if ((vm = vm_spawn_for(base, cfg, mode, base_memfd, 0, NULL, t0, ev, done, arg,
	    cause)) == NULL)
		cause_wrap(cause, "spare %s", cfg->name);
	return vm;
}

struct vm *
vm_restore(struct event_base *base, const struct vm_config *cfg, const char *snapdir,
    enum vm_restore_mem mode, int base_memfd, vm_event_cb ev, vm_done_cb done, void *arg,
    char **cause)
{
	struct vm_plan plan;
	struct vm_spec spec;
	struct stat st;
	struct vm *vm = NULL;
	char devices[512], *path = NULL;	/* as vm_devices: slots and 8 volumes fit */
	double t0;

	t0 = monotonic_msf();
	vm_spec_common(cfg, &spec);
	qemu_argv_devices(&spec, devices, sizeof(devices));
	/* Everything checked before anything starts. */
	if (vm_plan_load(snapdir, cfg->template_name, cfg->kernel_id, cfg->memory_mb,
	    cfg->vcpus, devices, &plan, cause) == -1)
		goto bad;
	plan.checked = monotonic_ms_since(t0);
	if (mode == VM_RESTORE_SHARED) {
		if (vm_base_memfd_check(base_memfd, plan.h.mem_size, &st, cause) == -1)
			goto bad;
	} else {
		xasprintf(&path, "%s/%s", snapdir, STOR_SNAP_MEM);
		unlink(cfg->sandbox->ss_mem);
		if (reflink_copy(path, cfg->sandbox->ss_mem, cause) == -1 ||
		    stor_give(cfg->sandbox, cfg->sandbox->ss_mem, 0600, cause) == -1)
			goto bad;
	}
	vm = vm_spawn_for(base, cfg, mode, base_memfd, 1, &plan, t0, ev, done, arg, cause);
	if (vm != NULL)
		goto out;
bad:
	cause_wrap(cause, "restore %s", cfg->name);
out:
	vm_plan_clear(&plan);
	free(path);
	return vm;
}

/*
 * The spare's RAM file gets the snapshot's RAM: a reflink into the very
 * inode QEMU mapped at spawn (it has not touched a page; a spare never ran).
 * The VMM owns vm/, so the file is opened without following links and must
 * still be the inode QEMU was started on.
 */
static int
vm_incoming_own_mem(struct vm *vm, const char *snapdir, char **cause)
{
	struct stat st;
	char *path;
	int in, out, rc = -1;

	xasprintf(&path, "%s/%s", snapdir, STOR_SNAP_MEM);
	in = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	out = open(vm->vm_sb->ss_mem, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (in == -1 || out == -1) {
		cause_set(cause, "open %s: %s", in == -1 ? path : vm->vm_sb->ss_mem,
		    errno == ELOOP ? "is a symlink (refused: the VMM owns this directory)" :
		    strerror(errno));
		goto out;
	}
	if (fstat(out, &st) == -1 || !S_ISREG(st.st_mode) || st.st_dev != vm->vm_mem_dev ||
	    st.st_ino != vm->vm_mem_ino) {
		cause_set(cause, "%s is not the RAM file the spare was started on (refused)",
		    vm->vm_sb->ss_mem);
		goto out;
	}
	if (reflink_fds(in, out, path, vm->vm_sb->ss_mem, cause) == -1)
		goto out;
	rc = 0;
out:
	if (in != -1)
		close(in);
	if (out != -1)
		close(out);
	free(path);
	return rc;
}

int
vm_incoming(struct vm *vm, const char *snapdir, enum vm_restore_mem mode, int base_memfd,
    vm_done_cb done, char **cause)
{
	struct vm_plan plan;
	struct stat st;
	double t0;

	t0 = monotonic_msf();
	if (vm->vm_state == VM_EXITED) {
		cause_set(cause, "spare %s: its VMM is gone: %s", vm->vm_name,
		    vm->vm_exit_why ? vm->vm_exit_why : "exited");
		return -1;
	}
	if (vm->vm_flags & (VM_F_DEAD | VM_F_CLOSED)) {
		/* Exiting: the exit event with the reason is on its way. */
		cause_set(cause, "spare %s: its VMM is exiting%s%s", vm->vm_name,
		    vm->vm_qmp_err ? ": " : "", vm->vm_qmp_err ? vm->vm_qmp_err : "");
		return -1;
	}
	if (!vm->vm_spare || vm->vm_op != VM_OP_NONE) {
		cause_set(cause, "vm %s: not a waiting spare (%s%s)", vm->vm_name,
		    vm_state_name(vm->vm_state), vm->vm_op != VM_OP_NONE ? ", busy" : "");
		return -1;
	}
	if (mode != vm->vm_mem_mode) {
		cause_set(cause, "spare %s was started for %s memory, the restore asks for %s",
		    vm->vm_name, vm->vm_mem_mode == VM_RESTORE_SHARED ? "shared base" : "own",
		    mode == VM_RESTORE_SHARED ? "shared base" : "own");
		return -1;
	}
	if (vm_plan_load(snapdir, vm->vm_template, vm->vm_kernel_id, vm->vm_memory_mb,
	    vm->vm_vcpus, vm->vm_devices, &plan, cause) == -1)
		goto bad;
	if (mode == VM_RESTORE_SHARED) {
		if (vm_base_memfd_check(base_memfd, plan.h.mem_size, &st, cause) == -1)
			goto bad;
		if (st.st_dev != vm->vm_mem_dev || st.st_ino != vm->vm_mem_ino) {
			cause_set(cause, "spare %s maps another base memory than snapshot %s's",
			    vm->vm_name, snapdir);
			goto bad;
		}
	} else if (vm_incoming_own_mem(vm, snapdir, cause) == -1)
		goto bad;
	vm->vm_spare = 0;
	vm->vm_t0 = t0;
	memset(&vm->vm_times, 0, sizeof(vm->vm_times));
	vm->vm_times.checked = monotonic_ms_since(t0);
	vm->vm_op = VM_OP_RESTORE;
	vm->vm_opcb = done;
	vm->vm_devfd = plan.devfd;
	plan.devfd = -1;
	vm_plan_clear(&plan);
	vm_incoming_send(vm);
	return 0;
bad:
	vm_plan_clear(&plan);
	cause_wrap(cause, "restore %s into spare %s", snapdir, vm->vm_name);
	return -1;
}

int
vm_is_spare(const struct vm *vm)
{
	return vm->vm_spare && vm->vm_state != VM_EXITED;
}
