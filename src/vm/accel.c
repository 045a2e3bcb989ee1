/* KVM/TCG detection and host TSC frequency. */
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <unistd.h>

#include "common/util.h"
#include "vm/accel.h"

#define ACCEL_CPUINFO_MAX	(4 * 1024 * 1024)
#define ACCEL_KMSG_MAX		(1024 * 1024)

int
accel_parse(const char *s, enum vm_accel *out)
{
	if (strcmp(s, "auto") == 0)
		*out = VM_ACCEL_AUTO;
	else if (strcmp(s, "kvm") == 0)
		*out = VM_ACCEL_KVM;
	else if (strcmp(s, "tcg") == 0)
		*out = VM_ACCEL_TCG;
	else
		return -1;
	return 0;
}

const char *
accel_name(enum vm_accel a)
{
	switch (a) {
	case VM_ACCEL_KVM:
		return "kvm";
	case VM_ACCEL_TCG:
		return "tcg";
	default:
		return "auto";
	}
}

/* True when the first "flags" line lists vmx or svm as a whole word. */
int
accel_cpuinfo_has_virt(const char *cpuinfo)
{
	const char *line = strstr(cpuinfo, "\nflags");
	const char *end, *p;

	if (line == NULL)
		return 0;
	if ((p = strchr(line, ':')) == NULL)
		return 0;
	end = strchr(p, '\n');
	if (end == NULL)
		end = p + strlen(p);
	for (p = p + 1; p < end; ) {
		size_t n;

		while (p < end && *p == ' ')
			p++;
		n = strcspn(p, " \n");
		if ((n == 3 && (strncmp(p, "vmx", 3) == 0 || strncmp(p, "svm", 3) == 0)))
			return 1;
		p += n;
	}
	return 0;
}

static int
accel_kvm_probe(char *why, size_t len)
{
	int fd, vm, api;

	if ((fd = open("/dev/kvm", O_RDWR | O_CLOEXEC)) == -1) {
		snprintf(why, len, "/dev/kvm: %s", strerror(errno));
		return -1;
	}
	if ((api = ioctl(fd, KVM_GET_API_VERSION, 0)) != KVM_API_VERSION) {
		snprintf(why, len, "/dev/kvm API version %d, want %d", api, KVM_API_VERSION);
		close(fd);
		return -1;
	}
	if ((vm = ioctl(fd, KVM_CREATE_VM, 0)) == -1) {
		snprintf(why, len, "KVM_CREATE_VM: %s", strerror(errno));
		close(fd);
		return -1;
	}
	close(vm);
	close(fd);
	return 0;
}

int
accel_detect(enum vm_accel want, struct accel_info *info, char **cause)
{
	char *cpuinfo = NULL, why[200] = "";
	int virt = 0;

	memset(info, 0, sizeof(*info));
	info->tsc_khz = accel_tsc_khz();
	if (want == VM_ACCEL_TCG) {
		info->accel = VM_ACCEL_TCG;
		snprintf(info->reason, sizeof(info->reason), "tcg requested");
		return 0;
	}
	if (read_file("/proc/cpuinfo", ACCEL_CPUINFO_MAX, &cpuinfo, NULL, NULL) == 0) {
		virt = accel_cpuinfo_has_virt(cpuinfo);
		free(cpuinfo);
	}
	if (!virt)
		snprintf(why, sizeof(why), "CPU has no vmx/svm (software KVM such as PVM cannot run stock guest kernels)");
	else if (accel_kvm_probe(why, sizeof(why)) == 0) {
		info->accel = VM_ACCEL_KVM;
		snprintf(info->reason, sizeof(info->reason), "vmx/svm present and /dev/kvm works");
		return 0;
	}
	if (want == VM_ACCEL_KVM) {
		cause_set(cause, "kvm requested but unusable: %s", why);
		return -1;
	}
	info->accel = VM_ACCEL_TCG;
	snprintf(info->reason, sizeof(info->reason), "using tcg: %s", why);
	return 0;
}

/* Parse "NNNN.NNN MHz" at p into kHz. */
static unsigned long
parse_mhz(const char *p)
{
	unsigned long whole = 0, frac = 0, scale = 1000;

	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9')
		whole = whole * 10 + (unsigned long)(*p++ - '0');
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9' && scale > 1) {
			scale /= 10;
			frac += (unsigned long)(*p++ - '0') * scale;
		}
	}
	return whole * 1000 + frac;
}

unsigned long
accel_tsc_from_kmsg(const char *log)
{
	static const char refined[] = "tsc: Refined TSC clocksource calibration:";
	static const char detected[] = "tsc: Detected ";
	const char *p;

	/* The refined value is the more precise one; use it when present. */
	if ((p = strstr(log, refined)) != NULL)
		return parse_mhz(p + sizeof(refined) - 1);
	if ((p = strstr(log, detected)) != NULL)
		return parse_mhz(p + sizeof(detected) - 1);
	return 0;
}

unsigned long
accel_tsc_from_cpuinfo(const char *cpuinfo)
{
	const char *p = strstr(cpuinfo, "cpu MHz");

	if (p == NULL || (p = strchr(p, ':')) == NULL)
		return 0;
	return parse_mhz(p + 1);
}

/* CPUID leaf 0x15 gives the exact TSC frequency where the CPU reports it. */
static unsigned long
accel_tsc_from_cpuid(void)
{
	unsigned int eax, ebx, ecx, edx;

	if (__get_cpuid_max(0, NULL) < 0x15)
		return 0;
	__cpuid(0x15, eax, ebx, ecx, edx);
	if (eax == 0 || ebx == 0 || ecx == 0)
		return 0;
	return (unsigned long)((unsigned long long)ecx * ebx / eax / 1000);
}

unsigned long
accel_tsc_khz(void)
{
	char *buf;
	unsigned long khz;
	int len;

	if ((khz = accel_tsc_from_cpuid()) != 0)
		return khz;
	buf = xmalloc(ACCEL_KMSG_MAX + 1);
	len = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, ACCEL_KMSG_MAX);
	if (len > 0) {
		buf[len] = '\0';
		khz = accel_tsc_from_kmsg(buf);
	}
	free(buf);
	if (khz != 0)
		return khz;
	if (read_file("/proc/cpuinfo", ACCEL_CPUINFO_MAX, &buf, NULL, NULL) == 0) {
		khz = accel_tsc_from_cpuinfo(buf);
		free(buf);
	}
	return khz;
}
