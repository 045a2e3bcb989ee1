/* The initramfs writer: read the cpio back and check every entry. */
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "common/util.h"
#include "images/initramfs.h"
#include "t.h"

static void
test_roundtrip(void)
{
	char dir[] = "/tmp/airlock-irfs-XXXXXX", *init, *mods, *ko, *out, *cause = NULL;
	struct archive_entry *e;
	struct archive *a;
	int seen_init = 0, seen_console = 0, seen_ko = 0, seen_newroot = 0;

	CHECK(mkdtemp(dir) != NULL);
	xasprintf(&init, "%s/init", dir);
	xasprintf(&mods, "%s/mods", dir);
	xasprintf(&ko, "%s/mods/virtio.ko", dir);
	xasprintf(&out, "%s/out.cpio", dir);
	CHECK(write_file_atomic(init, "#!init", 6, 0700, &cause) == 0);
	CHECK(mkdir_p(mods, 0755, &cause) == 0);
	CHECK(write_file_atomic(ko, "ko-bytes", 8, 0644, &cause) == 0);
	CHECK(initramfs_write(init, mods, out, &cause) == 0);

	a = archive_read_new();
	archive_read_support_format_cpio(a);
	CHECK(archive_read_open_filename(a, out, 4096) == ARCHIVE_OK);
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		const char *n = archive_entry_pathname(e);
		if (strcmp(n, "init") == 0) {
			seen_init = 1;
			CHECK((archive_entry_mode(e) & 0777) == 0755);
			CHECK(archive_entry_size(e) == 6);
		} else if (strcmp(n, "dev/console") == 0) {
			seen_console = 1;
			CHECK(S_ISCHR(archive_entry_mode(e)));
			CHECK(archive_entry_rdevmajor(e) == 5 && archive_entry_rdevminor(e) == 1);
		} else if (strcmp(n, "lib/modules/virtio.ko") == 0)
			seen_ko = 1;
		else if (strcmp(n, "newroot") == 0)
			seen_newroot = 1;
	}
	archive_read_free(a);
	CHECK(seen_init && seen_console && seen_ko && seen_newroot);

	/* No modules: a clear error and no output file left behind. */
	CHECK(unlink(ko) == 0);
	CHECK(unlink(out) == 0);
	CHECK(initramfs_write(init, mods, out, &cause) == -1);
	CHECK_CAUSE(cause, "no .ko files");
	CHECK(!path_exists(out));
	CHECK(remove_tree(dir, &cause) == 0);
	free(init);
	free(mods);
	free(ko);
	free(out);
	free(cause);
}

int
main(void)
{
	T_RUN(test_roundtrip);
	return t_done();
}
