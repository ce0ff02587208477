# dgalua — build, test, benchmark.
#   make            release build: build/libdga.a, build/dga.so, ./dgalua
#   make test       the test suite (release, then ASan+UBSan); last line "N passed, N failed"
#   make bench      benchmarks (never part of the tests)
#   make lint       luacheck over the Lua (.luacheckrc)
#   make deps       install the Debian packages the main job needs (apt-get; MPI=1: and OpenMPI)
#   make test-deps  install the ones only the tests and benchmarks need, OpenMPI included
#   make MPI=1      also build/mpi/dgalua, with MPI collectives (needs mpicc; see below)
# Out-of-tree builds: make BUILD=/tmp/mybuild (objects and test binaries go there).

BUILD    ?= build
SAN      ?=
CC       ?= cc
PKGS     := lua5.4 openblas jansson zlib
DEBS     := build-essential pkg-config liblua5.4-dev lua5.4 libopenblas-pthread-dev libopenblas-dev \
            libcsv-dev libjansson-dev zlib1g-dev libreadline-dev lua-argparse \
            lua-filesystem gnuplot-nox libdnnl-dev
# OpenMPI: only the MPI build (make MPI=1) and its tests use it; `make deps MPI=1` adds it,
# and so does `make test-deps`, since `make test` builds and tests the MPI binary where mpicc exists.
MPI_DEBS := openmpi-bin libopenmpi-dev
# Only the tests and benchmarks need these: cmocka and busted run the suite, tests/interop and
# bench's reference load a checkpoint into PyTorch, and luacheck lints the Lua.
TEST_DEBS:= libcmocka-dev lua-busted python3-torch lua-check $(MPI_DEBS)

# -fno-trapping-math: nothing here reads the floating-point exception flags, and without it
# GCC will not if-convert a float compare on AVX2 (AVX-512 does it with mask registers), so
# on an AVX2 machine every loop with fexp's clamps (softmax, GELU, cross-entropy) ran scalar,
# 2-4x slower. It changes no result: the operations and their order are the same.
OPT      ?= -O3 -march=native -fno-trapping-math
SANITIZE := -fsanitize=address,undefined
ifeq ($(SAN),1)
OPT      := -O1 -g -fno-omit-frame-pointer $(SANITIZE) -fno-sanitize-recover=undefined
endif
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -fPIC -Icore \
            $(OPT) $(shell pkg-config --cflags $(filter-out lua5.4,$(PKGS)))
# core/ is compiled without the Lua and bindings include paths: the compiler keeps Lua out.
BIND_CFLAGS := -Ibindings $(shell pkg-config --cflags lua5.4)
# oneDNN (Debian's build uses OpenMP; core/gemm_dnnl.c sets libgomp's thread count itself)
LDLIBS   += $(shell pkg-config --libs $(PKGS)) -lcsv -ldnnl -lgomp -lm -lpthread
LDFLAGS  += $(if $(filter 1,$(SAN)),$(SANITIZE))

# MPI is optional and never needed by the plain build: core/comm.c is a one-rank stub unless
# compiled with DGA_MPI. `make MPI=1` also builds $(BUILD)/mpi/dgalua, the same program with
# comm.c compiled and everything linked by $(MPICC). Where mpicc exists, `make test` builds it
# too (release build only) so that tests/lua/comm_spec.lua can run it under mpirun.
MPICC    ?= mpicc
HAVE_MPI := $(shell command -v $(MPICC) 2>/dev/null)
MPI_EXE  := $(BUILD)/mpi/dgalua
ifeq ($(MPI),1)
ifeq ($(HAVE_MPI)$(filter deps,$(MAKECMDGOALS)),)
$(error MPI=1 needs $(MPICC) (Debian: apt-get install libopenmpi-dev openmpi-bin))
endif
endif

CORE_SRC := $(wildcard core/*.c)
BIND_SRC := $(filter-out bindings/dgalua_main.c,$(wildcard bindings/*.c))
TEST_SRC := $(wildcard tests/c/test_*.c)
BENCH_SRC:= $(wildcard bench/bench_*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
BIND_OBJ := $(BIND_SRC:%.c=$(BUILD)/%.o)
TESTS    := $(TEST_SRC:tests/c/%.c=$(BUILD)/tests/%)
BENCHES  := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
LIB      := $(BUILD)/libdga.a
EXE      := $(BUILD)/dgalua

.PHONY: all deps test-deps tests-bin test test-release bench fuzz data clean
all: $(LIB) $(BUILD)/dga.so $(EXE) $(if $(filter build,$(BUILD)),dgalua) \
     $(if $(filter 1,$(MPI)),$(MPI_EXE))

# The objects depend on the compile command, not only on the sources: $(FLAGS) is rewritten
# only when the command changes (a new OPT, SAN, or a pull that changes the flags here), and
# then everything compiled with it is rebuilt instead of mixing old and new objects.
FLAGS    := $(BUILD)/.flags
$(FLAGS): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(CFLAGS) $(BIND_CFLAGS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS) $(BIND_CFLAGS)' > $@
.PHONY: FORCE
FORCE:

$(BUILD)/core/%.o: core/%.c $(FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/bindings/%.o: bindings/%.c $(FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BIND_CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/dga.so: $(BIND_OBJ) $(LIB)
	$(CC) -shared $(LDFLAGS) -o $@ $(BIND_OBJ) $(LIB) $(LDLIBS)

$(EXE): $(BUILD)/bindings/dgalua_main.o $(BIND_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lreadline

dgalua: $(EXE)
	ln -sf $(EXE) dgalua

# The stub comm.o in $(LIB) is not pulled in: the MPI one, listed first, defines its symbols.
$(BUILD)/mpi/comm.o: core/comm.c $(FLAGS)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -DDGA_MPI -MMD -MP -c $< -o $@

$(MPI_EXE): $(BUILD)/bindings/dgalua_main.o $(BIND_OBJ) $(BUILD)/mpi/comm.o $(LIB)
	$(MPICC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lreadline

$(BUILD)/tests/%: tests/c/%.c $(LIB) $(FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDFLAGS) $(LDLIBS) -lcmocka

$(BUILD)/bench/%: bench/%.c $(LIB) $(FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDFLAGS) $(LDLIBS)

# The test suite: C unit tests (cmocka) and Lua specs (busted), both speaking TAP, run once on
# the release build and once under AddressSanitizer + UndefinedBehaviorSanitizer; tests/run
# counts them and ends with "N passed, N failed".
tests-bin: all $(TESTS) $(if $(and $(HAVE_MPI),$(if $(SAN),,1)),$(MPI_EXE))

test:
	@$(MAKE) --no-print-directory tests-bin >/dev/null
	@$(MAKE) --no-print-directory BUILD=build/asan SAN=1 tests-bin >/dev/null
	@tests/run build build/asan

test-release:
	@$(MAKE) --no-print-directory tests-bin >/dev/null
	@tests/run build

bench: all $(BENCHES) $(if $(HAVE_MPI),$(MPI_EXE))
	@bench/run $(BUILD)

fuzz:
	@fuzz/run

# Lua lint, configured in .luacheckrc: the scripts, experiments, tests and benchmarks.
.PHONY: lint
lint:
	@luacheck -q scripts experiments tests bench

data:
	@scripts/make_data.sh

# apt-get waits for the dpkg lock (another apt process, e.g. unattended upgrades) rather than
# failing at once.
APT_GET  := DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600
define install_missing
@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
if [ -n "$$missing" ]; then echo "installing:$$missing"; \
  $(APT_GET) update -qq && $(APT_GET) install -y -qq $$missing; \
else echo "all $(2) present"; fi
endef

deps:
	$(call install_missing,$(DEBS) $(if $(filter 1,$(MPI)),$(MPI_DEBS)),dependencies)

test-deps: deps
	$(call install_missing,$(TEST_DEBS),test dependencies)

clean:
	rm -rf build dgalua

-include $(CORE_OBJ:.o=.d) $(BIND_OBJ:.o=.d) $(BUILD)/mpi/comm.d
