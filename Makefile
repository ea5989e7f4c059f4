# tensorbox - top-level entry points. The real build is CMake + Ninja (CMakeLists.txt).
#
#   make build      bootstrap, configure build/ (RelWithDebInfo, -Werror) and build it
#   make test       everything CI runs: build + ctest, ASan/UBSan build + ctest (unit tests and
#                   fuzz corpus/crasher replays), install smoke test, Python tests; prints a summary
#   make asan       bootstrap, build build-asan/ (clang, ASan+UBSan, Debug) and run its ctest
#   make tsan       bootstrap, build build-tsan/ (clang, ThreadSanitizer) and run the tests that
#                   start worker threads (ctest label "threads")
#   make demo       bootstrap the Debian packages only, build tbx, run examples/demo.sh (quick on a
#                   fresh machine: llama.cpp runs the converted model only once `make test` built it)
#   make fuzz       build build-fuzz/ (clang, libFuzzer) and fuzz every target for FUZZ_SECONDS
#                   (default 60) each; new inputs -> build-fuzz/corpus-new/, crashes -> fuzz/artifacts/;
#                   an allocation above FUZZ_MALLOC_LIMIT_MB (default 128) is a crash
#   make bench      build, then run bench/run_all.sh (if present)
#   make install    build, then install into PREFIX (default /usr/local)
#   make seeds      regenerate fuzz/corpus/ with fuzz/make_*seeds.py
#   make clean      remove the build directories
#   make bootstrap  install missing Debian packages and the Python peers (idempotent, quick);
#                   llama.cpp (slow, once) and torch + transformers (~2.8 GB, once) are installed by
#                   `make test` (scripts/bootstrap.sh --llama --torch), never by `make demo`
SHELL := /bin/bash

BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_TSAN ?= build-tsan
BUILD_FUZZ ?= build-fuzz
PREFIX     ?= /usr/local
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
FUZZ_MALLOC_LIMIT_MB ?= 128
PY         := .venv/bin/python
CMAKE_GEN  := -G Ninja

.PHONY: all bootstrap configure build asan-build asan tsan-build tsan test demo fuzz fuzz-build bench install \
        seeds clean

all: build

# TBX_BOOTSTRAPPED=1 skips the bootstrap (scripts/test.sh runs it once, then the other steps).
BOOTSTRAP_ARGS ?=
bootstrap:
ifeq ($(TBX_BOOTSTRAPPED),)
	@scripts/bootstrap.sh $(BOOTSTRAP_ARGS)
endif

configure: bootstrap
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTBX_WERROR=ON

# KEEP_GOING=1: build every target that can be built even when one fails (scripts/test.sh).
NINJA_ARGS := $(if $(KEEP_GOING),-- -k 0)

build: configure
	cmake --build $(BUILD) $(NINJA_ARGS)

# Lean sanitizer build: no shared library, no bench programs.
asan-build: bootstrap
	CC=clang cmake -S . -B $(BUILD_ASAN) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DTBX_SANITIZE=ON \
	  -DTBX_BUILD_SHARED=OFF -DTBX_BUILD_BENCH=OFF
	cmake --build $(BUILD_ASAN) $(NINJA_ARGS)

asan: asan-build
	ctest --test-dir $(BUILD_ASAN) --output-on-failure -j2

# ThreadSanitizer: only the library and the threaded tests are built.
tsan-build: bootstrap
	CC=clang cmake -S . -B $(BUILD_TSAN) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DTBX_TSAN=ON \
	  -DTBX_BUILD_SHARED=OFF -DTBX_BUILD_BENCH=OFF
	cmake --build $(BUILD_TSAN) --target threads_tests

tsan: tsan-build
	ctest --test-dir $(BUILD_TSAN) --output-on-failure -L threads --no-tests=error

test:
	@scripts/test.sh

# The demo needs only tbx: the Debian packages, no Python peer, no llama.cpp build (the tour runs
# the converted model in llama.cpp when .venv already has it), and only the tbx target.
demo: BOOTSTRAP_ARGS := --system-only
demo: configure
	cmake --build $(BUILD) --target tbx
	TBX=$(CURDIR)/$(BUILD)/tbx PATH="$(CURDIR)/$(BUILD):$$PATH" bash examples/demo.sh

fuzz-build: bootstrap
	CC=clang cmake -S . -B $(BUILD_FUZZ) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTBX_FUZZ=ON -DTBX_BUILD_TESTS=OFF -DTBX_BUILD_SHARED=OFF -DTBX_BUILD_BENCH=OFF
	cmake --build $(BUILD_FUZZ) --target fuzzers

fuzz: fuzz-build
	FUZZ_MALLOC_LIMIT_MB=$(FUZZ_MALLOC_LIMIT_MB) scripts/fuzz.sh $(BUILD_FUZZ) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

bench: build
	@if [ -f bench/run_all.sh ]; then \
	  TBX=$(CURDIR)/$(BUILD)/tbx TBX_BUILD_DIR=$(CURDIR)/$(BUILD) \
	  TBX_BENCH_BIN=$(CURDIR)/$(BUILD)/bench bash bench/run_all.sh; \
	else \
	  echo "bench: no bench/run_all.sh; the bench programs are in $(BUILD)/bench/"; \
	fi

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

seeds: bootstrap
	@set -e; for s in fuzz/make_*seeds.py; do echo "$(PY) $$s"; $(PY) $$s; done

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
