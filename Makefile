# Every target installs what is missing (scripts/install-deps.sh), configures and builds.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build run test bench clean format

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The main job on its built-in default: the mixed-cluster case study, three configurations side
# by side, with the HTML report.
run: build
	./$(BUILD)/arbiter sim scenarios/mixed-cluster.yaml --html $(BUILD)/mixed-cluster.html

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	./$(BUILD)/arbiter_bench

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf $(BUILD)
