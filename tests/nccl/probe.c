/*
 * Loads a built aws-ofi-nccl plugin and drives the start of its ncclNet v6 table as NCCL
 * does: init (with a logger that prints the plugin's lines), devices, getProperties of each
 * device, fini. Used by tests/nccl/run.sh:
 *
 *   probe <path to libnccl-net.so or libnccom-net.so>
 *
 * The two structures below are NCCL's net v6 ABI (ncclNet_v6_t's first members and
 * ncclNetProperties_v6_t), declared here so that nothing of the plugin is needed to build.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*logger_t)(int level, unsigned long flags, const char *file, int line,
			 const char *fmt, ...);

struct props_v6 {
	char *name;
	char *pci_path;
	uint64_t guid;
	int ptr_support;
	int reg_is_global;
	int speed; /* Mb/s */
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	size_t max_write_inline_size;
	size_t max_mr_key_size;
	int rma_supported;
};

struct net_v6 {
	const char *name;
	int (*init)(logger_t log);
	int (*fini)(void);
	int (*devices)(int *ndev);
	int (*get_properties)(int dev, struct props_v6 *props);
};

static const char *level_name(int level)
{
	static const char *names[] = { "NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE" };

	return level >= 0 && level < 6 ? names[level] : "?";
}

static int warnings;

static void logger(int level, unsigned long flags, const char *file, int line, const char *fmt,
		   ...)
{
	va_list ap;

	(void)flags;
	if (level == 2)
		warnings++;
	printf("plugin %s %s:%d: ", level_name(level), file ? file : "?", line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

int main(int argc, char **argv)
{
	void *h;
	struct net_v6 *net;
	int ndev = 0, ret;

	if (argc != 2) {
		fprintf(stderr, "usage: %s <plugin.so>\n", argv[0]);
		return 2;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "probe: dlopen: %s\n", dlerror());
		return 1;
	}
	net = dlsym(h, "ncclNetPlugin_v6");
	if (!net) {
		fprintf(stderr, "probe: no ncclNetPlugin_v6 in %s\n", argv[1]);
		return 1;
	}
	printf("probe: plugin \"%s\"\n", net->name);
	ret = net->init(logger);
	if (ret) {
		printf("probe: FAIL: init returned %d\n", ret);
		return 1;
	}
	ret = net->devices(&ndev);
	if (ret || ndev <= 0) {
		printf("probe: FAIL: devices returned %d, %d device(s)\n", ret, ndev);
		return 1;
	}
	for (int d = 0; d < ndev; d++) {
		struct props_v6 p = { 0 };

		ret = net->get_properties(d, &p);
		if (ret) {
			printf("probe: FAIL: getProperties(%d) returned %d\n", d, ret);
			return 1;
		}
		printf("probe: device %d: name %s, pciPath %s, guid %#llx, speed %d Mb/s, port %d, "
		       "ptrSupport %#x, regIsGlobal %d, maxComms %d, maxRecvs %d, max_mr_key_size "
		       "%zu, rma_supported %d\n",
		       d, p.name ? p.name : "(null)", p.pci_path ? p.pci_path : "(null)",
		       (unsigned long long)p.guid, p.speed, p.port, (unsigned)p.ptr_support,
		       p.reg_is_global, p.max_comms, p.max_recvs, p.max_mr_key_size,
		       p.rma_supported);
	}
	ret = net->fini ? net->fini() : 0;
	printf("probe: %d device(s), fini %d, %d warning line(s) from the plugin\n", ndev, ret,
	       warnings);
	return ret ? 1 : 0;
}
