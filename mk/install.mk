# `make install` into a scratch prefix, then what a user of the installed library does: every
# header compiles as C11 and as C++, and a program built with `pkg-config --cflags --libs
# libfabric` against our headers runs on our library over efa and shm (every fabtests-compat
# program, the same sources that test-fabtests builds against upstream's headers).
TEST_TARGETS    += test-install
DEBIAN_PACKAGES += pkg-config g++
INSTALL_TEST    := $(BUILD)/install-test

.PHONY: test-install
test-install: lib
	rm -rf $(INSTALL_TEST)
	$(MAKE) -s install PREFIX=$(abspath $(INSTALL_TEST))
	mkdir -p $(INSTALL_TEST)/bin
	cd $(INSTALL_TEST)/include && for h in rdma/*.h rdma/providers/*.h; do echo "#include <$$h>"; done > ../all-headers.c
	echo 'int main(void) { return 0; }' >> $(INSTALL_TEST)/all-headers.c
	$(CC) -std=c11 -Wall -Wextra -Werror -I$(INSTALL_TEST)/include -o /dev/null $(INSTALL_TEST)/all-headers.c
	g++ -x c++ -Wall -Wextra -Werror -I$(INSTALL_TEST)/include -o /dev/null $(INSTALL_TEST)/all-headers.c
	PKG_CONFIG_PATH=$(INSTALL_TEST)/lib/pkgconfig; export PKG_CONFIG_PATH; \
	for p in $(FABTESTS_PROGS); do \
		$(CC) $(CFLAGS) -Wall -Wextra -Werror -pthread -o $(INSTALL_TEST)/bin/$$p fabtests-compat/$$p.c \
			$$(pkg-config --cflags --libs libfabric) || exit 1; \
	done
	fabtests-compat/run.sh smoke $(INSTALL_TEST)/bin $(INSTALL_TEST)/lib
