# sparsed — one build for the CPU objects (always) and the CUDA objects (when nvcc exists).
#   make            build build/sparsed (+ CUDA objects if nvcc is found; CUDA=0 turns them off)
#   make deps       install the Debian and Python packages the build and the tests need
#   make test       install deps, build, run every test (C unit, ASan fuzz, Python integration)
#   make run        serve the bundled model (models/tiny)
#   make asan       build with AddressSanitizer + UBSan into build-asan/
#   make format     clang-format the tree

CC      ?= gcc
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA    ?= $(if $(NVCC),1,0)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= 90
PYTHON  ?= python3
BUILD   ?= build
SAN     ?=

CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -I. -Wall -Wextra -Wno-unused-parameter -pthread -MMD -MP
OPT     ?= -O2 -g
CFLAGS  += $(CFLAGS_BASE) $(OPT) $(SAN) -march=x86-64-v2
LDLIBS  += -ljansson -lmicrohttpd -luv -lpcre2-8 -lunistring -lm -lpthread
LDFLAGS += $(SAN)

LIB_DIRS = engine kernels server prune
LIB_SRCS = $(filter-out server/main.c,$(wildcard $(addsuffix /*.c,$(LIB_DIRS))))
LIB_OBJS = $(LIB_SRCS:%.c=$(BUILD)/%.o)

ifeq ($(CUDA),1)
CU_SRCS  = $(wildcard $(addsuffix /*.cu,$(LIB_DIRS)))
CU_OBJS  = $(CU_SRCS:%.cu=$(BUILD)/%.cu.o)
NVFLAGS ?= -O3 -std=c++17 -I. -gencode arch=compute_$(CUDA_ARCH),code=sm_$(CUDA_ARCH) \
           -Xcompiler -Wall,-Wextra,-Wno-unused-parameter -lineinfo
CFLAGS  += -DSD_HAVE_CUDA=1 -I$(CUDA_HOME)/include
LDFLAGS += -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib -Wl,-rpath,$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib
LDLIBS  += -lcudart -lcublas -lcublasLt -lnccl -lstdc++
endif

LIB     = $(BUILD)/libsparsed.a
BIN     = $(BUILD)/sparsed
TEST_SRCS = $(wildcard tests/*/test_*.c)
TEST_BINS = $(TEST_SRCS:%.c=$(BUILD)/%)

MODEL   ?= models/tiny

.PHONY: all deps test test-c test-asan test-py run asan format clean bench-kernels
all: $(BIN) $(TEST_BINS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS) $(CU_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BIN): $(BUILD)/server/main.o $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/harness.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)

deps:
	@tools/deps.sh

test: deps
	$(MAKE) all
	$(MAKE) test-asan
	@tools/run_tests.sh $(BUILD)

test-c: all
	@SD_TEST_ONLY_C=1 tools/run_tests.sh $(BUILD)

# The parsers of untrusted files run under ASan + UBSan in every test run.
asan test-asan:
	$(MAKE) BUILD=build-asan CUDA=0 OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" all

run: all
	$(BIN) serve --model $(MODEL)

bench-kernels: all
	$(BIN) bench kernels

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')

clean:
	rm -rf build build-asan

-include $(LIB_OBJS:.o=.d) $(BUILD)/server/main.d

# ---- Installation (PREFIX and DESTDIR honoured) ----
#   make install [PREFIX=/usr/local] [DESTDIR=/tmp/stage]   make uninstall
# The default config goes to $(SYSCONFDIR)/sparsed/sparsed.json only if none exists there.
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
DATADIR    ?= $(PREFIX)/share/sparsed
DOCDIR     ?= $(PREFIX)/share/doc/sparsed
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
INSTALL_FILES = $(BINDIR)/sparsed $(UNITDIR)/sparsed.service $(SYSUSERSDIR)/sparsed.conf \
    $(TMPFILESDIR)/sparsed.conf $(DOCDIR)/README.md $(DATADIR)/sparsed.json.default \
    $(addprefix $(DATADIR)/models/tiny/,$(notdir $(wildcard models/tiny/*)))

.PHONY: install uninstall
install: $(BIN)
	install -Dm755 $(BIN) $(DESTDIR)$(BINDIR)/sparsed
	sed -e 's#/usr/local/bin/sparsed#$(BINDIR)/sparsed#' -e 's#/etc/sparsed/#$(SYSCONFDIR)/sparsed/#' \
	    -e 's#/usr/local/share/doc/sparsed#$(DOCDIR)#' systemd/sparsed.service > $(BUILD)/sparsed.service
	install -Dm644 $(BUILD)/sparsed.service $(DESTDIR)$(UNITDIR)/sparsed.service
	install -Dm644 systemd/sparsed.sysusers $(DESTDIR)$(SYSUSERSDIR)/sparsed.conf
	install -Dm644 systemd/sparsed.tmpfiles $(DESTDIR)$(TMPFILESDIR)/sparsed.conf
	install -Dm644 README.md $(DESTDIR)$(DOCDIR)/README.md
	for f in models/tiny/*; do install -Dm644 $$f $(DESTDIR)$(DATADIR)/models/tiny/$$(basename $$f); done
	sed -e 's#"model": *"models/tiny"#"model": "$(DATADIR)/models/tiny"#' \
	    -e 's#"state_dir": *"[^"]*"#"state_dir": "/var/lib/sparsed"#' config/sparsed.json > $(BUILD)/sparsed.json
	install -Dm644 $(BUILD)/sparsed.json $(DESTDIR)$(DATADIR)/sparsed.json.default
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/sparsed/sparsed.json ]; then \
	    echo "install: keeping existing $(DESTDIR)$(SYSCONFDIR)/sparsed/sparsed.json"; \
	else install -Dm640 $(BUILD)/sparsed.json $(DESTDIR)$(SYSCONFDIR)/sparsed/sparsed.json; fi

# The config in $(SYSCONFDIR) is the operator's: uninstall leaves it.
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALL_FILES))
	-rmdir $(DESTDIR)$(DATADIR)/models/tiny $(DESTDIR)$(DATADIR)/models $(DESTDIR)$(DATADIR) $(DESTDIR)$(DOCDIR) 2>/dev/null

# ---- Fuzzing and sanitizer variants (loadtest helper) ----
#   make fuzz    libFuzzer targets fuzz/fuzz_*.c (clang, ASan + UBSan) into build-fuzz/fuzz/
#   make ubsan   UBSan build into build-ubsan/;  make tsan   ThreadSanitizer build into build-tsan/
FUZZ_BUILD ?= build-fuzz
FUZZ_CC    ?= clang
FUZZ_SAN    = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_SRCS   = $(wildcard fuzz/fuzz_*.c)
FUZZ_BINS   = $(FUZZ_SRCS:fuzz/%.c=$(BUILD)/fuzz/%)

.PHONY: fuzz fuzz-bins ubsan tsan
# The library objects get coverage instrumentation (fuzzer-no-link); only the targets link
# libFuzzer's main.
fuzz:
	$(MAKE) BUILD=$(FUZZ_BUILD) CUDA=0 CC=$(FUZZ_CC) OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" fuzz-bins

fuzz-bins: $(FUZZ_BINS)

$(BUILD)/fuzz/%: fuzz/%.c fuzz/fuzz_util.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $< $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)

ubsan:
	$(MAKE) BUILD=build-ubsan CUDA=0 OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=undefined -fno-sanitize-recover=undefined" all

tsan:
	$(MAKE) BUILD=build-tsan CUDA=0 OPT="-O1 -g" SAN="-fsanitize=thread" all
