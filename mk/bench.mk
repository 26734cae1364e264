# make bench: our library next to upstream libfabric 2.5.1 (shipped by PyPI's mpich 5.0.2 wheel,
# installed into build/venv as mk/mpi.mk does), Debian's libfabric 1.17 and the machine's limits,
# same client binaries, only the library path switched (bench/bench.py). Results go to
# bench/results/ (committed); QUICK=1 runs each figure once with few iterations into
# build/bench-quick/, and make test runs that to prove the bench still works (no figure is
# asserted).
DEBIAN_PACKAGES += gnuplot-nox libfabric-bin libfabric-dev python3 iproute2
BENCH_BIN       := $(BUILD)/bench
BENCH_OUT        = $(if $(QUICK),$(BUILD)/bench-quick,bench/results)
TEST_TARGETS    += test-bench
# The wheel's virtual environment: mk/mpi.mk's MPI_VENV and its rule (that file is read after
# this one, so the path is spelled out here).
BENCH_VENV      := $(BUILD)/venv/.installed

.PHONY: bench-tools test-bench srd-bulk

bench-tools: $(BENCH_BIN)/limits $(BENCH_BIN)/getinfo_time $(BENCH_BIN)/ep_memory \
	$(BENCH_BIN)/many_peers srd-bulk

# The software SRD device alone, for the comparison with raw UDP (examples/srd_bulk.rs).
srd-bulk:
	$(CARGO) build --release --example srd_bulk

$(BENCH_BIN)/limits: bench/limits.c
	@mkdir -p $(BENCH_BIN)
	$(CC) -O2 -Wall -Wextra -o $@ $<

# Built against Debian's headers and library, like the other clients; run on either library.
$(BENCH_BIN)/getinfo_time: bench/getinfo_time.c
	@mkdir -p $(BENCH_BIN)
	$(CC) -O2 -Wall -Wextra -o $@ $< -lfabric

bench: deps
	$(MAKE) lib fabtests bench-tools $(BENCH_VENV)
	python3 bench/bench.py $(if $(QUICK),--quick) $(BUILD) $(BENCH_OUT)

test-bench: lib fabtests bench-tools $(BENCH_VENV)
	python3 bench/bench.py --quick $(BUILD) $(BUILD)/bench-quick >/dev/null

$(BENCH_BIN)/ep_memory: bench/ep_memory.c
	@mkdir -p $(BENCH_BIN)
	$(CC) -O2 -Wall -Wextra -o $@ $< -lfabric

# Ours only (efa over SRD): 64 peers in an AV against 10,000 made-up ones plus the 64.
$(BENCH_BIN)/many_peers: bench/many_peers.c
	@mkdir -p $(BENCH_BIN)
	$(CC) -O2 -Wall -Wextra -o $@ $< -lfabric
