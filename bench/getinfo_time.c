/*
 * fi_getinfo call time: fi_getinfo + fi_freeinfo for one provider, repeated, on whichever
 * libfabric.so.1 the loader picks (make bench switches it by library path).
 * Usage: getinfo_time <provider> <calls>
 * Prints one line: "getinfo <provider> <microseconds per call> <libfabric version>".
 * Part of the fabric project.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rdma/fabric.h>

int main(int argc, char **argv)
{
	struct fi_info *hints, *info = NULL;
	struct timespec a, b;
	long calls;
	int i, ret;

	if (argc != 3) {
		fprintf(stderr, "usage: getinfo_time <provider> <calls>\n");
		return 2;
	}
	calls = atol(argv[2]);
	hints = fi_allocinfo();
	if (!hints)
		return 1;
	hints->fabric_attr->prov_name = strdup(argv[1]);
	hints->ep_attr->type = FI_EP_RDM;
	/* 1.17: the newest API both Debian's library and ours accept. The first call pays for provider discovery; measure the steady state. */
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	if (ret) {
		fprintf(stderr, "fi_getinfo(%s): %s\n", argv[1], fi_strerror(-ret));
		return 1;
	}
	fi_freeinfo(info);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < calls; i++) {
		ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
		if (ret)
			return 1;
		fi_freeinfo(info);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("getinfo %s %.2f %u.%u\n", argv[1],
	       ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e3 / calls,
	       FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
	fi_freeinfo(hints);
	return 0;
}
