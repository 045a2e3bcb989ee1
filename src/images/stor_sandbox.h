/*
 * Per-sandbox and per-snapshot storage in the data dir (docs/vm-engine.md).
 *
 *   sandboxes/<name>/            root 0700: host-only files
 *     console.log[.1]            serial console, written by the host, capped
 *     qemu.log                   QEMU's own stderr
 *     jail/                      empty mountpoint of the jail's private root
 *     vm/                        <uid>:<gid> 0700, the jail's /sandbox
 *       rootfs.ext4              reflink of the template (or snapshot) image
 *       mem                      guest RAM (memory-backend-file share=on)
 *       qmp.sock console.sock agent.sock
 *   snapshots/<id>/              root 0755, immutable once complete
 *     snapshot.json              header (stor_snapshot.h)
 *     devstate                   QEMU device state stream (x-ignore-shared)
 *     mem  rootfs.ext4           0444 reflinks taken while the VM was stopped
 *   run/uids/<uid>               which sandbox holds a jail uid
 *
 * Every uid/gid in [STOR_UID_BASE, STOR_UID_BASE + STOR_UID_COUNT) belongs
 * to at most one live sandbox, so sandboxes cannot read each other's files.
 */
#ifndef AIRLOCK_STOR_SANDBOX_H
#define AIRLOCK_STOR_SANDBOX_H

#include <stdint.h>
#include <sys/types.h>

#define STOR_UID_BASE		400000
#define STOR_UID_COUNT		65536
#define STOR_SPACE_MARGIN	(256ULL << 20)	/* keep this much free for metadata */

struct stor_sandbox {
	char	*ss_name;
	char	*ss_dir;	/* sandboxes/<name> */
	char	*ss_vmdir;	/* sandboxes/<name>/vm, the jail's /sandbox */
	char	*ss_jaildir;	/* sandboxes/<name>/jail */
	char	*ss_rootfs;	/* vm/rootfs.ext4 */
	char	*ss_mem;	/* vm/mem */
	char	*ss_console;	/* console.log */
	char	*ss_qemulog;	/* qemu.log */
	uid_t	 ss_uid;
	gid_t	 ss_gid;
};

/*
 * Create the sandbox directories, take a jail uid, and reflink rootfs_src
 * (a template image or a snapshot's rootfs) as its disk. mem_bytes is the
 * guest RAM the memory file may grow to: checked against free space.
 * On failure nothing is left behind.
 */
int stor_sandbox_create(const char *name, const char *rootfs_src, uint64_t mem_bytes,
    struct stor_sandbox *ss, char **cause);

/*
 * Extend the new sandbox's rootfs image to bytes before its first boot
 * (sparse: costs nothing until the guest writes). Never shrinks: a size at
 * or below the image's is a no-op. The guest's filesystem is grown by the
 * guest itself (sandbox/sbm_disk.h); the host never parses the image.
 */
int stor_sandbox_grow(const struct stor_sandbox *ss, uint64_t bytes, char **cause);

/*
 * The existing sandbox of a VM being adopted after a daemon restart:
 * paths only, after checking that uid's claim names it and that its vm/
 * dir belongs to uid. Creates nothing; stor_sandbox_destroy releases it.
 */
int stor_sandbox_attach(const char *name, uid_t uid, struct stor_sandbox *ss, char **cause);

/* Remove every file and release the uid. The VM must be gone. */
int stor_sandbox_destroy(struct stor_sandbox *ss, char **cause);

/* Free memory only. */
void stor_sandbox_free(struct stor_sandbox *ss);

/* Bytes allocated by a file or tree (shared reflinked extents count fully). */
uint64_t stor_usage(const char *path);
/* Free bytes for unprivileged writers on the data dir's filesystem. */
uint64_t stor_free_bytes(void);
/* Free bytes (as above) and size of the data dir's filesystem (one statvfs). */
int stor_space(uint64_t *avail, uint64_t *total, char **cause);
/*
 * Admission against the host free-space floor: -1 with a cause naming the
 * data dir, its free space and the floor while less than floor_bytes is
 * free (what: "create", "resume", ...). floor_bytes 0 always admits.
 */
int stor_floor_check(uint64_t floor_bytes, const char *what, char **cause);

/* Give a file to the sandbox's uid with mode; used for copied-in files. */
int stor_give(const struct stor_sandbox *ss, const char *path, mode_t mode, char **cause);

/*
 * Start writeback of a sandbox file's dirty pages (its RAM file) without
 * waiting, checked as stor_reflink_from_sandbox checks: a reflink flushes
 * what is still dirty, so starting ahead of a snapshot's stop leaves less
 * to flush while the guest is stopped. Best effort: errors are ignored.
 */
void stor_writeback_start(const struct stor_sandbox *ss, const char *path);
/*
 * Reflink a file out of the sandbox's vm/ dir (snapshots). The VMM can
 * write there, so the source must be a regular file owned by the sandbox
 * uid, opened without following symlinks: never e.g. the CA key.
 */
int stor_reflink_from_sandbox(const struct stor_sandbox *ss, const char *src,
    const char *dst, char **cause);

/*
 * After a daemon crash: drop uid claims whose sandbox directory is gone.
 * Returns how many were released.
 */
int stor_uid_reconcile(void);

/* Uid allocation (exposed for tests). */
int stor_uid_alloc(const char *name, uid_t *uid, char **cause);
void stor_uid_release(uid_t uid);

#endif
