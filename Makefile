# Top-level build of Libception: the C shim (native/), the Rust daemon and the
# vidbench toolkit (crates/), their tests, the demo and installation.
#
#   make               build everything (C with -Werror, Rust in release)
#   make test          every test: C unit tests (+ASan/UBSan), cargo tests, integration tests
#   make demo          the quick start: emulated disk, nginx with and without Libception
#   make install PREFIX=/usr/local
#   make clean

PREFIX  ?= /usr/local
CARGO   ?= cargo
BUILD   := $(CURDIR)/build
export LIBCEPTION_BUILD := $(BUILD)
RUST_BINS := libception vidbench

# Replace a built program by rename, never in place: a mount or daemon still
# running from build/bin keeps its old file, where cp would fail with "Text
# file busy". The temporary name is in the same directory, so mv is a rename.
replace = install -m 0755 $(1) $(2).tmp.$$$$ && mv -f $(2).tmp.$$$$ $(2)

.PHONY: all native rust test test-native test-rust test-integration demo install clean bootstrap

all: native rust

bootstrap:
	@scripts/bootstrap

native:
	$(MAKE) -C native BUILD=$(BUILD)

rust:
	$(CARGO) build --release --workspace
	@mkdir -p $(BUILD)/bin
	@$(foreach b,$(RUST_BINS),$(call replace,target/release/$(b),$(BUILD)/bin/$(b)) &&) true

test: bootstrap all test-native test-rust test-integration

test-native: native
	$(MAKE) -C native BUILD=$(BUILD) test

test-rust:
	$(CARGO) test --release --workspace

test-integration: all
	tests/run

demo: bootstrap all
	scripts/demo

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include/libception
	install -m 0755 $(BUILD)/libdeception.so $(DESTDIR)$(PREFIX)/lib/libdeception.so
	install -m 0755 $(BUILD)/bin/libception $(BUILD)/bin/vidbench $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 native/include/libception/*.h $(DESTDIR)$(PREFIX)/include/libception/
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 0644 docs/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 docs/man/*.7 $(DESTDIR)$(PREFIX)/share/man/man7/

clean:
	$(MAKE) -C native BUILD=$(BUILD) clean
	$(CARGO) clean
	rm -rf $(BUILD)
