/* Template path resolution. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/util.h"
#include "images/template.h"

int
template_paths(const char *name, struct template_paths *tp, char **cause)
{
	memset(tp, 0, sizeof(*tp));
	if (!paths_valid_name(name)) {
		cause_set(cause, "template: invalid name \"%s\"", name);
		return -1;
	}
	tp->kernel = paths_data("kernel/current/vmlinux");
	tp->initrd = paths_data("kernel/current/initramfs.cpio");
	tp->rootfs = paths_data("templates/%s/rootfs.ext4", name);
	tp->meta = paths_data("templates/%s/template.json", name);
	if (access(tp->kernel, R_OK) == -1 || access(tp->initrd, R_OK) == -1) {
		cause_set(cause, "guest kernel or initramfs missing under %s/kernel/current "
		    "(run make up or scripts/kernel.sh)", paths_data_dir());
		goto bad;
	}
	if (access(tp->rootfs, R_OK) == -1 || access(tp->meta, R_OK) == -1) {
		cause_set(cause, "template \"%s\" not found (build it: airlock template build "
		    "%s --recipe FILE)", name, name);
		goto bad;
	}
	return 0;
bad:
	template_paths_free(tp);
	return -1;
}

int
template_kernel_paths(struct template_paths *tp, char **cause)
{
	memset(tp, 0, sizeof(*tp));
	tp->kernel = paths_data("kernel/current/vmlinux");
	tp->initrd = paths_data("kernel/current/initramfs.cpio");
	if (access(tp->kernel, R_OK) == -1 || access(tp->initrd, R_OK) == -1) {
		cause_set(cause, "guest kernel or initramfs missing under %s/kernel/current "
		    "(run make up or scripts/kernel.sh)", paths_data_dir());
		template_paths_free(tp);
		return -1;
	}
	return 0;
}

void
template_paths_free(struct template_paths *tp)
{
	free(tp->kernel);
	free(tp->initrd);
	free(tp->rootfs);
	free(tp->meta);
	memset(tp, 0, sizeof(*tp));
}
