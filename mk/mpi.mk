# Open MPI from Debian (4.1, linked against the 1.x ABI) over our library: its OFI MTL over efa,
# 2 and 4 ranks, local shm on and off, by library path and by LD_PRELOAD (tests/mpi).
TEST_TARGETS    += test-mpi
DEBIAN_PACKAGES += openmpi-bin libopenmpi-dev
MPI_BIN         := $(BUILD)/mpi

.PHONY: test-mpi

$(MPI_BIN)/mpi_suite: tests/mpi/mpi_suite.c
	@mkdir -p $(MPI_BIN)
	mpicc $(CFLAGS) -Wall -Wextra -o $@ $< -ldl

test-mpi: lib $(MPI_BIN)/mpi_suite
	tests/mpi/run.sh $(MPI_BIN)/mpi_suite $(LIBDIR)
