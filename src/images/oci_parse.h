/*
 * OCI image import, the pure half: the JSON documents of an OCI image
 * layout (index.json, image manifests, image config) and of a `docker
 * save` tarball (manifest.json), and the check every layer entry's path
 * passes before anything is written. No I/O here, so all of it is fuzzed
 * (fuzz/fuzz_oci.c). Specs: opencontainers/image-spec image-layout.md,
 * manifest.md, config.md, layer.md (whiteouts).
 */
#ifndef AIRLOCK_OCI_PARSE_H
#define AIRLOCK_OCI_PARSE_H

#include <stddef.h>

#define OCI_JSON_MAX		(4 * 1024 * 1024)	/* index, manifest, config */
#define OCI_LAYERS_MAX		256
#define OCI_ENV_MAX		256
#define OCI_ARGS_MAX		256
#define OCI_PATH_MAX		4096

/* How a layer blob is compressed; libarchive detects it, this is informational. */
struct oci_layer_ref {
	char	*blob;		/* path inside the image dir: blobs/sha256/<hex> or <id>/layer.tar */
	char	*digest;	/* "sha256:<hex>" to verify, or NULL (docker save v1.x layers) */
};

struct oci_image {
	char			*config_blob;	/* path inside the image dir */
	char			*config_digest;	/* NULL when not known (docker save) */
	struct oci_layer_ref	*layers;
	size_t			 nlayers;
};

struct oci_config {
	char	**env;		/* "KEY=value", as the config says */
	size_t	  nenv;
	char	**entrypoint;
	size_t	  nentrypoint;
	char	**cmd;
	size_t	  ncmd;
	char	 *workdir;	/* NULL: none */
	char	 *user;		/* NULL: none ("" is root) */
	char	 *os, *arch;
};

/*
 * index.json (or a nested image index): the image manifest to use. The
 * first linux/amd64 (or platform-less) image manifest wins; a nested index
 * is returned as such (*is_index = 1) for the caller to load and parse
 * again. *blob is blobs/sha256/<hex> and *digest "sha256:<hex>".
 */
int oci_parse_index(const char *text, size_t len, char **blob, char **digest, int *is_index,
    char **cause);
/* An OCI (or Docker schema 2) image manifest: config and layers. */
int oci_parse_manifest(const char *text, size_t len, struct oci_image *img, char **cause);
/* docker save's manifest.json: the first image's Config and Layers (paths in the tar). */
int oci_parse_docker_manifest(const char *text, size_t len, struct oci_image *img,
    char **cause);
int oci_parse_config(const char *text, size_t len, struct oci_config *cfg, char **cause);
void oci_image_free(struct oci_image *img);
void oci_config_free(struct oci_config *cfg);

/* "sha256:<64 lowercase hex>" -> "blobs/sha256/<hex>" (malloc'd), else NULL. */
char *oci_digest_blob(const char *digest);

/*
 * A path inside the image dir as named by docker save's manifest.json:
 * relative, no "..", no empty or "." components. 1 if acceptable.
 */
int oci_valid_member(const char *path);

enum oci_entry_kind {
	OCI_ENTRY_PLAIN,	/* write the entry at path */
	OCI_ENTRY_WHITEOUT,	/* delete path (the entry was dir/.wh.name) */
	OCI_ENTRY_OPAQUE,	/* path is a dir whose lower-layer contents go (dir/.wh..wh..opq) */
	OCI_ENTRY_ROOT,		/* the root itself ("./", "/"): metadata only, skipped */
};

/*
 * A layer entry's name: relative to the root (a leading "/" or "./" is
 * dropped, as tar does), components neither "" (collapsed) nor "." nor
 * "..", no NUL, at most OCI_PATH_MAX. *out (malloc'd) is the normalized
 * relative path; for whiteouts, the path that goes. -1 with a cause naming
 * what is wrong; the caller adds the layer and entry.
 */
int oci_entry_path(const char *name, char **out, enum oci_entry_kind *kind, char **cause);
/*
 * A hard link's target, in the same namespace as entry names (inside the
 * root, after the same normalization). A symlink's target is stored as
 * written: it is resolved only inside the root, never while extracting.
 */
int oci_link_path(const char *target, char **out, char **cause);

/* The start command from ENTRYPOINT + CMD, each word shell-quoted; NULL if both are empty. */
char *oci_start_command(const struct oci_config *cfg);

#endif
