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

/* The argument after flag, or NULL. */
static const char *
arg_after(const struct argv *a, const char *flag)
{
	size_t i;

	for (i = 0; i + 1 < a->ac; i++)
		if (strcmp(a->av[i], flag) == 0)
			return a->av[i + 1];
	return NULL;
}

static void
test_tcg(void)
{
	struct vm_spec s = base_spec();
	struct argv a;
	char *cause = NULL;

	CHECK(qemu_argv_build(&s, &a, &cause) == 0);
	CHECK(has(&a, "microvm,x-option-roms=off,pit=off,pic=off,isa-serial=on"));
	CHECK(has(&a, "tsc_early_khz=2300000 tsc=reliable"));
	CHECK(has(&a, "cryptomgr.notests"));
	CHECK(has(&a, "name=org.airlock.agent"));
	CHECK(has(&a, "virtio-rng-device"));
	/* qemu64 lacks instructions Debian's Python stack executes (SIGILL). */
	CHECK(arg_after(&a, "-cpu") != NULL && strcmp(arg_after(&a, "-cpu"), "max,-monitor") == 0);
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

/* Volumes: fd sets (a read-write one holds an O_RDONLY fd too), serials, the device list. */
static void
test_volumes(void)
{
	struct vm_spec s = base_spec();
	struct argv a;
	char *cause = NULL, dev[256];

	s.nvolumes = 2;
	s.volumes[0] = (struct vm_spec_volume){ 5, 6, "airlock-vol0", 0, -1 };
	s.volumes[1] = (struct vm_spec_volume){ 7, -1, "airlock-vol1", 1, -1 };
	CHECK(qemu_argv_build(&s, &a, &cause) == 0);
	CHECK(has(&a, "fd=5,set=10") && has(&a, "fd=6,set=10") && has(&a, "fd=7,set=11"));
	CHECK(has(&a, "file=/dev/fdset/10,") && has(&a, "readonly=off"));
	CHECK(has(&a, "file=/dev/fdset/11,") && has(&a, "readonly=on"));
	CHECK(has(&a, "drive=vol1,serial=airlock-vol1"));
	argv_free(&a);
	qemu_argv_devices(&s, dev, sizeof(dev));
	CHECK_STR(dev, "virtio-blk,virtio-blk:airlock-vol0,virtio-blk:airlock-vol1:ro,virtio-rng,"
	    "virtio-serial");
	s.volumes[1].serial = "x,file=/etc/shadow";
	CHECK(qemu_argv_build(&s, &a, &cause) == -1);
	CHECK_CAUSE(cause, "volumes[1]");
	s.volumes[1].serial = "airlock-vol1";
	s.volumes[0].fd_ro = -1;	/* read-write without its read-only fd */
	CHECK(qemu_argv_build(&s, &a, &cause) == -1);
	s.nvolumes = VM_VOLUMES_MAX + 1;
	CHECK(qemu_argv_build(&s, &a, &cause) == -1);
	free(cause);
}

/*
 * Slots: empty ones are raw over a null-co placeholder (no host file, the
 * read-only one large and read-only), a volume in a slot is raw over its
 * fd set, the device list is the same whatever the slots hold, and a
 * volume may not take a slot of the other kind or one taken twice.
 */
static void
test_slots(void)
{
	struct vm_spec s = base_spec();
	struct argv a;
	char *cause = NULL, dev[256], dev0[256];

	s.slots = 1;
	CHECK(qemu_argv_build(&s, &a, &cause) == 0);
	CHECK(has(&a, "driver=null-co,node-name=slot0p,size=1048576,read-zeroes=on,read-only=off"));
	CHECK(has(&a, "driver=null-co,node-name=slot2p,size=1099511627776,read-zeroes=on,"
	    "read-only=on"));
	CHECK(has(&a, "driver=raw,node-name=slot1,file=slot1p,read-only=off"));
	CHECK(has(&a, "virtio-blk-device,drive=slot2,serial=airlock-slot2"));
	CHECK(has(&a, "virtio-blk-device,drive=slot0,serial=airlock-slot0,werror=enospc,"
	    "rerror=report"));
	argv_free(&a);
	qemu_argv_devices(&s, dev0, sizeof(dev0));
	CHECK_STR(dev0, "virtio-blk,virtio-blk:airlock-slot0,virtio-blk:airlock-slot1,"
	    "virtio-blk:airlock-slot2:ro,virtio-rng,virtio-serial");
	s.nvolumes = 2;
	s.volumes[0] = (struct vm_spec_volume){ 5, 6, "airlock-slot0", 0, 0 };
	s.volumes[1] = (struct vm_spec_volume){ 7, -1, "airlock-slot2", 1, 2 };
	CHECK(qemu_argv_build(&s, &a, &cause) == 0);
	CHECK(has(&a, "fd=5,set=10") && has(&a, "fd=6,set=10") && has(&a, "fd=7,set=11"));
	CHECK(has(&a, "driver=file,node-name=slot0f,filename=/dev/fdset/10,discard=unmap,"
	    "read-only=off"));
	CHECK(has(&a, "driver=raw,node-name=slot2,file=slot2f,read-only=on"));
	CHECK(has(&a, "driver=raw,node-name=slot1,file=slot1p,read-only=off"));
	CHECK(!has(&a, "slot0p") && !has(&a, "drive=vol0"));
	argv_free(&a);
	qemu_argv_devices(&s, dev, sizeof(dev));
	CHECK_STR(dev, dev0);
	s.volumes[1].slot = 1;	/* a read-only volume in a read-write slot */
	CHECK(qemu_argv_build(&s, &a, &cause) == -1);
	CHECK_CAUSE(cause, "volumes[1]");
	s.volumes[1] = (struct vm_spec_volume){ 7, 8, "airlock-slot0", 0, 0 };	/* slot 0 twice */
	CHECK(qemu_argv_build(&s, &a, &cause) == -1);
	free(cause);
}

int
main(void)
{
	T_RUN(test_tcg);
	T_RUN(test_rejects);
	T_RUN(test_volumes);
	T_RUN(test_slots);
	return t_done();
}
