# fabric: a drop-in libfabric.so.1 written in Rust.
#
#   make            build build/lib/libfabric.so.1 (release)
#   make demo       build, then a write-bandwidth table between two local processes
#   make test       everything CI runs (installs the Debian packages the tests need)
#   make bench      speed side by side with Debian's libfabric 1.17
#   make install PREFIX=/usr/local

PREFIX    ?= /usr/local
CARGO     ?= cargo
CC        ?= cc
BUILD     := build
LIBDIR    := $(BUILD)/lib
SONAME    := libfabric.so.1
SOVERSION := 1.32.0
STATICLIB := target/release/libfabric.a
CFLAGS    ?= -O2 -g
export CARGO_TERM_COLOR ?= never

.PHONY: all lib demo test bench install clean deps test-rust lint FORCE

all: lib

# Each area of the test suite lives in its own fragment: mk/<area>.mk appends its targets to
# TEST_TARGETS (and the Debian packages it needs to DEBIAN_PACKAGES).
TEST_TARGETS    :=
DEBIAN_PACKAGES := build-essential pkg-config valgrind
include $(sort $(wildcard mk/*.mk))

lib: $(LIBDIR)/$(SONAME)

RUST_SOURCES := $(shell find src -name '*.rs' -o -name '*.c') Cargo.toml build.rs

# Always ask cargo: it knows when the archive is stale, including when another build (e.g. a
# plain `cargo build --release`) replaced it with one made without the versioned symbols.
$(STATICLIB): $(RUST_SOURCES) FORCE
	$(CARGO) build --release --features versioned-symbols

# rustc cannot give a cdylib upstream's version nodes: link the staticlib ourselves with the
# version script (docs/internals.md, "Linking").
$(LIBDIR)/$(SONAME): $(STATICLIB) libfabric.map
	@mkdir -p $(LIBDIR)
	$(CC) -shared -o $(LIBDIR)/libfabric.so.$(SOVERSION) \
		-Wl,-soname,$(SONAME) -Wl,--version-script=libfabric.map -Wl,--gc-sections -Wl,-z,now \
		-Wl,--whole-archive $(STATICLIB) -Wl,--no-whole-archive \
		-lpthread -ldl -lm -lgcc_s -lc
	ln -sf libfabric.so.$(SOVERSION) $(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(LIBDIR)/libfabric.so

install: lib
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/rdma/providers $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(LIBDIR)/libfabric.so.$(SOVERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libfabric.so.$(SOVERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libfabric.so
	install -m 644 include/rdma/*.h $(DESTDIR)$(PREFIX)/include/rdma/
	install -m 644 include/rdma/providers/*.h $(DESTDIR)$(PREFIX)/include/rdma/providers/
	sed -e 's|@PREFIX@|$(PREFIX)|g' libfabric.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/libfabric.pc

clean:
	$(CARGO) clean
	rm -rf $(BUILD)

# Installs what the tests need on a fresh Debian 12 machine (CI runs as root).
deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

test-rust:
	$(CARGO) test --release -q

lint:
	$(CARGO) fmt --check
	cd fuzz && $(CARGO) fmt --check
	$(CARGO) clippy --all-targets -q -- -D warnings

test: deps
	$(MAKE) lib
	$(MAKE) lint test-rust $(TEST_TARGETS)
	@echo "make test: all passed"

FORCE:
