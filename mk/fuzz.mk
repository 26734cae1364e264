# Fuzzing (issue 4 and 8): cargo-fuzz targets for what other hosts and processes can send us
# (fuzz/fuzz_targets: SRD transport, RDM packet parser, shm command handlers). make test runs
# each for FUZZ_SECONDS from the committed corpus, writing new finds under build/fuzz (the
# committed corpus is not touched); a crash fails the run and leaves its input in
# fuzz/artifacts/<target>/. cargo-fuzz runs on stable Rust with `-s none` (no sanitizer; the
# coverage instrumentation is stable). Longer runs by hand: make fuzz FUZZ_SECONDS=600
TEST_TARGETS    += test-fuzz
FUZZ_TARGETS    := srd_transport rdm_packet shm_commands udp_fragments
FUZZ_SECONDS    ?= 20
CARGO_FUZZ_VERSION := 0.13.2

.PHONY: test-fuzz fuzz cargo-fuzz
test-fuzz: fuzz

cargo-fuzz:
	@cargo fuzz --version 2>/dev/null | grep -q "$(CARGO_FUZZ_VERSION)" || \
		$(CARGO) install cargo-fuzz --locked --version $(CARGO_FUZZ_VERSION)

fuzz: cargo-fuzz
	cd fuzz && cargo fuzz build -s none
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p $(BUILD)/fuzz/$$t; \
		log=$(BUILD)/fuzz/$$t.log; \
		if (cd fuzz && cargo fuzz run $$t ../$(BUILD)/fuzz/$$t corpus/$$t -s none -- \
			-max_total_time=$(FUZZ_SECONDS)) >$$log 2>&1; then \
			echo "fuzz: $$t: $$(grep -E '^Done' $$log)"; \
		else \
			tail -40 $$log; echo "fuzz: $$t FAILED (input in fuzz/artifacts/$$t/)"; exit 1; \
		fi; \
	done
