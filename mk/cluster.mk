# A cluster of network-namespace hosts on one bridge (tests/cluster/cluster.sh, issue 30): Open
# MPI 4.1 (Debian) and MPICH (PyPI) jobs of 2 ranks on each of 4 hosts over efa, with the
# routes each endpoint chose checked (shm within a host, SRD between hosts), then loss, a link
# down and a killed host during allreduce loops. Every job has its row in RELIABILITY.md.
TEST_TARGETS    += test-cluster
DEBIAN_PACKAGES += iproute2 nftables util-linux openmpi-bin libopenmpi-dev python3-venv
CLUSTER_BIN     := $(BUILD)/cluster
# mk/mpi.mk's MPI_BIN and MPI_VENV (that fragment is read after this one).
CLUSTER_MPI     := $(BUILD)/mpi
CLUSTER_VENV    := $(BUILD)/venv

.PHONY: test-cluster

$(CLUSTER_BIN)/cluster_suite.ompi: tests/cluster/cluster_suite.c
	@mkdir -p $(CLUSTER_BIN)
	mpicc $(CFLAGS) -Wall -Wextra -o $@ $< -ldl

$(CLUSTER_BIN)/cluster_suite.mpich: tests/cluster/cluster_suite.c $(CLUSTER_VENV)/.installed
	@mkdir -p $(CLUSTER_BIN)
	$(CLUSTER_VENV)/bin/mpicc $(CFLAGS) -Wall -Wextra -o $@ $< -ldl

test-cluster: lib $(CLUSTER_MPI)/mpi_suite $(CLUSTER_VENV)/.installed \
		$(CLUSTER_BIN)/cluster_suite.ompi $(CLUSTER_BIN)/cluster_suite.mpich
	tests/cluster/cluster.sh $(LIBDIR) $(CLUSTER_VENV) $(CLUSTER_BIN) $(CLUSTER_MPI)/mpi_suite
