/* Where a built template and the guest kernel live in the data dir. */
#ifndef AIRLOCK_TEMPLATE_H
#define AIRLOCK_TEMPLATE_H

struct template_paths {
	char	*kernel;	/* kernel/current/vmlinux (PVH ELF) */
	char	*initrd;	/* kernel/current/initramfs.cpio */
	char	*rootfs;	/* templates/<name>/rootfs.ext4 (read-only master) */
	char	*meta;		/* templates/<name>/template.json */
};

/* Resolve and check that every file exists; the cause says which is missing. */
int template_paths(const char *name, struct template_paths *tp, char **cause);
/* Only kernel and initrd (rootfs and meta NULL): a template build's VM. */
int template_kernel_paths(struct template_paths *tp, char **cause);
void template_paths_free(struct template_paths *tp);

#endif
