/*
 * Filling a volume slot of a live VMM (vm.h vm_slot_fill; the slots are in
 * qemu_argv.h). A pool member was restored with every slot on its null-co
 * placeholder; a claim hands QEMU the volume's fds over QMP (add-fd,
 * SCM_RIGHTS: the jailed VMM still never opens a host path), adds a file
 * node on the fd set, reopens the slot's raw node onto it and, for a
 * read-write slot, resizes the node to the volume so virtio-blk tells the
 * guest its capacity (QEMU refuses to resize a read-only node: that slot's
 * placeholder is already larger than any volume). Each step is one
 * asynchronous QMP command; the loop never waits on QEMU.
 *
 * Nothing here is undone on failure: the only user (a claim) destroys the
 * member, and its VMM takes the fd set and the nodes with it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "vm/vm_priv.h"

enum slot_step { SLOT_ADDFD, SLOT_ADDFD_RO, SLOT_NODE, SLOT_REOPEN, SLOT_RESIZE, SLOT_DONE };

struct vm_slot_op {
	struct vm	*vm;
	unsigned	 slot;
	int		 fd, fd_ro;
	uint64_t	 size;
	enum slot_step	 step;
	vm_done_cb	 done;
	void		*arg;
};

static void vm_slot_reply(struct qmp *, json_t *, const char *, void *);

/* The next QMP command of the swap, or done(). */
static int
vm_slot_next(struct vm_slot_op *o, char **cause)
{
	unsigned k = o->slot;
	int ro = VM_SLOT_IS_RO(k), fd = -1;
	const char *cmd = NULL;
	json_t *args = NULL;
	char node[16], file[16], path[32];

	snprintf(node, sizeof(node), "slot%u", k);
	snprintf(file, sizeof(file), "slot%uh", k);	/* "h": given at claim (not slotKf) */
	snprintf(path, sizeof(path), "/dev/fdset/%u", VM_SLOT_FDSET + k);
	switch (o->step) {
	case SLOT_ADDFD:
	case SLOT_ADDFD_RO:
		cmd = "add-fd";
		args = json_pack("{s:i}", "fdset-id", VM_SLOT_FDSET + k);
		fd = o->step == SLOT_ADDFD ? o->fd : o->fd_ro;
		break;
	case SLOT_NODE:
		cmd = "blockdev-add";
		args = json_pack("{s:s,s:s,s:s,s:s,s:b}", "driver", "file", "node-name", file,
		    "filename", path, "discard", "unmap", "read-only", ro);
		break;
	case SLOT_REOPEN:
		/* Every option of the raw node again, only its child changed. */
		cmd = "blockdev-reopen";
		args = json_pack("{s:[{s:s,s:s,s:s,s:b}]}", "options", "driver", "raw",
		    "node-name", node, "file", file, "read-only", ro);
		break;
	case SLOT_RESIZE:
		cmd = "block_resize";
		args = json_pack("{s:s,s:I}", "node-name", node, "size", (json_int_t)o->size);
		break;
	case SLOT_DONE:
		break;
	}
	if (cmd == NULL)
		return 1;
	vm_trace(o->vm, "%s(slot%u)", cmd, k);
	if (o->vm->vm_qmp == NULL) {
		json_decref(args);
		cause_set(cause, "%s: QMP not connected", cmd);
		return -1;
	}
	return fd != -1 ?
	    qmp_command_fd(o->vm->vm_qmp, cmd, args, fd, VM_CMD_TIMEOUT_MS, vm_slot_reply, o,
	    cause) :
	    qmp_command(o->vm->vm_qmp, cmd, args, VM_CMD_TIMEOUT_MS, vm_slot_reply, o, cause);
}

static void
vm_slot_end(struct vm_slot_op *o, const char *error)
{
	struct vm *vm = o->vm;

	o->done(vm, error, o->arg);
	vm_put(vm);
	free(o);
}

static void
vm_slot_reply(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct vm_slot_op *o = arg;
	char *cause = NULL, *msg;
	int rc;

	(void)q;
	(void)ret;
	if (error != NULL) {
		xasprintf(&msg, "slot %u: %s", o->slot, error);
		vm_slot_end(o, msg);
		free(msg);
		return;
	}
	do {
		o->step++;
	} while ((o->step == SLOT_ADDFD_RO && o->fd_ro == -1) ||
	    (o->step == SLOT_RESIZE && VM_SLOT_IS_RO(o->slot)));
	if ((rc = vm_slot_next(o, &cause)) == 0)
		return;
	if (rc == -1)
		xasprintf(&msg, "slot %u: %s", o->slot, cause ? cause : "failed");
	vm_slot_end(o, rc == 1 ? NULL : msg);
	if (rc == -1)
		free(msg);
	free(cause);
}

int
vm_slot_fill(struct vm *vm, unsigned slot, int fd, int fd_ro, uint64_t size, vm_done_cb done,
    void *arg, char **cause)
{
	struct vm_slot_op *o;

	if (slot >= VM_SLOTS || fd < 0 || (!VM_SLOT_IS_RO(slot) && fd_ro < 0) ||
	    (VM_SLOT_IS_RO(slot) ? size > VM_SLOT_RO_BYTES : size <= VM_SLOT_RW_BYTES)) {
		cause_set(cause, "slot %u: no such slot, or a volume it cannot hold", slot);
		return -1;
	}
	o = xcalloc(1, sizeof(*o));
	o->vm = vm;
	o->slot = slot;
	o->fd = fd;
	o->fd_ro = VM_SLOT_IS_RO(slot) ? -1 : fd_ro;
	o->size = size;
	o->done = done;
	o->arg = arg;
	o->step = SLOT_ADDFD;
	if (vm_slot_next(o, cause) == -1) {
		free(o);
		return -1;
	}
	vm_hold(vm);
	return 0;
}
