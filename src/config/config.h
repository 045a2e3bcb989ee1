/*
 * airlockd configuration: one struct, filled from defaults, then the config
 * file (key = value lines), then AIRLOCK_* environment variables, then
 * command-line flags. Every setting is bounded and named in errors as
 * "file:line: key: ...".
 */
#ifndef AIRLOCK_CONFIG_H
#define AIRLOCK_CONFIG_H

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
	int		 max_parallel_boots;	/* 0: one per CPU */
	int		 http_conns_max;	/* API connections (docs/security.md) */
	int		 http_conns_per_addr;	/* per client IPv4 / IPv6 /64; 0: no cap */
	int		 log_json;		/* structured JSON logs */
	/* Health of running sandboxes (docs/architecture.md "Health"). */
	int		 health_interval_s;	/* probe period per sandbox; 0: no probes */
	int		 health_timeout_s;	/* an agent ping unanswered this long: unhealthy */
	int		 unhealthy_grace_s;	/* unhealthy this long: on_unhealthy */
	enum config_on_unhealthy on_unhealthy;
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
	long		 console_max;		/* retained console bytes per sandbox; 0: VM_CONSOLE_MAX */
	/*
	 * Disk (docs/vm-engine.md "Disk bounds"): creates, resumes and template
	 * builds are refused while the data dir has less than this free, so
	 * running guests never meet a full host; 0 disables the floor.
	 */
	int		 disk_free_floor_mb;
	int		 max_disk_mb;		/* largest per-sandbox disk_mb */
};

void config_defaults(struct config *c);
/* Parse a config file; a missing default file is fine, a missing explicit one is not. */
int config_load_file(struct config *c, const char *path, int must_exist, char **cause);
int config_load_env(struct config *c, char **cause);
/* Set one key from a string (shared by file, env and flags). */
int config_set(struct config *c, const char *key, const char *value, char **cause);
void config_free(struct config *c);

#endif
