# Weft — `make help` lists the targets.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)

GO        ?= go
GOFLAGS_TEST ?= -count=1 -timeout 15m

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

.PHONY: run
run: deps-run build ## install what is missing, build, and serve on 127.0.0.1:8080 (private Postgres under ./data)
	./weft

.PHONY: build
build: ## build the weft binary
	$(GO) build -o weft .

.PHONY: test
test: deps-test lint ## install what tests need, check formatting, run every test (Postgres + Chromium)
	$(GO) test $(GOFLAGS_TEST) ./...

.PHONY: lint
lint: ## gofmt, go vet, templ generate and go mod tidy must leave no diff
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$')); \
	  if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	@$(GO) tool templ generate >/dev/null 2>&1; \
	  if [ -n "$$(git status --porcelain -- '*_templ.go')" ]; then \
	    echo "go tool templ generate changed generated files:"; git status --porcelain -- '*_templ.go'; exit 1; fi

.PHONY: screens
screens: deps-test ## screenshots of the main screens at 1280x900 and 390x844, light and dark, into screens/ (a browser test; ~1 min)
	@rm -rf screens && mkdir -p screens
	WEFT_ARTIFACTS=$(CURDIR) $(GO) test ./handlers -run '^TestBrowserEveryMainPageFits' -count=1 -timeout 10m
	@ls screens/*.png | wc -l | xargs printf '%s screenshots in screens/\n'

FUZZTIME ?= 30s
FUZZPKGS ?= ./extract/ ./media/ ./views/ ./chat/ ./handlers/ ./importer/

.PHONY: fuzz
fuzz: ## fuzz every reader, detection, Sniff, thumbnails, markdown, import and SSE framing, FUZZTIME each (default 30s); findings land in testdata/fuzz
	@set -e; for pkg in $(FUZZPKGS); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$target"; \
	    $(GO) test $$pkg -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME); \
	  done; \
	done

.PHONY: deps-run deps-test deps-eval
deps-run: ## install the PostgreSQL server, pgvector and espeak-ng (Debian/Ubuntu, as root)
	@bash scripts/deps.sh run
deps-test: ## deps-run plus Debian's chromium (and espeak-ng for the read-aloud tests)
	@bash scripts/deps.sh test
deps-eval: ## deps-run plus Debian's python3.11-doc (the corpus of the second retrieval evaluation set)
	@bash scripts/deps.sh eval

.PHONY: container-check
container-check: ## build the Dockerfile with podman and run the image against a throwaway PostgreSQL (root, Debian; ~5 min)
	@bash scripts/container-check.sh

.PHONY: bench
BENCH_BASE ?= HEAD~1
bench: deps-run ## load-test Weft against a fake model, side by side with BENCH_BASE (default HEAD~1; ~20 min; BENCHFLAGS=... passes flags), results in bench/results/
	@mkdir -p bench/results
	$(GO) run ./bench/load -compare $(BENCH_BASE) -out bench/results/latest.txt $(BENCHFLAGS)
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchmem ./views/ ./internal/fakeollama/ ./handlers/ 2>&1 \
	  | grep -E '^(goos|goarch|pkg|cpu|Benchmark|ok|PASS|FAIL|---|panic)' | tee bench/results/gobench.txt
	$(GO) run ./bench/rag -mode bench -chunks 100000 -writers 2 -out bench/results/rag-100k.txt $(RAGBENCHFLAGS)

.PHONY: eval-rag
eval-rag: deps-eval ## retrieval quality of vector, text and hybrid search on rag/testdata/eval and rag/testdata/eval-python
	@mkdir -p bench/results
	$(GO) run ./bench/rag -mode check-eval
	$(GO) run ./bench/rag -mode eval -out bench/results/eval-rag.txt $(EVALFLAGS)
	$(GO) run ./bench/rag -mode baseline -out bench/results/baseline-rag.txt
