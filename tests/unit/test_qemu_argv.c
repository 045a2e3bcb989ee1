/* The QEMU command line: required flags present, unsafe values rejected. */
#include "vm/qemu_argv.h"
#include "t.h"

static int
has(const struct argv *a, const char *s)
{
	size_t i;

	for (i = 0; i < a->ac; i++)
		if (strstr(a->av[i], s) != NULL)
			return 1;
	return 0;
}

static struct vm_spec
base_spec(void)
{
	struct vm_spec s;

	memset(&s, 0, sizeof(s));
	s.accel = VM_ACCEL_TCG;
	s.tsc_khz = 2300000;
	s.vcpus = 2;
	s.memory_mb = 512;
	s.kernel = "/k/vmlinux";
	s.initrd = "/k/initramfs.cpio";
	s.rootfs = "/d/rootfs.ext4";
	s.console_log = "/d/console.log";
	s.agent_socket = "/d/agent.sock";
	s.qmp_socket = "/d/qmp.sock";
	return s;
}

static void
test_tcg(void)
{
	struct vm_spec s = base_spec();
	struct argv a;
	char *cause = NULL;

	CHECK(qemu_argv_build(&s, &a, &cause) == 0);
	CHECK(has(&a, "microvm,x-option-roms=off,pit=off,pic=off,isa-serial=on"));
	CHECK(has(&a, "tsc_early_khz=2300000"));
	CHECK(has(&a, "cryptomgr.notests"));
	CHECK(has(&a, "name=org.airlock.agent"));
	CHECK(has(&a, "virtio-rng-device"));
	CHECK(!has(&a, "rtc=off") && !has(&a, "acpi=off"));
	CHECK(a.av[a.ac] == NULL);
	argv_free(&a);
}

static void
test_rejects(void)
{
	struct vm_spec s;
	struct argv a;
	char *cause = NULL;

	s = base_spec();
	s.tsc_khz = 0;
	CHECK(qemu_argv_build(&s, &a, &cause) == -1);
	CHECK_CAUSE(cause, "tsc_khz");
	s = base_spec();
	s.rootfs = "/d/x,file=/etc/shadow";
	CHECK(qemu_argv_build(&s, &a, &cause) == -1);
	CHECK_CAUSE(cause, "rootfs");
	s = base_spec();
	s.vcpus = 0;
	CHECK(qemu_argv_build(&s, &a, &cause) == -1);
	CHECK_CAUSE(cause, "vcpus");
	s = base_spec();
	s.memory_mb = 16;
	CHECK(qemu_argv_build(&s, &a, &cause) == -1);
	CHECK_CAUSE(cause, "memory_mb");
	s = base_spec();
	s.accel = VM_ACCEL_AUTO;
	CHECK(qemu_argv_build(&s, &a, &cause) == -1);
	CHECK_CAUSE(cause, "accel");
	free(cause);
}

int
main(void)
{
	T_RUN(test_tcg);
	T_RUN(test_rejects);
	return t_done();
}
