/* Accelerator detection inputs and the TSC parsers. */
#include "vm/accel.h"
#include "t.h"

static void
test_tsc_parsers(void)
{
	CHECK(accel_tsc_from_kmsg("[0.0] tsc: Detected 2300.000 MHz processor\n") == 2300000);
	CHECK(accel_tsc_from_kmsg("tsc: Detected 2600.000 MHz processor\n"
	    "tsc: Refined TSC clocksource calibration: 2599.998 MHz\n") == 2599998);
	CHECK(accel_tsc_from_kmsg("nothing here") == 0);
	CHECK(accel_tsc_from_cpuinfo("processor\t: 0\ncpu MHz\t\t: 2299.998\n") == 2299998);
	CHECK(accel_tsc_from_cpuinfo("processor\t: 0\n") == 0);
}

static void
test_virt_flags(void)
{
	CHECK(accel_cpuinfo_has_virt("x\nflags\t\t: fpu vme vmx sse\n") == 1);
	CHECK(accel_cpuinfo_has_virt("x\nflags\t\t: fpu svm\n") == 1);
	CHECK(accel_cpuinfo_has_virt("x\nflags\t\t: fpu vmxnot sse\n") == 0);
	CHECK(accel_cpuinfo_has_virt("x\nflags\t\t: fpu sse\nbugs: vmx\n") == 0);
}

static void
test_parse(void)
{
	enum vm_accel a;

	CHECK(accel_parse("tcg", &a) == 0 && a == VM_ACCEL_TCG);
	CHECK(accel_parse("kvm", &a) == 0 && a == VM_ACCEL_KVM);
	CHECK(accel_parse("auto", &a) == 0 && a == VM_ACCEL_AUTO);
	CHECK(accel_parse("xen", &a) == -1);
}

/* On this host class detection must never pick KVM without vmx/svm. */
static void
test_detect(void)
{
	struct accel_info ai;
	char *cause = NULL;

	CHECK(accel_detect(VM_ACCEL_TCG, &ai, &cause) == 0 && ai.accel == VM_ACCEL_TCG);
	CHECK(accel_detect(VM_ACCEL_AUTO, &ai, &cause) == 0);
	CHECK(ai.accel == VM_ACCEL_TCG || ai.accel == VM_ACCEL_KVM);
	CHECK(ai.tsc_khz > 100000);
	free(cause);
}

int
main(void)
{
	T_RUN(test_tsc_parsers);
	T_RUN(test_virt_flags);
	T_RUN(test_parse);
	T_RUN(test_detect);
	return t_done();
}
