/* fabric: libfabric 2.x API — extensions: provider-specific option names, fid export/import,
 * memory-monitor and logging import. */
#ifndef FI_EXT_H
#define FI_EXT_H

#include <stdbool.h>
#include <rdma/fabric.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_endpoint.h>
#include <rdma/providers/fi_prov.h>
#include <rdma/providers/fi_log.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Provider-specific values are negative: -(12-bit provider code << 16) upwards. */
#define FI_PROV_SPECIFIC_EFA (0xefa << 16)
#define FI_PROV_SPECIFIC_TCP (0x7cb << 16)

/* efa endpoint options, FI_OPT_ENDPOINT level (fi_efa(7)) */
enum {
	FI_OPT_EFA_RNR_RETRY = -FI_PROV_SPECIFIC_EFA,	/* size_t */
	FI_OPT_EFA_EMULATED_READ,			/* bool, getopt only */
	FI_OPT_EFA_EMULATED_WRITE,			/* bool, getopt only */
	FI_OPT_EFA_EMULATED_ATOMICS,			/* bool, getopt only */
	FI_OPT_EFA_USE_DEVICE_RDMA,			/* bool */
	FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES, /* bool */
	FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES,	/* bool */
	FI_OPT_EFA_HOMOGENEOUS_PEERS,			/* bool */
	FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV,		/* bool */
};

struct fi_fid_export {
	struct fid **fid;
	uint64_t flags;
	void *context;
};

static inline int fi_export_fid(struct fid *fid, uint64_t flags, struct fid **expfid,
				void *context)
{
	struct fi_fid_export exp;

	exp.fid = expfid;
	exp.flags = flags;
	exp.context = context;
	return fi_control(fid, FI_EXPORT_FID, &exp);
}

static inline int fi_import_fid(struct fid *fid, struct fid *expfid, uint64_t flags)
{
	return fid->ops->bind(fid, expfid, flags);
}

/* An application-supplied memory monitor, imported through fi_open("mr_cache"). */
struct fid_mem_monitor;

struct fi_ops_mem_monitor {
	size_t size;
	int (*start)(struct fid_mem_monitor *monitor);
	void (*stop)(struct fid_mem_monitor *monitor);
	int (*subscribe)(struct fid_mem_monitor *monitor, const void *addr, size_t len);
	void (*unsubscribe)(struct fid_mem_monitor *monitor, const void *addr, size_t len);
	bool (*valid)(struct fid_mem_monitor *monitor, const void *addr, size_t len);
};

struct fi_ops_mem_notify {
	size_t size;
	void (*notify)(struct fid_mem_monitor *monitor, const void *addr, size_t len);
};

struct fid_mem_monitor {
	struct fid fid;
	struct fi_ops_mem_monitor *export_ops;
	struct fi_ops_mem_notify *import_ops;
};

/* An application-supplied logger, imported through fi_open("logging"). */
#define FI_LOG_PROV_FILTERED (1ULL << 0)

struct fi_ops_log {
	size_t size;
	int (*enabled)(const struct fi_provider *prov, enum fi_log_level level,
		       enum fi_log_subsys subsys, uint64_t flags);
	int (*ready)(const struct fi_provider *prov, enum fi_log_level level,
		     enum fi_log_subsys subsys, uint64_t flags, uint64_t *showtime);
	void (*log)(const struct fi_provider *prov, enum fi_log_level level,
		    enum fi_log_subsys subsys, const char *func, int line, const char *msg);
};

struct fid_logging {
	struct fid fid;
	struct fi_ops_log *ops;
};

static inline int fi_import(uint32_t version, const char *name, void *attr, size_t attr_len,
			    uint64_t flags, struct fid *fid, void *context)
{
	struct fid *open_fid;
	int ret = fi_open(version, name, attr, attr_len, flags, &open_fid, context);

	if (ret != FI_SUCCESS)
		return ret;
	ret = fi_import_fid(open_fid, fid, flags);
	fi_close(open_fid);
	return ret;
}

static inline int fi_import_log(uint32_t version, uint64_t flags, struct fid_logging *log_fid)
{
	log_fid->fid.fclass = FI_CLASS_LOG;
	log_fid->ops->size = sizeof(struct fi_ops_log);
	return fi_import(version, "logging", NULL, 0, flags, &log_fid->fid, log_fid);
}

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_H */
