# The C suites with their memory checked (issue 8).
#
# test-misuse: the API misuse matrix (abi-tests/misuse.c: every posting slot × every bad input
# that applies to it), built against Debian's 1.17 headers and against ours, run on our library
# over shm, efa on the software SRD device and efa through shm, under valgrind (no invalid
# access, no leak) and built with AddressSanitizer and UBSan.
#
# test-memcheck: every fabtests-compat program (two and four processes, threads, a killed peer)
# at smoke sizes under valgrind (mk/abi.mk's options), and built with AddressSanitizer and UBSan (LeakSanitizer on).
TEST_TARGETS    += test-misuse test-memcheck
DEBIAN_PACKAGES += valgrind libasan8 libubsan1 libfabric-dev
MEMCHECK_BIN    := $(BUILD)/memcheck
SANITIZE        := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# provider:environment (shm; efa on the software SRD device; efa through shm)
MISUSE_TARGETS  := shm:FI_LOG_LEVEL=warn efa:FI_EFA_ENABLE_SHM_TRANSFER=0 efa:FI_EFA_ENABLE_SHM_TRANSFER=1

.PHONY: test-misuse test-memcheck

test-misuse: lib
	@mkdir -p $(MEMCHECK_BIN)
	$(CC) -O1 -g -Wall -Wextra -Werror -o $(MEMCHECK_BIN)/misuse-upstream abi-tests/misuse.c -lfabric
	$(CC) -O1 -g -Wall -Wextra -Werror -Iinclude -o $(MEMCHECK_BIN)/misuse-ours abi-tests/misuse.c -L$(LIBDIR) -lfabric
	$(CC) $(SANITIZE) -Wall -Wextra -Werror -Iinclude -o $(MEMCHECK_BIN)/misuse-asan abi-tests/misuse.c -L$(LIBDIR) -lfabric
	@for t in $(MISUSE_TARGETS); do \
		prov=$${t%%:*}; envs=$${t#*:}; \
		for v in upstream ours; do \
			echo "valgrind misuse-$$v $$prov $$envs"; \
			env $$envs LD_LIBRARY_PATH=$(LIBDIR) $(VALGRIND) $(MEMCHECK_BIN)/misuse-$$v $$prov || exit 1; \
		done; \
		echo "asan misuse $$prov $$envs"; \
		env $$envs LD_LIBRARY_PATH=$(LIBDIR) $(MEMCHECK_BIN)/misuse-asan $$prov || exit 1; \
	done

MEMCHECK_PROGS := $(basename $(notdir $(wildcard fabtests-compat/*.c)))

$(MEMCHECK_BIN)/asan/%: fabtests-compat/%.c fabtests-compat/common.h lib
	@mkdir -p $(MEMCHECK_BIN)/asan
	$(CC) $(SANITIZE) -Wall -Wextra -Werror -pthread -Iinclude -o $@ $< -L$(LIBDIR) -lfabric

$(MEMCHECK_BIN)/plain/%: fabtests-compat/%.c fabtests-compat/common.h lib
	@mkdir -p $(MEMCHECK_BIN)/plain
	$(CC) -O1 -g -Wall -Wextra -Werror -pthread -Iinclude -o $@ $< -L$(LIBDIR) -lfabric

test-memcheck: lib $(addprefix $(MEMCHECK_BIN)/asan/,$(MEMCHECK_PROGS)) $(addprefix $(MEMCHECK_BIN)/plain/,$(MEMCHECK_PROGS))
	@echo "== fabtests-compat built with AddressSanitizer and UBSan"
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 fabtests-compat/run.sh smoke $(MEMCHECK_BIN)/asan $(LIBDIR)
	@echo "== fabtests-compat under valgrind"
	WRAP="$(VALGRIND)" fabtests-compat/run.sh smoke $(MEMCHECK_BIN)/plain $(LIBDIR)
