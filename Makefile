# Top-level build of Libception: the C shim (native/), the Rust daemon and the
# vidbench toolkit (crates/), their tests, the demo and installation.
#
#   make               build everything (C with -Werror, Rust in release)
#   make test          every test: C unit tests (+ASan/UBSan), cargo tests and clippy, integration tests
#   make demo          the quick start: emulated disk, nginx with and without Libception
#   make install PREFIX=/usr/local [DESTDIR=...]   binaries, library, headers, man pages, systemd units
#   make install-service                            only the systemd units (dist/systemd/)
#   make uninstall PREFIX=/usr/local [DESTDIR=...]  remove what install installed
#   make clean

PREFIX  ?= /usr/local
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR    ?= $(PREFIX)/lib/sysusers.d
CARGO   ?= cargo
BUILD   := $(CURDIR)/build
export LIBCEPTION_BUILD := $(BUILD)
RUST_BINS := libception vidbench

# Replace a built program by rename, never in place: a mount or daemon still
# running from build/bin keeps its old file, where cp would fail with "Text
# file busy". The temporary name is in the same directory, so mv is a rename.
replace = install -m 0755 $(1) $(2).tmp.$$$$ && mv -f $(2).tmp.$$$$ $(2)

.PHONY: all native rust test test-native test-rust test-integration demo install install-service uninstall uninstall-service clean bootstrap

all: native rust

bootstrap:
	@scripts/bootstrap

native:
	$(MAKE) -C native BUILD=$(BUILD)

# Under sudo, PATH usually lacks a per-user (rustup) cargo: `make` as yourself,
# then `sudo make install` or `sudo make demo` uses the programs already built.
rust:
	@if command -v $(CARGO) >/dev/null 2>&1; then \
		echo "$(CARGO) build --release --workspace"; \
		$(CARGO) build --release --workspace && mkdir -p $(BUILD)/bin && \
		$(foreach b,$(RUST_BINS),$(call replace,target/release/$(b),$(BUILD)/bin/$(b)) &&) true; \
	elif $(foreach b,$(RUST_BINS),[ -x $(BUILD)/bin/$(b) ] &&) true; then \
		echo "make: $(CARGO) is not on PATH (sudo resets PATH): using the Rust programs built before in $(BUILD)/bin" >&2; \
	else \
		echo "make: $(CARGO) is not on PATH and $(BUILD)/bin has no Rust programs: install Rust (README, Quick start), or run 'make' as the user who has cargo first" >&2; \
		exit 1; \
	fi

test: bootstrap all test-native test-rust test-integration

test-native: native
	$(MAKE) -C native BUILD=$(BUILD) test

test-rust:
	$(CARGO) test --release --workspace
	@if $(CARGO) clippy --version >/dev/null 2>&1; then \
		echo "$(CARGO) clippy --release --workspace --all-targets -- -D warnings"; \
		$(CARGO) clippy --release --workspace --all-targets -- -D warnings; \
	else \
		echo "make test: cargo clippy is not installed (rustup component add clippy): lints NOT checked" >&2; \
	fi

test-integration: all
	tests/run

demo: bootstrap all
	scripts/demo

install: all install-service
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include/libception $(DESTDIR)$(PREFIX)/include/laio
	install -m 0755 $(BUILD)/libdeception.so $(BUILD)/liblaio.so $(DESTDIR)$(PREFIX)/lib/
	install -m 0755 $(BUILD)/bin/libception $(BUILD)/bin/vidbench $(BUILD)/bin/laio-httpd $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 native/include/libception/*.h $(DESTDIR)$(PREFIX)/include/libception/
	install -m 0644 native/include/laio/*.h $(DESTDIR)$(PREFIX)/include/laio/
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man3 $(DESTDIR)$(PREFIX)/share/man/man7 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0644 docs/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 docs/man/*.3 $(DESTDIR)$(PREFIX)/share/man/man3/
	install -m 0644 docs/man/*.7 $(DESTDIR)$(PREFIX)/share/man/man7/
	install -m 0644 docs/man/*.8 $(DESTDIR)$(PREFIX)/share/man/man8/

# The service's ExecStart names the installed binary: $(PREFIX)/bin.
install-service:
	install -d $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSUSERSDIR)
	sed 's|@BINDIR@|$(PREFIX)/bin|g' dist/systemd/libception.service.in > $(DESTDIR)$(SYSTEMDUNITDIR)/libception.service.tmp
	chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/libception.service.tmp
	mv -f $(DESTDIR)$(SYSTEMDUNITDIR)/libception.service.tmp $(DESTDIR)$(SYSTEMDUNITDIR)/libception.service
	install -m 0644 dist/systemd/libception.socket $(DESTDIR)$(SYSTEMDUNITDIR)/libception.socket
	install -m 0644 dist/systemd/libception.sysusers $(DESTDIR)$(SYSUSERSDIR)/libception.conf
	@echo "systemd units installed; as root: systemd-sysusers && systemctl daemon-reload && systemctl enable --now libception.socket"

uninstall: uninstall-service
	rm -f $(DESTDIR)$(PREFIX)/lib/libdeception.so $(DESTDIR)$(PREFIX)/lib/liblaio.so
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(RUST_BINS) laio-httpd)
	rm -rf $(DESTDIR)$(PREFIX)/include/libception $(DESTDIR)$(PREFIX)/include/laio
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man1/,$(notdir $(wildcard docs/man/*.1)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man3/,$(notdir $(wildcard docs/man/*.3)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man7/,$(notdir $(wildcard docs/man/*.7)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man8/,$(notdir $(wildcard docs/man/*.8)))

uninstall-service:
	rm -f $(DESTDIR)$(SYSTEMDUNITDIR)/libception.service $(DESTDIR)$(SYSTEMDUNITDIR)/libception.socket
	rm -f $(DESTDIR)$(SYSUSERSDIR)/libception.conf

clean:
	$(MAKE) -C native BUILD=$(BUILD) clean
	$(CARGO) clean
	rm -rf $(BUILD)
