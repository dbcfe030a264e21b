# Thin wrapper around CMake presets (CMakePresets.json). The two commands:
#
#   make test    install what is missing, check the formatting, then build
#                and run every test in a release build (and check the
#                layering rule on its objects), under ASan+UBSan and under
#                TSan
#   make bench   install what is missing (peers, gnuplot), build the release
#                benchmarks, run them and write bench/results/<date>/report.md
#
# CI (.ci/run) runs both as written, the second as BENCH_QUICK=1 make bench
# (small sizes). Other targets: build, bench-tiny (every benchmark section at
# its smallest size, the report and plots written and checked: the harness
# end to end in a few minutes), flaky (T=REGEX [N=100] [PRESET=release]: the
# tests REGEX names, repeated until one fails), format, format-check, clean. Before an issue
# is resolved: bench/regress BASE (every goal row, BASE against this tree).

JOBS ?= $(shell nproc)
TEST_PRESETS ?= release asan tsan

.PHONY: all build test bench bench-tiny flaky deps deps-bench format format-check clean

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

# The harness end to end, not a measurement: bench/run fails if a section,
# a plot, a goal row's or a table row's figures are missing (bench/selftest.py
# checks that it does, on fake programs).
bench-tiny: deps-bench
	@bench/selftest.py
	@cmake --preset bench >/dev/null
	@cmake --build --preset bench -j $(JOBS)
	@rm -rf build/bench-tiny
	@BENCH_TINY=1 bench/run build/bench build/bench-tiny >/dev/null
	@echo "bench-tiny: every section, plot and goal row written (build/bench-tiny/report.md)"

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' '*.cpp')

format:
	@clang-format -i $(FORMAT_FILES)

N ?= 100
PRESET ?= release
flaky: deps
	@test -n "$(T)" || { echo "make flaky T=REGEX [N=100] [PRESET=release]"; exit 2; }
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS)
	@cd build/$(PRESET) && ctest -R '$(T)' --repeat until-fail:$(N) --output-on-failure -j $(JOBS)

format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	@rm -rf build
