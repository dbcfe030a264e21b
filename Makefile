# Thin wrapper around CMake presets (CMakePresets.json). The two commands:
#
#   make test    install what is missing, check the formatting, then build
#                and run every test in a release build (and check the
#                layering rule on its objects), under ASan+UBSan and under
#                TSan
#   make bench   install what is missing (peers, gnuplot), build the release
#                benchmarks, run them and write bench/results/<date>/report.md
#
# Other targets: build, format, format-check, clean.

JOBS ?= $(shell nproc)
TEST_PRESETS ?= release asan tsan

.PHONY: all build test bench deps deps-bench format format-check clean

all: build

deps:
	@scripts/deps.sh test

deps-bench:
	@scripts/deps.sh bench

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)

test: deps format-check
	@set -e; for p in $(TEST_PRESETS); do \
		echo "=== $$p"; \
		cmake --preset $$p >/dev/null; \
		cmake --build --preset $$p -j $(JOBS); \
		if [ $$p = release ]; then scripts/check-layers build/release; fi; \
		ctest --preset $$p -j $(JOBS); \
	done

bench: deps-bench
	@cmake --preset bench >/dev/null
	@cmake --build --preset bench -j $(JOBS)
	@bench/run build/bench

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' '*.cpp')

format:
	@clang-format -i $(FORMAT_FILES)

format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	@rm -rf build
