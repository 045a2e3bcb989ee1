/*
 * Synchronous boot of one microVM, for tools and tests that run before the
 * daemon (make up, the boot test, template builds). The daemon drives QEMU
 * asynchronously over QMP instead.
 */
#ifndef AIRLOCK_VM_BOOT_H
#define AIRLOCK_VM_BOOT_H

#include <sys/types.h>

#include "vm/qemu_argv.h"

#define VM_BOOT_CONSOLE_TAIL	2048	/* console bytes quoted in errors */

/* Start QEMU for spec; its own stderr goes to <console_log>.qemu. */
int vm_boot_start(const struct vm_spec *spec, pid_t *pid, char **cause);

/*
 * Wait until a console line contains needle. Fails with a cause holding the
 * last console lines when QEMU exits first or timeout_ms passes.
 */
int vm_boot_wait_line(pid_t pid, const char *console_log, const char *needle,
    int timeout_ms, char **cause);

/* Kill (SIGKILL) and reap; returns the wait status, or -1 if already gone. */
int vm_boot_kill(pid_t pid);

/* Wait up to timeout_ms for QEMU to exit on its own; 0 when it did. */
int vm_boot_wait_exit(pid_t pid, int timeout_ms, int *status);

/* Last len bytes of a file, malloc'd ("" when missing). */
char *vm_boot_tail(const char *path, size_t len);

#endif
