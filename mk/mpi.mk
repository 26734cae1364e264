# Open MPI from Debian (4.1, linked against the 1.x ABI) and MPICH from PyPI (5.x, ch4:ofi,
# with mpi4py and numpy in a virtual environment) over our library: 2 and 4 ranks over efa
# (local shm on and off) and shm, by library path and by LD_PRELOAD (tests/mpi/run.sh).
TEST_TARGETS    += test-mpi
DEBIAN_PACKAGES += openmpi-bin libopenmpi-dev python3-venv
MPI_BIN         := $(BUILD)/mpi
MPI_VENV        := $(BUILD)/venv
# Pinned: the versions the suite was written against.
MPI_PIP         := mpich==5.0.2 mpi4py==4.1.2 numpy==2.4.6

.PHONY: test-mpi

$(MPI_BIN)/mpi_suite: tests/mpi/mpi_suite.c tests/mpi/mapped.h
	@mkdir -p $(MPI_BIN)
	mpicc $(CFLAGS) -Wall -Wextra -o $@ $< -ldl

$(MPI_VENV)/.installed: mk/mpi.mk
	python3 -m venv $(MPI_VENV)
	$(MPI_VENV)/bin/pip install -q $(MPI_PIP)
	touch $@

test-mpi: lib $(MPI_BIN)/mpi_suite $(MPI_VENV)/.installed
	tests/mpi/run.sh $(MPI_BIN)/mpi_suite $(LIBDIR) $(MPI_VENV)
