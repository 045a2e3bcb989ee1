/*
 * airlockd configuration: one struct, filled from defaults, then the config
 * file (key = value lines), then AIRLOCK_* environment variables, then
 * command-line flags. Every setting is bounded and named in errors as
 * "file:line: key: ...".
 */
#ifndef AIRLOCK_CONFIG_H
#define AIRLOCK_CONFIG_H

#include <jansson.h>

#include "vm/accel.h"

#define CONFIG_DEFAULT_FILE	"/etc/airlock/airlockd.conf"

/*
 * File descriptors airlockd budgets besides the API's connections: per
 * sandbox (QMP, console, agent channel, pidfd, logs, with room to spare)
 * and for itself (store, listeners, gateway control, template builds).
 * RLIMIT_NOFILE is raised to cover them at start.
 */
#define AIRLOCKD_FDS_PER_SANDBOX	32
#define AIRLOCKD_FDS_BASE		256

/* What happens to a sandbox whose guest agent stayed unhealthy for unhealthy_grace_s. */
enum config_on_unhealthy { CONFIG_UNHEALTHY_FAIL, CONFIG_UNHEALTHY_RESTART };

struct config {
	/*
	 * What this airlockd is (docs/architecture.md "Processes"): direct
	 * (one host: a privileged worker that starts its unprivileged API
	 * front), api (the front alone) or worker.
	 */
	char		*role;
	int		 api_uid;		/* direct mode: the front's uid and gid */
	/*
	 * The cluster roles (docs/cluster.md): a worker's name (default: the
	 * host name; direct mode's is ""), where it serves the API replicas
	 * (mTLS) and the address they dial, its labels ("k=v,k=v"), the plain
	 * health listener for probes, and the cluster CA with this member's
	 * certificate and key (airlock cluster ca|cert).
	 */
	char		*worker_name;
	char		*worker_listen;
	char		*advertise;
	char		*worker_labels;
	char		*health_listen;
	char		*cluster_ca;
	char		*cluster_cert;
	char		*cluster_key;
	/*
	 * SIGTERM suspends every sandbox to disk within this, then exits
	 * (keep it under the supervisor's stop timeout: systemd's
	 * TimeoutStopSec, a pod's terminationGracePeriodSeconds).
	 */
	int		 shutdown_deadline_s;
	/* The key sealing secrets at rest (default DATA/secrets.key; a cluster's workers share one). */
	char		*secrets_key;
	char		*listen_host;
	int		 listen_port;
	char		*data_dir;
	char		*store_url;		/* default sqlite:$data_dir/state.db */
	enum vm_accel	 accel;
	int		 default_vcpus;
	int		 default_memory_mb;
	long		 default_idle_timeout_s;
	int		 sweep_interval_s;	/* idle and lifetime checks */
	int		 idle_cpu_pct;		/* guest CPU (% of one vCPU) that is activity; 0: ignore */
	int		 max_sandboxes;
	/*
	 * Guest memory (MiB) this host's VMs may hold together: sandboxes,
	 * pool members, forks (sbm_worker.c); 0: the host's RAM less an
	 * eighth (at least 1 GiB) for itself. Creates past it answer 503.
	 */
	int		 max_memory_mb;
	int		 max_parallel_boots;	/* 0: one per CPU */
	int		 http_conns_max;	/* API connections (docs/security.md) */
	int		 http_conns_per_addr;	/* per client IPv4 / IPv6 /64; 0: no cap */
	int		 log_json;		/* structured JSON logs */
	/* Health of running sandboxes (docs/architecture.md "Health"). */
	int		 health_interval_s;	/* probe period per sandbox; 0: no probes */
	int		 health_timeout_s;	/* an agent ping unanswered this long: unhealthy */
	int		 unhealthy_grace_s;	/* unhealthy this long: on_unhealthy */
	enum config_on_unhealthy on_unhealthy;
	/* on_unhealthy = restart: at most restart_max in a row, each within restart_window_s. */
	int		 restart_max;
	int		 restart_window_s;
	/* Egress gateway (docs/operations.md "Egress"). */
	char		*gateway_bin;		/* default: beside airlockd */
	char		*gateway_resolver;	/* upstream DNS "IP[:port]"; default resolv.conf */
	char		*gateway_upstream_ca;	/* extra CA bundle trusted for upstream TLS */
	char		*gateway_netns;		/* netns path the gateway dials from */
	char		*gateway_internal;	/* operator exceptions "cidr[:port],..." */
	int		 gateway_rate_rps;	/* per sandbox default, 0 = unlimited */
	int		 gateway_rate_bps;
	int		 gateway_threads;	/* event-loop workers; 0 = online cores */
	int		 log_debug;
	/* The API over TLS (docs/operations.md "TLS"): off, ca (minted), file. */
	char		*tls;
	char		*tls_cert;		/* tls = file: PEM chain */
	char		*tls_key;
	/*
	 * The E2B front's sandbox domain (docs/e2b.md): API answers carry it,
	 * "{port}-{id}.{domain}" Host names route to sandboxes, and tls = ca
	 * mints api.{domain} and *.{domain} into the API certificate.
	 */
	char		*e2b_domain;
	long		 console_max;		/* retained console bytes per sandbox; 0: VM_CONSOLE_MAX */
	/*
	 * Disk (docs/vm-engine.md "Disk bounds"): creates, resumes and template
	 * builds are refused while the data dir has less than this free, so
	 * running guests never meet a full host; 0 disables the floor.
	 */
	int		 disk_free_floor_mb;
	int		 max_disk_mb;		/* largest per-sandbox disk_mb (and volume size_mb) */
	/* Template builds (docs/templates.md): step cache budget, context upload cap. */
	int		 template_cache_mb;
	int		 template_context_max_mb;
	int		 template_upload_max_mb;	/* an imported image's tarball */
	/*
	 * Warm pools (docs/architecture.md "Create tiers"): "TEMPLATE=SIZE,..."
	 * or "auto" (the base template, sized to the host); NULL: none.
	 */
	char		*pool;
	int		 pool_memory_mb;	/* members' guest RAM + spares' PSS; 0: RAM/4 */
	int		 pool_refills;		/* fills/builds at once; 0: cores - 1 (min 1) */
	/*
	 * Spare VMMs per pool (the spare tier): jailed QEMU processes waiting
	 * with -incoming defer for the pool's base; 0: none.
	 */
	int		 pool_spares;
	/*
	 * Admission per sandbox (docs/security.md "Admission"): concurrent
	 * exec calls and open streams (exec, reattach, watch); more answer 429.
	 */
	int		 max_execs_per_sandbox;
	/* Requests per second per API key, and the burst above it; 0: no limit. */
	int		 api_rate_per_key;
	int		 api_burst_per_key;
	int		 max_streams_per_sandbox;
	/*
	 * KiB per second of process output a sandbox's API streams carry
	 * together (exec, reattach; api_stream.c); 0: no limit.
	 */
	int		 stream_rate_per_sandbox;
	/*
	 * CPU per sandbox (vm_cgroup.h): the cgroup weight every sandbox gets
	 * (v2 units, 100 = the kernel's default) and the cap, in percent of
	 * one host core per vCPU.
	 */
	int		 cpu_weight;
	int		 cpu_limit_pct;
};

#define CONFIG_POOL_MAX		32	/* templates with a pool */
#define CONFIG_POOL_SIZE_MAX	256
#define CONFIG_POOL_SPARES_MAX	16	/* spare VMMs per pool */

struct config_pool {
	char		 template_name[64];
	int		 size;
};

/*
 * Parse a pool setting: "auto" gives n = 1 with size -1 (the daemon sizes
 * it) for template "base"; "" or "none" gives n = 0.
 */
int config_pool_parse(const char *s, struct config_pool *out, size_t max, size_t *n,
    char **cause);

void config_defaults(struct config *c);
/* Parse a config file; a missing default file is fine, a missing explicit one is not. */
int config_load_file(struct config *c, const char *path, int must_exist, char **cause);
int config_load_env(struct config *c, char **cause);
/* Set one key from a string (shared by file, env and flags). */
int config_set(struct config *c, const char *key, const char *value, char **cause);
void config_free(struct config *c);

/*
 * worker_labels' value, "k=v,k=v" (keys a-z 0-9 . _ / -, values A-Z a-z 0-9
 * . _ -, 63 characters each, at most CONFIG_LABELS_MAX) as a JSON object;
 * NULL with a cause when malformed. "" or NULL: no labels.
 */
#define CONFIG_LABELS_MAX	32
json_t *config_labels(const char *s, char **cause);

#endif
