# Thin wrapper over meson/ninja and the scripts in scripts/. See README.md.
MESON   ?= meson
BUILD   ?= build
ASAN    ?= build-asan
FUZZB   ?= build-fuzz
FUZZ_SECONDS ?= 600

.PHONY: all build build-asan build-fuzz up check test fuzz bench clean deps prepare

all: build

deps:
	@bash scripts/deps.sh

build:
	@[ -f $(BUILD)/build.ninja ] || $(MESON) setup $(BUILD) --buildtype=debugoptimized >/dev/null
	@ninja -C $(BUILD)

# Host code with ASan+UBSan; the static guest binaries come from $(BUILD).
build-asan:
	@[ -f $(ASAN)/build.ninja ] || $(MESON) setup $(ASAN) -Dsanitize=true -Dguest=false -Db_lundef=false >/dev/null
	@ninja -C $(ASAN)

build-fuzz:
	@[ -f $(FUZZB)/build.ninja ] || CC=clang $(MESON) setup $(FUZZB) -Dfuzz=true -Dguest=false -Db_lundef=false >/dev/null
	@ninja -C $(FUZZB)

prepare: build
	@bash scripts/prepare.sh

up:
	@bash scripts/up.sh

check:
	@bash scripts/check.sh

test: check

fuzz: build-fuzz
	@bash tests/fuzz.sh $(FUZZB) $(FUZZ_SECONDS)

bench: build
	@bash bench/run.sh

clean:
	rm -rf $(BUILD) $(ASAN) $(FUZZB)
