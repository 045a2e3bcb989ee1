/* Choosing KVM or TCG, and the host TSC frequency that TCG guests need. */
#ifndef AIRLOCK_ACCEL_H
#define AIRLOCK_ACCEL_H

enum vm_accel { VM_ACCEL_AUTO, VM_ACCEL_KVM, VM_ACCEL_TCG };

struct accel_info {
	enum vm_accel	 accel;		/* KVM or TCG after detection */
	unsigned long	 tsc_khz;	/* host TSC in kHz, 0 if unknown */
	char		 reason[256];	/* why this accelerator was chosen */
};

/* "auto", "kvm" or "tcg"; -1 for anything else. */
int accel_parse(const char *s, enum vm_accel *out);
const char *accel_name(enum vm_accel a);

/*
 * Decide the accelerator. want=AUTO picks KVM only when the CPU shows vmx or
 * svm and /dev/kvm answers a VM-creation probe; PVM-style software KVM (no
 * vmx/svm) cannot run stock kernels, so it gets TCG. want=KVM fails with a
 * cause when KVM is unusable.
 */
int accel_detect(enum vm_accel want, struct accel_info *info, char **cause);

/* Host TSC frequency in kHz from the kernel log, CPUID or /proc/cpuinfo. */
unsigned long accel_tsc_khz(void);

/* Parsers used by accel_tsc_khz, exposed for tests. */
unsigned long accel_tsc_from_kmsg(const char *log);
unsigned long accel_tsc_from_cpuinfo(const char *cpuinfo);
int accel_cpuinfo_has_virt(const char *cpuinfo);

#endif
