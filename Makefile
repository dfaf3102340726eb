# Every target installs what is missing (scripts/install-deps.sh), configures and builds.
BUILD ?= build
JOBS ?= $(shell nproc)

# The quality gates build in folders of their own, so they never disturb $(BUILD).
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
TIDY_BUILD ?= build-tidy
FUZZ_BUILD ?= build-fuzz
# Seconds each fuzz target runs (make fuzz).
FUZZ_SECONDS ?= 30

.PHONY: all deps build run test bench clean format format-check tidy asan tsan fuzz package \
	package-check

all: build

deps:
	@./scripts/install-deps.sh

# -g1: line tables and function names (backtraces, profiles) at 70% of -g's compile time; the
# package is stripped. A debugger's view of locals: configure another folder with -g.
$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The main job on its built-in default: the mixed-cluster case study, three configurations side
# by side, with the HTML report.
run: build
	./$(BUILD)/arbiter sim scenarios/mixed-cluster.yaml --html $(BUILD)/mixed-cluster.html

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The Debian package (CPack, cmake/install.cmake): $(BUILD)/arbiter_VERSION_ARCH.deb, for
# `apt install ./$(BUILD)/arbiter_*.deb`.
package: build
	cd $(BUILD) && cpack -G DEB

# As root on Debian 12: installs the package, checks its units, starts its server, purges it
# (scripts/package-check.sh; docs/operations.md).
package-check: package
	./scripts/package-check.sh $(BUILD)

bench: build
	./$(BUILD)/arbiter_bench
	./$(BUILD)/arbiter_loadgen --server-bin ./$(BUILD)/arbiter

# Every C++ file as .clang-format says: format-check lists those that differ and fails.
format: deps
	./scripts/format.sh --fix

format-check: deps
	./scripts/format.sh --check

# clang-tidy with the checks in .clang-tidy over the sources in compile_commands.json.
tidy: deps
	JOBS=$(JOBS) ./scripts/tidy.sh $(TIDY_BUILD)

# AddressSanitizer + UndefinedBehaviorSanitizer over every test; ThreadSanitizer over the
# server, store and agent tests. Each builds its own folder and fails on any report.
asan: deps
	JOBS=$(JOBS) ./scripts/sanitize.sh address,undefined $(ASAN_BUILD)

tsan: deps
	JOBS=$(JOBS) ./scripts/sanitize.sh thread $(TSAN_BUILD)

# The libFuzzer targets (fuzz/, clang): each runs FUZZ_SECONDS over its seeds and regressions; any
# crash, leak, timeout or undefined-behaviour report fails (scripts/fuzz.sh).
fuzz: deps
	JOBS=$(JOBS) FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/fuzz.sh $(FUZZ_BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(TIDY_BUILD) $(FUZZ_BUILD)
