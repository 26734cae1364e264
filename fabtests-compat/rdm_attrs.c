/*
 * rdm_attrs: the attributes and option answers that NCCL's libfabric plugin reads from efa,
 * checked as upstream efa gives them (one process, no peer):
 *
 *   - fi_info->nic of every efa RDM domain: no device name (the software device is no
 *     InfiniBand device), with FI_EFA_NIC_PCI set PCI bus attributes equal to the PCI
 *     function sysfs gives for the interface, else (and always on loopback) FI_BUS_UNKNOWN;
 *     link speed in bits/s from sysfs, state up;
 *   - FI_OPT_CUDA_API_PERMITTED: -FI_EINVAL, true or false (no CUDA library or device), on efa
 *     and shm endpoints;
 *   - fi_open_ops(fabric, FI_EFA_FEATURE_OPS): a query answering false for every name;
 *   - FI_HMEM: -FI_ENODATA from fi_getinfo, with an info-level log line saying why;
 *   - fi_mr_regattr with iface FI_HMEM_SYSTEM registers memory that an RMA write then fills.
 *
 * Built against Debian's 1.17 headers (which lack FI_OPT_CUDA_API_PERMITTED and
 * fi_ext_efa.h) and ours. Prints "rdm_attrs: libfabric <version>, ..." then one "ok:" line
 * per check, "skip:" with a reason for a check the host cannot make; exits 1 on a failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>
#include <rdma/fi_rma.h>
#if defined(__has_include)
#if __has_include(<rdma/fi_ext_efa.h>)
#include <rdma/fi_ext_efa.h>
#endif
#endif

/* Debian's 1.17 headers predate these: the values are libfabric's ABI. */
#ifndef FI_EFA_FEATURE_OPS
#define FI_EFA_FEATURE_OPS "efa feature ops"
struct fi_efa_feature_ops {
	bool (*query)(const char *feature);
};
#endif
#define OPT_CUDA_API_PERMITTED 10
#if FI_MAJOR_VERSION >= 2
_Static_assert(FI_OPT_CUDA_API_PERMITTED == OPT_CUDA_API_PERMITTED, "FI_OPT_CUDA_API_PERMITTED");
#endif

static const char *prog = "rdm_attrs";
static int failures;

#define FAIL(...)                                              \
	do {                                                   \
		fprintf(stderr, "%s: FAIL: ", prog);           \
		fprintf(stderr, __VA_ARGS__);                  \
		fputc('\n', stderr);                           \
		failures++;                                    \
	} while (0)

#define DIE(...)                                               \
	do {                                                   \
		fprintf(stderr, "%s: ", prog);                 \
		fprintf(stderr, __VA_ARGS__);                  \
		fputc('\n', stderr);                           \
		exit(1);                                       \
	} while (0)

#define CHECK(call)                                                                   \
	do {                                                                          \
		int ret_ = (int)(call);                                               \
		if (ret_)                                                             \
			DIE("%s: %s (%d)", #call, fi_strerror(-ret_), ret_);          \
	} while (0)

/* Expects `got` to be `want` (0 or a negative fi_errno). */
static void expect_ret(const char *what, int got, int want)
{
	if (got != want)
		FAIL("%s: got %d (%s), expected %d (%s)", what, got, fi_strerror(-got), want,
		     fi_strerror(-want));
	else
		printf("ok: %s -> %d%s%s\n", what, got, got ? " " : "",
		       got ? fi_strerror(-got) : "");
}

static struct fi_info *rdm_info(const char *prov, const char *domain, uint64_t caps,
				int *ret)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;

	if (!hints)
		DIE("fi_allocinfo failed");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	if (prov)
		hints->fabric_attr->prov_name = strdup(prov);
	if (domain)
		hints->domain_attr->name = strdup(domain);
	*ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints,
			  &info);
	fi_freeinfo(hints);
	return *ret ? NULL : info;
}

/* ---- NIC attributes against sysfs ---- */

/* The PCI function under /sys/class/net/<ifname>: 1 found, 0 none (a virtual interface). */
static int sysfs_pci(const char *ifname, unsigned *dom, unsigned *bus, unsigned *dev,
		     unsigned *fn, char *why, size_t whylen)
{
	char link[PATH_MAX], real[PATH_MAX];
	int found = 0;

	snprintf(link, sizeof link, "/sys/class/net/%s/device", ifname);
	if (!realpath(link, real)) {
		snprintf(why, whylen, "%s: %s (no device under the interface)", link,
			 strerror(errno));
		return 0;
	}
	if (strncmp(real, "/sys/devices/pci", 16) != 0) {
		snprintf(why, whylen, "%s is %s, not on a PCI bus", link, real);
		return 0;
	}
	/* The last path component that is a PCI address is the function (a virtio NIC's
	 * device is the virtio device below it). */
	for (char *c = strtok(real, "/"); c; c = strtok(NULL, "/")) {
		unsigned a, b, d, f;
		char tail;

		if (sscanf(c, "%x:%x:%x.%x%c", &a, &b, &d, &f, &tail) == 4) {
			*dom = a, *bus = b, *dev = d, *fn = f;
			found = 1;
		}
	}
	if (!found)
		snprintf(why, whylen, "no PCI address in the path of %s", link);
	return found;
}

/* /sys/class/net/<ifname>/speed in bits/s; 0 when unknown (-1) or unreadable. */
static uint64_t sysfs_speed(const char *ifname)
{
	char path[PATH_MAX];
	long long mbps = 0;
	FILE *f;

	snprintf(path, sizeof path, "/sys/class/net/%s/speed", ifname);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%lld", &mbps) != 1 || mbps < 0)
		mbps = 0;
	fclose(f);
	return (uint64_t)mbps * 1000000ull;
}

static void check_nics(void)
{
	struct fi_info *list, *i;
	int ret, pci_checked = 0, lo_checked = 0;
	const char *pci_env = getenv("FI_EFA_NIC_PCI");
	int pci_wanted = pci_env && (!strcmp(pci_env, "1") || !strcasecmp(pci_env, "yes") ||
				      !strcasecmp(pci_env, "true") || !strcasecmp(pci_env, "on"));
	char skip[2 * PATH_MAX + 64] = "no efa domain on an interface other than loopback";

	list = rdm_info("efa", NULL, FI_MSG, &ret);
	if (!list)
		DIE("fi_getinfo(efa, RDM): %s (%d)", fi_strerror(-ret), ret);
	for (i = list; i; i = i->next) {
		const char *dn = i->domain_attr->name;
		char ifname[64];
		size_t n;

		if (!dn || strncmp(dn, "srd_", 4) || (n = strlen(dn)) < 9 ||
		    strcmp(dn + n - 4, "-rdm")) {
			FAIL("efa RDM domain named %s, not srd_<interface>-rdm", dn ? dn : "(null)");
			continue;
		}
		snprintf(ifname, sizeof ifname, "%.*s", (int)(n - 8), dn + 4);
		if (!i->nic || !i->nic->device_attr || !i->nic->bus_attr || !i->nic->link_attr) {
			FAIL("%s: fi_info->nic or one of its attributes is NULL", dn);
			continue;
		}
		struct fi_device_attr *d = i->nic->device_attr;
		struct fi_bus_attr *b = i->nic->bus_attr;
		struct fi_link_attr *l = i->nic->link_attr;

		/* No name: a consumer must not look it up as an InfiniBand device. */
		if (d->name)
			FAIL("%s: device_attr->name is \"%s\", expected NULL", dn, d->name);
		if (!d->vendor_id || strcmp(d->vendor_id, "0x1d0f"))
			FAIL("%s: vendor_id %s", dn, d->vendor_id ? d->vendor_id : "(null)");
		if (l->state != FI_LINK_UP)
			FAIL("%s: link state %d, expected FI_LINK_UP", dn, (int)l->state);
		if (l->mtu == 0 || l->mtu > 65535)
			FAIL("%s: link mtu %zu", dn, l->mtu);
		if ((uint64_t)l->speed != sysfs_speed(ifname))
			FAIL("%s: link speed %zu, sysfs says %llu bit/s", dn, l->speed,
			     (unsigned long long)sysfs_speed(ifname));

		unsigned dom = 0, bus = 0, dev = 0, fn = 0;
		char why[2 * PATH_MAX + 64];

		int pci = sysfs_pci(ifname, &dom, &bus, &dev, &fn, why, sizeof why);

		if (pci && !pci_wanted) {
			/* Off by default (FI_EFA_NIC_PCI): MPICH asserts on a PCI NIC its hwloc
			 * cannot find. */
			if (b->bus_type != FI_BUS_UNKNOWN)
				FAIL("%s: bus type %d without FI_EFA_NIC_PCI", dn, (int)b->bus_type);
			else
				printf("ok: %s: FI_BUS_UNKNOWN without FI_EFA_NIC_PCI (sysfs: PCI "
				       "%04x:%02x:%02x.%x)\n",
				       dn, dom, bus, dev, fn);
			pci_checked++;
		} else if (pci) {
			if (b->bus_type != FI_BUS_PCI || b->attr.pci.domain_id != dom ||
			    b->attr.pci.bus_id != bus || b->attr.pci.device_id != dev ||
			    b->attr.pci.function_id != fn)
				FAIL("%s: bus type %d, pci %04x:%02x:%02x.%x; sysfs says PCI "
				     "%04x:%02x:%02x.%x",
				     dn, (int)b->bus_type, b->attr.pci.domain_id, b->attr.pci.bus_id,
				     b->attr.pci.device_id, b->attr.pci.function_id, dom, bus, dev,
				     fn);
			else
				printf("ok: %s: FI_BUS_PCI %04x:%02x:%02x.%x, speed %zu bit/s, mtu "
				       "%zu, link up, no device name\n",
				       dn, dom, bus, dev, fn, l->speed, l->mtu);
			pci_checked++;
		} else {
			if (b->bus_type != FI_BUS_UNKNOWN)
				FAIL("%s: bus type %d but %s", dn, (int)b->bus_type, why);
			else if (!strcmp(ifname, "lo")) {
				printf("ok: %s: FI_BUS_UNKNOWN, speed %zu, mtu %zu, link up, no "
				       "device name\n",
				       dn, l->speed, l->mtu);
				lo_checked++;
			} else {
				snprintf(skip, sizeof skip, "%s", why);
			}
		}
	}
	fi_freeinfo(list);
	if (!lo_checked)
		FAIL("no srd_lo-rdm domain listed");
	if (!pci_checked)
		printf("skip: PCI bus attributes: %s\n", skip);
}

/* ---- FI_HMEM and the log line that says why ---- */

static int hmem_line_seen;

static int log_enabled(const struct fi_provider *prov, enum fi_log_level level,
		       enum fi_log_subsys subsys, uint64_t flags)
{
	(void)prov, (void)subsys, (void)flags;
	return level <= FI_LOG_INFO;
}

static int log_ready(const struct fi_provider *prov, enum fi_log_level level,
		     enum fi_log_subsys subsys, uint64_t flags, uint64_t *showtime)
{
	(void)prov, (void)level, (void)subsys, (void)flags, (void)showtime;
	return 1;
}

static void log_line(const struct fi_provider *prov, enum fi_log_level level,
		     enum fi_log_subsys subsys, const char *func, int line, const char *msg)
{
	(void)prov, (void)subsys, (void)func, (void)line;
	if (level == FI_LOG_INFO && strstr(msg, "FI_HMEM") &&
	    strstr(msg, "no device-memory interface"))
		hmem_line_seen = 1;
	if (level == FI_LOG_WARN && !strstr(msg, "FI_OPT_CUDA_API_PERMITTED") &&
	    !strstr(msg, "returned -61"))
		fprintf(stderr, "%s: library warning: %s", prog, msg);
}

static struct fi_ops_log log_ops = {
	.size = sizeof(struct fi_ops_log),
	.enabled = log_enabled,
	.ready = log_ready,
	.log = log_line,
};
static struct fid_logging log_fid = { .ops = &log_ops };

static void check_hmem(void)
{
	int ret;

	CHECK(fi_import_log(FI_VERSION(1, 14), 0, &log_fid));
	rdm_info("efa", NULL, FI_MSG | FI_HMEM, &ret);
	expect_ret("fi_getinfo(efa, FI_MSG | FI_HMEM)", ret, -FI_ENODATA);
	if (!hmem_line_seen)
		FAIL("no info-level log line saying no device-memory interface is available");
	else
		printf("ok: FI_HMEM refusal logged at info level\n");
	rdm_info(NULL, NULL, FI_MSG | FI_HMEM, &ret);
	expect_ret("fi_getinfo(any provider, FI_MSG | FI_HMEM)", ret, -FI_ENODATA);
}

/* ---- endpoint option, feature ops, registration ---- */

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
};

static void res_open(struct res *r, const char *prov, const char *domain, uint64_t caps)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	int ret;

	memset(r, 0, sizeof *r);
	r->info = rdm_info(prov, domain, caps, &ret);
	if (!r->info)
		DIE("fi_getinfo(%s, %s): %s (%d)", prov, domain ? domain : "any domain",
		    fi_strerror(-ret), ret);
	CHECK(fi_fabric(r->info->fabric_attr, &r->fabric, NULL));
	CHECK(fi_domain(r->fabric, r->info, &r->domain, NULL));
	CHECK(fi_cq_open(r->domain, &cq_attr, &r->cq, NULL));
	CHECK(fi_av_open(r->domain, &av_attr, &r->av, NULL));
	CHECK(fi_endpoint(r->domain, r->info, &r->ep, NULL));
	CHECK(fi_ep_bind(r->ep, &r->av->fid, 0));
	CHECK(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV));
}

static void res_close(struct res *r)
{
	CHECK(fi_close(&r->ep->fid));
	CHECK(fi_close(&r->av->fid));
	CHECK(fi_close(&r->cq->fid));
	CHECK(fi_close(&r->domain->fid));
	CHECK(fi_close(&r->fabric->fid));
	fi_freeinfo(r->info);
}

static void check_cuda_option(struct res *r, const char *label)
{
	bool yes = true, no = false;
	int wide = 1;
	char what[128];

	snprintf(what, sizeof what, "%s: fi_setopt(FI_OPT_CUDA_API_PERMITTED, true)", label);
	expect_ret(what, fi_setopt(&r->ep->fid, FI_OPT_ENDPOINT, OPT_CUDA_API_PERMITTED, &yes,
				   sizeof yes),
		   -FI_EINVAL);
	snprintf(what, sizeof what, "%s: fi_setopt(FI_OPT_CUDA_API_PERMITTED, false)", label);
	expect_ret(what, fi_setopt(&r->ep->fid, FI_OPT_ENDPOINT, OPT_CUDA_API_PERMITTED, &no,
				   sizeof no),
		   -FI_EINVAL);
	snprintf(what, sizeof what, "%s: fi_setopt(FI_OPT_CUDA_API_PERMITTED, an int)", label);
	expect_ret(what, fi_setopt(&r->ep->fid, FI_OPT_ENDPOINT, OPT_CUDA_API_PERMITTED, &wide,
				   sizeof wide),
		   -FI_EINVAL);
}

static void check_feature_ops(struct res *efa, struct res *shm)
{
	struct fi_efa_feature_ops *ops = NULL;
	void *other = NULL;
	const char *names[] = { "mixed_hmem_iov", "", "no such feature", NULL };

	expect_ret("fi_open_ops(efa fabric, FI_EFA_FEATURE_OPS)",
		   fi_open_ops(&efa->fabric->fid, FI_EFA_FEATURE_OPS, 0, (void **)&ops, NULL), 0);
	if (!ops || !ops->query) {
		FAIL("FI_EFA_FEATURE_OPS gave no query function");
		return;
	}
	for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
		if (ops->query(names[k]))
			FAIL("feature query(%s) is true", names[k] ? names[k] : "NULL");
		else
			printf("ok: feature query(%s) -> false\n", names[k] ? names[k] : "NULL");
	}
	expect_ret("fi_open_ops(efa fabric, \"no such ops\")",
		   fi_open_ops(&efa->fabric->fid, "no such ops", 0, &other, NULL), -FI_ENOSYS);
	expect_ret("fi_open_ops(efa fabric, FI_EFA_FEATURE_OPS, flags 1)",
		   fi_open_ops(&efa->fabric->fid, FI_EFA_FEATURE_OPS, 1, &other, NULL),
		   -FI_EINVAL);
	expect_ret("fi_open_ops(efa domain, FI_EFA_FEATURE_OPS)",
		   fi_open_ops(&efa->domain->fid, FI_EFA_FEATURE_OPS, 0, &other, NULL),
		   -FI_ENOSYS);
	expect_ret("fi_open_ops(shm fabric, FI_EFA_FEATURE_OPS)",
		   fi_open_ops(&shm->fabric->fid, FI_EFA_FEATURE_OPS, 0, &other, NULL),
		   -FI_ENOSYS);
}

/* Registers two buffers with fi_mr_regattr(FI_HMEM_SYSTEM), writes one into the other over
 * the endpoint (to itself) and compares. */
static void check_regattr(struct res *r)
{
	enum { LEN = 8192 };
	uint8_t *src = malloc(LEN), *dst = malloc(LEN);
	struct iovec siov = { src, LEN }, diov = { dst, LEN };
	struct fi_mr_attr attr;
	struct fid_mr *smr, *dmr, *bad = NULL;
	char name[64];
	size_t namelen = sizeof name;
	fi_addr_t self;
	struct fi_cq_entry e;
	int ret;

	if (!src || !dst)
		DIE("out of memory");
	for (size_t k = 0; k < LEN; k++)
		src[k] = (uint8_t)(k * 7 + 3), dst[k] = 0;
	memset(&attr, 0, sizeof attr);
	attr.mr_iov = &siov;
	attr.iov_count = 1;
	attr.access = FI_WRITE | FI_READ | FI_SEND | FI_RECV;
	attr.iface = FI_HMEM_SYSTEM;
	expect_ret("fi_mr_regattr(FI_HMEM_SYSTEM, local)", fi_mr_regattr(r->domain, &attr, 0, &smr),
		   0);
	attr.mr_iov = &diov;
	attr.access = FI_REMOTE_WRITE | FI_REMOTE_READ;
	expect_ret("fi_mr_regattr(FI_HMEM_SYSTEM, remote)", fi_mr_regattr(r->domain, &attr, 0, &dmr),
		   0);
	if (failures)
		return;
	attr.iface = FI_HMEM_CUDA;
	ret = fi_mr_regattr(r->domain, &attr, 0, &bad);
	expect_ret("fi_mr_regattr(FI_HMEM_CUDA)", ret, -FI_ENOSYS);
	if (!ret)
		fi_close(&bad->fid);

	CHECK(fi_enable(r->ep));
	CHECK(fi_getname(&r->ep->fid, name, &namelen));
	if (fi_av_insert(r->av, name, 1, &self, 0, NULL) != 1)
		DIE("fi_av_insert of the endpoint's own name failed");
	uint64_t addr = r->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? (uintptr_t)dst : 0;
	do
		ret = (int)fi_write(r->ep, src, LEN, fi_mr_desc(smr), self, addr, fi_mr_key(dmr),
				    NULL);
	while (ret == -FI_EAGAIN && fi_cq_read(r->cq, &e, 1) <= 0);
	CHECK(ret);
	time_t end = time(NULL) + 30;

	for (;;) {
		ret = (int)fi_cq_read(r->cq, &e, 1);
		if (ret == 1)
			break;
		if (ret != -FI_EAGAIN) {
			struct fi_cq_err_entry err = { 0 };

			fi_cq_readerr(r->cq, &err, 0);
			DIE("fi_write completion: %d (%s), err %d", ret, fi_strerror(-ret),
			    err.err);
		}
		if (time(NULL) > end)
			DIE("fi_write to itself did not complete in 30 s");
	}
	if (memcmp(src, dst, LEN))
		FAIL("the RMA write into the FI_HMEM_SYSTEM region left other bytes");
	else
		printf("ok: fi_write of %d bytes between FI_HMEM_SYSTEM regions\n", LEN);
	CHECK(fi_close(&smr->fid));
	CHECK(fi_close(&dmr->fid));
	free(src);
	free(dst);
}

int main(void)
{
	struct res efa, shm;

	fprintf(stderr, "%s: libfabric %u.%u, provider efa, domain srd_lo-rdm, nic attributes and "
			"option answers\n",
		prog, FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
	check_hmem();
	check_nics();
	res_open(&efa, "efa", "srd_lo-rdm", FI_MSG | FI_RMA);
	res_open(&shm, "shm", NULL, FI_MSG);
	check_cuda_option(&efa, "efa");
	check_cuda_option(&shm, "shm");
	check_feature_ops(&efa, &shm);
	check_regattr(&efa);
	res_close(&shm);
	res_close(&efa);
	if (failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", prog, failures);
		return 1;
	}
	return 0;
}
