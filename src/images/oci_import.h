/*
 * airlock template import: an OCI image (an OCI image layout directory or
 * tar, or a `docker save` tarball) to a template, with no Docker and no
 * registry. docs/templates.md "Importing an OCI image".
 */
#ifndef AIRLOCK_OCI_IMPORT_H
#define AIRLOCK_OCI_IMPORT_H

#include <stdint.h>

#define OCI_IMPORT_MAX_BYTES	(16ULL << 30)	/* the image's file data, all layers */
#define OCI_IMPORT_MAX_ENTRIES	2000000ULL

struct oci_import_opts {
	const char	*name;		/* template name */
	const char	*image;		/* a file (tar) or a directory (OCI layout) */
	const char	*agent_bin;	/* NULL: template_find_agent */
	unsigned	 disk_size_mb;	/* 0: the tree's size with headroom, at least 4096 */
	uint64_t	 max_bytes;	/* 0: OCI_IMPORT_MAX_BYTES */
	void		(*progress)(void *arg, int step, int nsteps, const char *msg);
	/*
	 * Called once the image has been read and every layer checked, before
	 * anything is unpacked: a failure before it is the image's fault (the
	 * API's 400), after it the host's.
	 */
	void		(*checked)(void *arg);
	void		*arg;
};

int oci_import(const struct oci_import_opts *o, char **cause);

#endif
