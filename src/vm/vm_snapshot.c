/*
 * Snapshot a VM (vm.h vm_snapshot): stop, stream the device state into a
 * file QEMU gets over QMP (getfd + migrate fd:, no shell), wait for the
 * MIGRATION event (events capability; a timer bounds it), reflink RAM and
 * disk, commit the header, then cont or quit.
 */
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

/* --- snapshot -------------------------------------------------------- */


/* Undo a failed snapshot: drop the partial dir, let the guest continue. */
static void
vm_snap_fail(struct vm *vm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
vm_snap_fail(struct vm *vm, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	if (vm->vm_snapfd != -1) {
		close(vm->vm_snapfd);
		vm->vm_snapfd = -1;
	}
	stor_snapshot_abort(&vm->vm_snap);
	stor_snapshot_free(&vm->vm_snap);
	if (vm->vm_was_running && vm->vm_qmp != NULL && qmp_is_ready(vm->vm_qmp)) {
		/* Fire and forget: the op result is the snapshot failure. */
		if (qmp_command(vm->vm_qmp, "cont", NULL, VM_CMD_TIMEOUT_MS, vm_resume_reply,
		    vm, NULL) == 0) {
			vm->vm_op = VM_OP_RESUME;
			vm->vm_state = VM_PAUSED;
			vm_done_cb cb = vm->vm_opcb;
			/* Report the failure now; the cont completes silently. */
			vm->vm_opcb = NULL;
			vm_hold(vm);
			if (cb != NULL)
				cb(vm, msg, vm->vm_arg);
			vm_put(vm);
			free(msg);
			return;
		}
	}
	vm_op_done(vm, msg);
	free(msg);
}

/* Device state checksum and the header: the snapshot is complete once this returns 0. */
static int
vm_snap_commit(struct vm *vm, char **cause)
{
	struct stor_snap_header h;
	char now[32];
	time_t t = time(NULL);
	struct tm tm;
	uint64_t size;

	memset(&h, 0, sizeof(h));
	if (fsync(vm->vm_snapfd) == -1) {
		cause_set(cause, "snapshot %s: fsync device state: %s", vm->vm_snap_id,
		    strerror(errno));
		return -1;
	}
	if (stor_fd_sha256(vm->vm_snapfd, STOR_SNAP_DEVSTATE_MAX, h.devstate_sha256, &size,
	    cause) == -1) {
		cause_wrap(cause, "snapshot %s: device state", vm->vm_snap_id);
		return -1;
	}
	close(vm->vm_snapfd);
	vm->vm_snapfd = -1;
	gmtime_r(&t, &tm);
	strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
	h.format = STOR_SNAP_FORMAT;
	h.template = vm->vm_template;
	h.kernel = vm->vm_kernel_id;
	h.memory_mb = vm->vm_memory_mb;
	h.vcpus = vm->vm_vcpus;
	h.devices = vm->vm_devices;
	h.devstate_size = size;
	h.mem_size = (uint64_t)vm->vm_memory_mb << 20;
	h.created = now;
	if (stor_snapshot_commit(&vm->vm_snap, &h, cause) == -1) {
		cause_wrap(cause, "snapshot %s", vm->vm_snap_id);
		return -1;
	}
	stor_snapshot_free(&vm->vm_snap);
	return 0;
}

#define VM_SNAP_CONT_RETRY_MS	10	/* see vm_snap_cont_again */
#define VM_SNAP_CONT_TRIES	200	/* 2 s */
static void vm_snap_cont_again(evutil_socket_t, short, void *);

/*
 * A live capture (fork, named snapshot): the guest continues as soon as
 * RAM and disk are reflinked, which is all that must happen while it is
 * stopped; the device state checksum, the fsyncs and the header follow
 * with the guest running.
 */
static void
vm_snap_continued(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;
	struct vm_timings *t = &vm->vm_times;
	char *cause = NULL, *msg;

	if (vm->vm_op != VM_OP_SNAPSHOT)
		return;
	if (error != NULL && strstr(error, "not finalized") != NULL &&
	    vm->vm_snap_cont_tries++ < VM_SNAP_CONT_TRIES) {
		vm_timer_in(vm, VM_SNAP_CONT_RETRY_MS, vm_snap_cont_again);
		return;
	}
	if (error != NULL) {
		stor_snapshot_abort(&vm->vm_snap);
		stor_snapshot_free(&vm->vm_snap);
		vm_op_fail(vm, "snapshot %s: cont: %s", vm->vm_snap_id, error);
		return;
	}
	vm->vm_state = VM_RUNNING;
	vm->vm_snap_t[4] = monotonic_msf();
	t->snap_paused = vm->vm_snap_t[4] - vm->vm_snap_t[0];
	t->snap_stop = vm->vm_snap_t[1] - vm->vm_snap_t[0];
	t->snap_stream = vm->vm_snap_t[2] - vm->vm_snap_t[1];
	t->snap_reflink = vm->vm_snap_t[3] - vm->vm_snap_t[2];
	t->snap_cont = vm->vm_snap_t[4] - vm->vm_snap_t[3];
	log_info("vm %s: snapshot %s: guest stopped %.1f ms (stop %.1f, device state %.1f, "
	    "reflinks %.1f, cont %.1f)", vm->vm_name, vm->vm_snap_id, t->snap_paused, t->snap_stop,
	    t->snap_stream, t->snap_reflink, t->snap_cont);
	if (vm_snap_commit(vm, &cause) == -1) {
		xasprintf(&msg, "%s", cause);
		free(cause);
		if (vm->vm_snapfd != -1) {
			close(vm->vm_snapfd);
			vm->vm_snapfd = -1;
		}
		stor_snapshot_abort(&vm->vm_snap);
		stor_snapshot_free(&vm->vm_snap);
		vm_op_done(vm, msg);
		free(msg);
		return;
	}
	vm_op_done(vm, NULL);
}

/*
 * QEMU emits MIGRATION "completed" before its migration thread moves the
 * run state from finish-migrate to postmigrate, and refuses cont between
 * the two ("Migration is not finalized yet"); on a loaded host our cont
 * can land there. Nothing tells when it is over, so try again shortly.
 */

static void
vm_snap_cont_again(evutil_socket_t fd, short ev, void *arg)
{
	struct vm *vm = arg;

	if (vm->vm_op == VM_OP_SNAPSHOT)
		vm_cmd(vm, "cont", NULL, vm_snap_continued);
}

static void
vm_snap_finish(struct vm *vm)
{
	char *dst, *cause = NULL;

	vm->vm_snap_t[2] = monotonic_msf();
	/* The guest is stopped: RAM and disk are consistent with the device state. */
	/* The VMM owns vm/: its files may have been swapped for symlinks. */
	dst = stor_snapshot_tmp_path(&vm->vm_snap, STOR_SNAP_MEM);
	if (stor_reflink_from_sandbox(vm->vm_sb, vm->vm_sb->ss_mem, dst, &cause) == -1) {
		free(dst);
		vm_snap_fail(vm, "snapshot %s: %s", vm->vm_snap_id, cause);
		free(cause);
		return;
	}
	free(dst);
	dst = stor_snapshot_tmp_path(&vm->vm_snap, STOR_SNAP_ROOTFS);
	if (stor_reflink_from_sandbox(vm->vm_sb, vm->vm_sb->ss_rootfs, dst, &cause) == -1) {
		free(dst);
		vm_snap_fail(vm, "snapshot %s: %s", vm->vm_snap_id, cause);
		free(cause);
		return;
	}
	free(dst);
	vm->vm_snap_t[3] = monotonic_msf();
	if (vm->vm_was_running && !vm->vm_snap_exit) {
		vm->vm_snap_cont_tries = 0;
		vm_cmd(vm, "cont", NULL, vm_snap_continued);
		return;
	}
	if (vm_snap_commit(vm, &cause) == -1) {
		vm_snap_fail(vm, "%s", cause);
		free(cause);
		return;
	}
	if (vm->vm_snap_exit) {
		/* Suspend: the snapshot is the sandbox now; the VMM goes. */
		vm->vm_op = VM_OP_STOP;
		vm_stop_quit(vm);
		return;
	}
	vm->vm_state = VM_PAUSED;
	vm_op_done(vm, NULL);
}

/* A failed stream: one query-migrate for QEMU's reason (not a poll). */
static void
vm_snap_failed_status(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;
	const char *st, *why;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_SNAPSHOT)
		return;
	st = error == NULL ? json_string_value(json_object_get(ret, "status")) : NULL;
	why = error == NULL ? json_string_value(json_object_get(ret, "error-desc")) : error;
	vm_snap_fail(vm, "snapshot %s: device state migration %s: %s", vm->vm_snap_id,
	    st ? st : "failed", why ? why : "no reason given");
}

/* Both the migrate answer and the MIGRATION "completed" event, either order. */
static void
vm_snap_maybe_finish(struct vm *vm)
{
	if (vm->vm_mig_replied && vm->vm_mig_done)
		vm_snap_finish(vm);
}

void
vm_snap_migration(struct vm *vm, const char *status)
{
	if (vm->vm_op != VM_OP_SNAPSHOT || status == NULL)
		return;
	if (strcmp(status, "completed") == 0) {
		vm->vm_mig_done = 1;
		vm_snap_maybe_finish(vm);
	} else if (strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0)
		vm_cmd(vm, "query-migrate", NULL, vm_snap_failed_status);
}

static void
vm_snap_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct vm *vm = arg;

	if (vm->vm_op == VM_OP_SNAPSHOT)
		vm_snap_fail(vm, "snapshot %s: migration not finished after %d ms",
		    vm->vm_snap_id, VM_MIGRATE_TIMEOUT_MS);
}

static void
vm_snap_migrating(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_SNAPSHOT)
		return;
	if (error != NULL) {
		vm_snap_fail(vm, "migrate: %s", error);
		return;
	}
	vm->vm_mig_replied = 1;
	vm_snap_maybe_finish(vm);
}

static void
vm_snap_gotfd(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_SNAPSHOT)
		return;
	if (error != NULL) {
		vm_snap_fail(vm, "getfd: %s", error);
		return;
	}
	vm_timer_in(vm, VM_MIGRATE_TIMEOUT_MS, vm_snap_timeout);
	vm_cmd(vm, "migrate", json_pack("{s:s}", "uri", "fd:" VM_SNAP_FDNAME), vm_snap_migrating);
}

static void
vm_snap_params(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;
	char *cause = NULL;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_SNAPSHOT)
		return;
	if (error != NULL) {
		vm_snap_fail(vm, "migrate-set-parameters: %s", error);
		return;
	}
	/* QEMU 7.2 has no file: URI and exec: needs a shell (-sandbox spawn=deny):
	 * hand QEMU the open device state file over the QMP socket instead. */
	vm_trace(vm, "getfd");
	if (qmp_command_fd(vm->vm_qmp, "getfd", json_pack("{s:s}", "fdname", VM_SNAP_FDNAME),
	    vm->vm_snapfd, VM_CMD_TIMEOUT_MS, vm_snap_gotfd, vm, &cause) == -1) {
		vm_snap_fail(vm, "getfd: %s", cause);
		free(cause);
	}
}

static void
vm_snap_caps(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_SNAPSHOT)
		return;
	if (error != NULL) {
		vm_snap_fail(vm, "migrate-set-capabilities: %s", error);
		return;
	}
	/* 7.2 throttles migration to 128 MiB/s by default. */
	vm_cmd(vm, "migrate-set-parameters", json_pack("{s:I}", "max-bandwidth",
	    (json_int_t)(1LL << 40)), vm_snap_params);
}

static void
vm_snap_stopped(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm *vm = arg;

	/* A reply that outlived its operation (stop cancelled it). */
	if (vm->vm_op != VM_OP_SNAPSHOT)
		return;
	if (error != NULL) {
		vm_snap_fail(vm, "stop: %s", error);
		return;
	}
	vm->vm_state = VM_PAUSED;
	vm->vm_snap_t[1] = monotonic_msf();
	/* events: QEMU says when the stream is done; nothing polls query-migrate. */
	vm_cmd(vm, "migrate-set-capabilities", json_pack("{s:[{s:s, s:b}, {s:s, s:b}]}",
	    "capabilities", "capability", "x-ignore-shared", "state", 1, "capability", "events",
	    "state", 1), vm_snap_caps);
}

int
vm_snapshot(struct vm *vm, const char *id, int then_exit, vm_done_cb done, char **cause)
{
	char *path;

	if (!vm->vm_own_mem) {
		cause_set(cause, "vm %s: guest RAM is a shared base mapping; restore it with "
		    "its own memory file to snapshot it", vm->vm_name);
		return -1;
	}
	if (vm_op_start(vm, VM_OP_SNAPSHOT, done, VM_RUNNING, VM_PAUSED, cause) == -1)
		return -1;
	if (stor_snapshot_begin(id, &vm->vm_snap, cause) == -1) {
		vm->vm_op = VM_OP_NONE;
		vm->vm_opcb = NULL;
		return -1;
	}
	path = stor_snapshot_tmp_path(&vm->vm_snap, STOR_SNAP_DEVSTATE);
	vm->vm_snapfd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (vm->vm_snapfd == -1) {
		cause_set(cause, "create %s: %s", path, strerror(errno));
		free(path);
		stor_snapshot_abort(&vm->vm_snap);
		stor_snapshot_free(&vm->vm_snap);
		vm->vm_op = VM_OP_NONE;
		vm->vm_opcb = NULL;
		return -1;
	}
	free(path);
	free(vm->vm_snap_id);
	vm->vm_snap_id = xstrdup(id);
	vm->vm_snap_exit = then_exit;
	vm->vm_was_running = vm->vm_state == VM_RUNNING;
	vm->vm_mig_replied = vm->vm_mig_done = 0;
	vm->vm_times.qmp_trace[0] = '\0';
	vm->vm_times.snap_paused = vm->vm_times.snap_stop = vm->vm_times.snap_stream = 0;
	vm->vm_times.snap_reflink = vm->vm_times.snap_cont = 0;
	/* The RAM file's dirty pages go to disk now, not in the reflink while stopped. */
	if (vm->vm_was_running)
		stor_writeback_start(vm->vm_sb, vm->vm_sb->ss_mem);
	vm->vm_snap_t[0] = monotonic_msf();
	if (vm->vm_was_running)
		vm_cmd(vm, "stop", NULL, vm_snap_stopped);
	else
		vm_snap_stopped(vm->vm_qmp, NULL, NULL, vm);
	return 0;
}
