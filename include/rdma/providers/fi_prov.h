/* fabric: libfabric 2.x API — what a provider is, and configuration parameters. */
#ifndef FI_PROV_H
#define FI_PROV_H

#include <rdma/fabric.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A loadable provider "foo" is a library named libfoo-fi.so. */
#define FI_LIB_EXTENSION "fi"
#define FI_LIB_SUFFIX FI_LIB_EXTENSION ".so"

/* The entry point a loadable provider exports. */
#define FI_EXT_INI \
	__attribute__((visibility("default"), EXTERNALLY_VISIBLE)) struct fi_provider *fi_prov_ini(void)

struct fi_provider {
	uint32_t version;
	uint32_t fi_version;
	struct fi_context context;
	const char *name;
	int (*getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
		       const struct fi_info *hints, struct fi_info **info);
	int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
	void (*cleanup)(void);
};

/* Declares parameter FI_<PROVIDER>_<NAME> (FI_<NAME> for the core when provider is NULL). */
int fi_param_define(const struct fi_provider *provider, const char *param_name,
		    enum fi_param_type type, const char *help_string_fmt, ...);

/* Reads a declared parameter from the environment; -FI_ENODATA when it is not set. */
int fi_param_get(struct fi_provider *provider, const char *param_name, void *value);

static inline int fi_param_get_str(struct fi_provider *provider, const char *param_name,
				   char **value)
{
	return fi_param_get(provider, param_name, value);
}

static inline int fi_param_get_int(struct fi_provider *provider, const char *param_name,
				   int *value)
{
	return fi_param_get(provider, param_name, value);
}

static inline int fi_param_get_bool(struct fi_provider *provider, const char *param_name,
				    int *value)
{
	return fi_param_get(provider, param_name, value);
}

static inline int fi_param_get_size_t(struct fi_provider *provider, const char *param_name,
				      size_t *value)
{
	return fi_param_get(provider, param_name, value);
}

#ifdef __cplusplus
}
#endif

#endif /* FI_PROV_H */
