/*
 * Applying one OCI layer (a tar, maybe gzip/zstd) onto a root directory,
 * and the check pass that reads a layer without writing anything.
 *
 * Every name goes through oci_entry_path (no "..", no absolute escape);
 * every lookup under the root is openat2(RESOLVE_IN_ROOT | NO_MAGICLINKS |
 * NO_XDEV), so a symlink an earlier entry planted (even "/", or "../..")
 * resolves inside the root and nothing is ever written outside it. Device
 * nodes are refused (an image has no business shipping them; the guest's
 * /dev is devtmpfs); sockets are skipped.
 */
#ifndef AIRLOCK_OCI_LAYER_H
#define AIRLOCK_OCI_LAYER_H

#include <stdint.h>

struct oci_budget {
	uint64_t	bytes, max_bytes;	/* file data written (or read, in a check) */
	uint64_t	entries, max_entries;
};

/*
 * Read the layer at fd (from its start). With rootfd == -1 only check:
 * names, link targets, types and the budget; with digest non-NULL
 * ("sha256:<hex>") also verify the blob's bytes against it. With rootfd a
 * directory, apply: whiteouts delete, opaque dirs drop the lower layers'
 * contents, files keep mode, owner, times and xattrs, hard links stay
 * links. what names the layer in causes ("layer 2 (blobs/sha256/...)"),
 * and each cause names the entry.
 */
int oci_layer_read(int fd, int rootfd, const char *what, const char *digest,
    struct oci_budget *b, char **cause);

/*
 * Unpack a plain outer tarball (docker save, or an OCI layout as a tar)
 * into dirfd: only regular files, directories and symlinks, names checked
 * like layer entries, the same in-root resolution when reading them later.
 */
int oci_unpack_outer(int fd, int dirfd, struct oci_budget *b, char **cause);

/* Open path under rootfd, resolved inside it; -1 with errno. */
int oci_open_in(int rootfd, const char *path, int flags);

#endif
