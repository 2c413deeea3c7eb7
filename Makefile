# The agent's build. Every tool the targets need is installed here, pinned,
# into .tools/ (ignored by git).

GO          ?= go
BIN         := bin/agent
TOOLS       := $(CURDIR)/.tools
STATICCHECK := $(TOOLS)/staticcheck
STATICCHECK_VERSION := v0.8.2
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X main.version=$(VERSION)
# Fuzzing with fsync-heavy inputs: a tmpfs keeps the fuzzer's shared memory
# and temp dirs off the disk when one is there.
FUZZ_TMPDIR := $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm || echo $${TMPDIR:-/tmp})
FUZZTIME    ?= 3m

.PHONY: all build tools test faults demo bench fuzz crash lint clean

all: build

# A static binary (no cgo): it runs on any Linux of its architecture,
# whatever its libc, and maps no libc (about 1.5 MB less resident). DNS and
# user lookups are Go's own; `service install --run-as` asks getent for
# accounts /etc/passwd does not hold (LDAP, sssd).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/agent

## tools: the real AI CLIs the executors are tested against (npm, pinned, into .tools/).
tools:
	./scripts/tools.sh

# Four parallel tests at a time in a package, not GOMAXPROCS (2 on the
# machines the suite runs on): most of them wait on subprocesses, timers
# and loopback rather than compute, and cmd/agent's end-to-end tests ran
# near go test's 10-minute limit two at a time on a loaded machine.
TEST_PARALLEL ?= 4
# A package's whole run, not a test's: a test that hangs fails on its own
# wait's limit (testkit.WaitFor, 3 minutes) long before this; cmd/agent's
# end-to-end suite alone takes 6 to 10 minutes under the race detector on
# a loaded 2-core machine, go test's default limit for a package.
TEST_TIMEOUT ?= 30m

## test: the whole suite under the race detector (fuzz seeds and 50 crash kills included); the control plane's tests once more over PostgreSQL (a throwaway cluster; skipped in one line where none is installed).
test: tools
	$(GO) test -race -count=1 -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) ./...
	AGENT_TEST_CP_STORE=postgres $(GO) test -race -count=1 -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) ./controlplane/server/

## faults: the fault suite (needs root: it mounts tmpfs); prints a table.
faults: tools
	./scripts/faults.sh

## demo: the whole system on embedded defaults.
demo: build
	./$(BIN) demo

## bench: the outbox, delivery and the idle agent beside peers (scripts/bench/, BENCHMARKS.md); BENCH_FLAGS=-quick for a smoke run.
bench:
	./scripts/bench.sh $(BENCH_FLAGS)

## fuzz: fuzz every parser of outside input for $(FUZZTIME) each: outbox recovery, task files, API bodies, the executors' protocol decoders.
FUZZ_TARGETS := ./outbox:FuzzOpen ./outbox:FuzzDecodeRecordFast ./outbox:FuzzValidJSON ./state:FuzzLoadTaskFile ./controlplane/server:FuzzAPIBodies ./runner/codex:FuzzCodexMessage ./runner/claude:FuzzClaudeLine ./runner/acp:FuzzSessionUpdate ./runner/exec:FuzzExecEvent
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz $$fn ($$pkg) for $(FUZZTIME)"; \
		TMPDIR=$(FUZZ_TMPDIR) $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 100x $$pkg || exit 1; done

## crash: the SIGKILL crash test with 1000 kills.
crash:
	OUTBOX_CRASH_KILLS=1000 $(GO) test -count=1 -run 'Crash' -v -timeout 30m ./outbox

$(STATICCHECK):
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## lint: gofmt, go vet and staticcheck.
lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

clean:
	rm -rf bin
