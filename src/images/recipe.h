/*
 * Template recipes: a JSON file describing a root filesystem (docs/templates.md).
 * Parsing is strict: unknown fields and bad values are errors naming the field.
 */
#ifndef AIRLOCK_RECIPE_H
#define AIRLOCK_RECIPE_H

#include <stddef.h>

#define RECIPE_FILE_MAX		(1024 * 1024)
#define RECIPE_PACKAGES_MAX	512
#define RECIPE_FILES_MAX	1024
#define RECIPE_ENV_MAX		256
#define RECIPE_RUN_MAX		256
#define RECIPE_DISK_MB_MIN	256
#define RECIPE_DISK_MB_MAX	(1024 * 1024)
#define RECIPE_DISK_MB_DEFAULT	4096
#define RECIPE_ALLOW_MAX	64
#define RECIPE_STEP_TIMEOUT_S_DEFAULT	1800
#define RECIPE_STEP_TIMEOUT_S_MAX	(6 * 3600)
#define RECIPE_READY_TIMEOUT_DEFAULT	120	/* s from boot to ready */
#define RECIPE_READY_TIMEOUT_MAX	3600

struct recipe_file {
	char		*src;		/* absolute on the host (resolved against the recipe dir) */
	char		*dst;		/* absolute in the guest, normalized */
	unsigned	 mode;		/* permission bits */
};

struct recipe_env {
	char		*key;
	char		*value;
};

struct recipe {
	char			*distro;	/* "debian" */
	char			*suite;		/* "bookworm" */
	char			*variant;	/* debootstrap variant, "minbase" */
	char			*mirror;
	char			**packages;	/* sorted, unique */
	size_t			 npackages;
	char			*user_name;	/* NULL: no extra user */
	unsigned		 user_uid;
	int			 user_sudo;
	struct recipe_file	*files;
	size_t			 nfiles;
	struct recipe_env	*env;
	size_t			 nenv;
	char			**run;
	size_t			 nrun;
	char			*start;		/* start command, NULL for none */
	char			*start_user;	/* who runs it (an image's USER); NULL: user_name, else root */
	unsigned		 ready_port;	/* ready when this guest port accepts, or */
	char			*ready_cmd;	/* ... when this exits 0; neither: once started */
	unsigned		 ready_timeout_s;	/* boot to ready, else the create fails */
	char			*workdir;
	unsigned		 disk_size_mb;
	/* Run steps (images/template_steps.h): */
	char			*base_template;	/* "template": build on this one, no debootstrap */
	char			**allow;	/* hosts run steps may reach; none: the mirror's */
	size_t			 nallow;
	unsigned		 step_timeout_s;
	char			 sha256[65];	/* of the recipe file bytes */
};

/* Parse text (from a file in base_dir). On error: -1, cause names the field. */
int recipe_parse(const char *text, size_t len, const char *base_dir, struct recipe *r,
    char **cause);
int recipe_load(const char *path, struct recipe *r, char **cause);
void recipe_free(struct recipe *r);

/* Key for the cached debootstrap tree: depends on distro, suite, variant, mirror, packages. */
void recipe_bootstrap_key(const struct recipe *r, char out[65]);

/* Validators shared with other boundaries. */
int recipe_valid_package(const char *name);
int recipe_valid_env_key(const char *key);
/* Normalize an absolute guest path (collapse //, reject . and ..); malloc'd or NULL. */
char *recipe_guest_path(const char *path);

#endif
