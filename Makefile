# dplab — the commands a newcomer needs. See README.md and the book (docs/, `make docs`).
CARGO ?= cargo
DPLAB := target/release/dplab
JOBS ?= 2
# The offline dataset mirror of this project's machines and CI, when it exists. run-all fetches
# what the pipelines read (`dplab data fetch --pipelines`: cache, then mirror, then the upstream
# URL, all checked against data/datasets.toml); pipelines whose data still is not here are
# skipped with a warning and shown in the report as "data not available".
MIRROR ?= $(wildcard ../shared/datasets)
export DPLAB_DATA_MIRROR ?= $(if $(MIRROR),$(abspath $(MIRROR)),)

.PHONY: build docs intro wheel wheel-portable python-test python-check run-all report test test-downloads figure-check parquet-check pyenv pyenv-libraries external-check bench-worker browser-test test-slurm golden bench bench-engine bench-audit lint fuzz clean

build:
	$(CARGO) build --release --locked

## Pipelines whose programs need numpy (the DP-Sniper suite's mechanisms) find it in target/pyenv:
## its python3 comes first on PATH where the pipelines run (the interpreter is the machine's, so
## programs probed by `python3 --version` keep their store keys).
WITH_PYENV = PATH=$(abspath target/pyenv/bin):$$PATH TMLT_CORE_PYTHON=$(abspath target/pyenv-tmlt/bin/python3)

## The book: the stage-kind pages written again from the kinds' own descriptions (what
## `dplab list` prints; `make test` fails while the committed ones are stale), then the HTML
## into target/book/ (open target/book/index.html). mdBook is installed on first use, pinned.
MDBOOK_VERSION := 0.4.52
docs: build
	rm -rf docs/src/kinds
	$(DPLAB) list --markdown docs/src/kinds
	command -v mdbook >/dev/null && mdbook --version | grep -q "v$(MDBOOK_VERSION)" || $(CARGO) install mdbook --locked --version $(MDBOOK_VERSION)
	mdbook build docs

## The book's introduction, written from README.md's opening (tests/it/docs.rs says how, and
## fails `make test` while the committed page is stale).
intro:
	DPLAB_DOCS_UPDATE=1 $(CARGO) test --release --locked --test it docs::the_introduction_is_the_readme_s_opening

## Reproduce every experiment: fetches the datasets the pipelines read (verified by sha256; what
## could not be obtained is listed, and those pipelines are skipped), writes results/<pipeline>/,
## then results/index.html (the report, also when a pipeline failed: it shows what there is; the
## exit status is the run's: data that could not be obtained does not fail it, the report and
## the lines above say so).
run-all: build pyenv pyenv-libraries
	$(DPLAB) data fetch --pipelines pipelines/ || test $$? -eq 1
	status=0; $(WITH_PYENV) $(DPLAB) run pipelines/ --out results --skip-unavailable --allow-exec || status=$$?; \
	$(DPLAB) report results --pipelines pipelines/ && exit $$status

## results/index.html from what results/ holds now.
report: build
	$(DPLAB) report results --pipelines pipelines/

## Unit and integration tests, `dplab schema` against an independent validator (tests/schema-check),
## then every pipeline under --profile ci compared with tests/golden/, every figure rendered and
## held against the frame it drew, and the report in Chromium.
## Every run here uses a fresh instance store, so nothing passes because of stored work.
## The tests must link the library `build` made, not compile it again (tests/one-build/check.py).
test: build pyenv pyenv-libraries
	rm -rf target/test-store target/ci-store target/ci-results
	$(MAKE) wheel
	$(CARGO) test --release --locked --no-run --message-format json | python3 tests/one-build/check.py
	DPLAB_STORE=$(abspath target/test-store) INSTA_UPDATE=no $(CARGO) test --release --locked
	DPLAB=$(abspath $(DPLAB)) $(CARGO) test --release --locked -p dplab-schema-check
	$(WITH_PYENV) $(DPLAB) run pipelines/ --profile ci --out target/ci-results --jobs $(JOBS) --skip-unavailable --store target/ci-store --allow-exec
	$(DPLAB) compare target/ci-results tests/golden $(if $(DPLAB_DATA_MIRROR),,--allow-missing)
	$(MAKE) figure-check
	$(MAKE) parquet-check
	$(MAKE) external-check
	$(MAKE) python-check
	tests/browser/run.sh target/ci-results pipelines

## Every figure of target/ci-results rendered by librsvg (rsvg-convert; installed with apt-get
## when missing, as root) and held against the frame of what it drew: each series of the frame
## in the legend, each legend entry drawn. See tests/figure-check/check.py.
figure-check:
	command -v rsvg-convert >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends librsvg2-bin >/dev/null; }
	python3 tests/figure-check/check.py target/ci-results

## Every Parquet frame of target/ci-results read by pyarrow and duckdb (in a Python environment
## made here, target/pyenv, from the package registry) and held against its CSV: names, types
## (integers stay integers), values, and the key-value metadata. See tests/parquet-check/check.py.
parquet-check: pyenv
	target/pyenv/bin/python tests/parquet-check/check.py target/ci-results

## The Python environment of the checks (target/pyenv): pyarrow and duckdb read our Parquet,
## numpy runs the program `dplab new --external` writes.
pyenv:
	test -x target/pyenv/bin/python || python3 -m venv target/pyenv || { rm -rf target/pyenv; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null && python3 -m venv target/pyenv; }
	target/pyenv/bin/python -c 'import pyarrow, duckdb, numpy' 2>/dev/null || target/pyenv/bin/pip install -q pyarrow duckdb numpy

## The DP libraries pipelines/audit/libraries.yaml audits, at these versions, from the package
## registry: OpenDP, diffprivlib (with the scikit-learn it imports: 1.7 removed a name it uses)
## and Google's python-dp into target/pyenv; Tumult's tmlt.core, which needs numpy < 2 and
## pandas < 2 on Python 3.11, into target/pyenv-tmlt, whose interpreter WITH_PYENV names in
## TMLT_CORE_PYTHON (libraries/launch_tmlt.py execs it). The versions are the table's too (libraries.csv): change
## them together. A library that does not install is left out with a warning, and the stages
## that audit it fail their probe.
OPENDP_VERSION := 0.16.0
DIFFPRIVLIB_VERSION := 0.6.6
DIFFPRIVLIB_SKLEARN_VERSION := 1.6.1
PYTHON_DP_VERSION := 1.1.5
TMLT_CORE_VERSION := 0.20.0
pyenv-libraries: pyenv
	target/pyenv/bin/pip install -q 'opendp==$(OPENDP_VERSION)' || echo 'warning: opendp $(OPENDP_VERSION) did not install: libraries.yaml audits it no further' >&2
	target/pyenv/bin/pip install -q 'diffprivlib==$(DIFFPRIVLIB_VERSION)' 'scikit-learn==$(DIFFPRIVLIB_SKLEARN_VERSION)' || echo 'warning: diffprivlib $(DIFFPRIVLIB_VERSION) did not install: libraries.yaml audits it no further' >&2
	target/pyenv/bin/pip install -q 'python-dp==$(PYTHON_DP_VERSION)' || echo 'warning: python-dp $(PYTHON_DP_VERSION) did not install: libraries.yaml audits it no further' >&2
	{ test -x target/pyenv-tmlt/bin/python || python3 -m venv target/pyenv-tmlt; } && target/pyenv-tmlt/bin/pip install -q 'tmlt.core==$(TMLT_CORE_VERSION)' \
		  || echo 'warning: tmlt.core $(TMLT_CORE_VERSION) did not install: libraries.yaml audits it no further' >&2

## What `make test` downloads, without compiling anything: the Python environments of the
## pipelines (pyenv, pyenv-libraries) and the packages python-check installs, into pip's cache.
## CI runs it beside the release build, so a fresh machine's downloads (about 3.5 minutes
## here, tmlt.core's environment 100 s of them) are not waited for one after the other.
test-downloads: pyenv pyenv-libraries
	target/pyenv/bin/pip download -q --dest target/pip-download $(PY_TEST_PACKAGES)

## What `dplab new --external` writes, run as a newcomer would (python3 with numpy first on
## PATH): it succeeds, and gives the same frames with 1 and 2 jobs.
external-check: build pyenv
	rm -rf target/external-check && mkdir -p target/external-check
	$(DPLAB) new --external mech --dir target/external-check
	for j in 1 2; do PATH=$(abspath target/pyenv/bin):$$PATH $(DPLAB) run -q target/external-check/mech.yaml --profile ci --allow-exec --no-store --jobs $$j --out target/external-check/jobs$$j || exit 1; done
	$(DPLAB) compare target/external-check/jobs1/mech target/external-check/jobs2/mech --rtol 0 --atol 0

## The Python distribution (dplab-pipelines): the binary `make build` made and the `dplab` package
## (python/dplab) in one wheel under target/wheels/, by maturin (bindings = "bin"; pyproject.toml).
## maturin runs cargo on the same profile and flags, so it reuses that build: no second compile.
MATURIN_VERSION := 1.16.0
RUFF_VERSION := 0.17.6
wheel: build pyenv
	target/pyenv/bin/python -c 'import maturin' 2>/dev/null || target/pyenv/bin/pip install -q 'maturin==$(MATURIN_VERSION)'
	rm -rf target/wheels
	target/pyenv/bin/maturin build --release --locked --out target/wheels

## A wheel for older Linux (manylinux_2_28: RHEL 8 clusters), linked with zig's glibc stubs; a
## separate build of the whole crate graph (target/portable), measured once, not run in CI.
wheel-portable: pyenv
	target/pyenv/bin/pip install -q 'maturin[zig]==$(MATURIN_VERSION)'
	PATH=$(abspath target/pyenv/bin):$$PATH CARGO_TARGET_DIR=target/portable target/pyenv/bin/maturin build --release --locked --zig --compatibility manylinux_2_28 --out target/wheels-portable

## The Python API tested as a user has it: the wheel installed with pip into a fresh virtual
## environment (target/wheel-venv) with no Rust toolchain on PATH, then tests/python (pytest) and
## the book's notebook (nbclient) against it — never against the checkout's python/.
PY_TEST_PACKAGES := pytest polars pandas pyarrow duckdb nbclient nbformat ipykernel
python-test: wheel
	$(MAKE) python-check

## python-test on the wheel already in target/wheels (`make test` makes it right after `build`:
## cargo test builds the binary with its own feature set, and a wheel made after it would
## compile the crate once more).
python-check:
	rm -rf target/wheel-venv
	python3 -m venv target/wheel-venv
	target/wheel-venv/bin/pip install -q --no-index --find-links target/wheels dplab-pipelines
	target/wheel-venv/bin/pip install -q $(PY_TEST_PACKAGES)
	cd tests/python && env -u DPLAB_STORE PATH=$(abspath target/wheel-venv/bin):/usr/local/bin:/usr/bin:/bin $(abspath target/wheel-venv/bin/python) -m pytest -q -p no:cacheprovider .

## The report in a real browser: Debian's Chromium (installed with apt-get when missing, as root),
## headless, on target/ci-results (made by `make test`; run that first). Fails if an experiment has
## no section, a figure does not load, the page logs an error or its counts differ from the
## frames. Screenshots: target/report-screenshot.png and target/report-screenshot-full.png.
browser-test: build
	tests/browser/run.sh target/ci-results pipelines

## `dplab slurm --shards 4 --wait` on a real Slurm cluster of this one machine, checked against a
## local run, then a cancelled shard and a resubmission that runs only what is missing. Installs
## Debian's slurmctld, slurmd, slurm-client and munge when missing (as root); starts and stops
## its own daemons. See tests/slurm/run.sh.
test-slurm: build
	bash tests/slurm/run.sh

## Regenerate tests/golden/ (the CSV frames, and per pipeline a short manifest.json with the run's
## profile and axes for `dplab compare`) and its lock tests/golden/VERSIONS.
## Refuses (and changes nothing) when a frame changed while its stage's store keys did not (a
## kind's output changed without a `version` bump: stores would serve it stale); frames equal for
## `dplab compare` (e.g. only wall times differ) keep their committed bytes.
## See tests/it/golden_versions.rs. Review the diff before committing.
golden: build pyenv
	rm -rf target/golden
	$(WITH_PYENV) $(DPLAB) run pipelines/ --profile ci --out target/golden --jobs $(JOBS) --no-store --allow-exec
	DPLAB_GOLDEN_UPDATE=$(abspath target/golden) $(CARGO) test --release --locked --test it golden_versions:: -- --nocapture

## Criterion benchmarks: samplers, exponential mechanism, Blahut–Arimoto sweeps, Algorithm 1 of Wu–He–Xia,
## the trigonometric mechanism's LP and its kernel queries, and an audit of the Laplace mechanism at 10⁷ draws per side.
bench:
	$(CARGO) bench --bench samplers
	$(CARGO) bench --bench rate_distortion
	$(CARGO) bench --bench near_optimal
	$(CARGO) bench --bench trig_lp
	$(CARGO) bench --bench kernel_queries
	$(CARGO) bench --bench audit
	$(MAKE) bench-engine
	$(MAKE) bench-audit
	$(MAKE) bench-worker

## The cost of a call (issue #39): benches/pipelines/worker-1e4.yaml, 10⁴ instances of a Python
## program that imports numpy and adds Laplace noise to a 100-bin histogram, in worker mode, then
## 10³ of them one process per instance; --jobs 2, no store, numpy from target/pyenv.
WORKER_BENCH := benches/pipelines/worker-1e4.yaml
bench-worker: build pyenv
	command -v /usr/bin/time >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends time >/dev/null; }
	rm -rf target/bench-worker && mkdir -p target/bench-worker
	export PATH=$(abspath target/pyenv/bin):$$PATH; \
	/usr/bin/time -f %e -o target/bench-worker/worker $(DPLAB) run $(WORKER_BENCH) -q --allow-exec --jobs 2 --no-store --out target/bench-worker/worker || exit 1; \
	/usr/bin/time -f %e -o target/bench-worker/plain $(DPLAB) run $(WORKER_BENCH) -q --allow-exec --jobs 2 --no-store --out target/bench-worker/plain \
	  --set noisy.worker=false --profile thousand || exit 1; \
	echo "worker mode, 10^4 instances: $$(cat target/bench-worker/worker) s"; \
	echo "one process per instance, 10^3 instances: $$(cat target/bench-worker/plain) s"

## The engine at scale (issue #28): benches/pipelines/engine-1e6.yaml, two axes of 1 000 values
## (10⁶ instances of mechanism.noise on a 3-row table, then one aggregate.summary over all of
## them), at 10⁵ instances (`--set` narrows an axis to 100 values) and at 10⁶, each on a fresh
## store with --jobs 2. Prints wall time and peak memory (GNU time's maximum resident set size)
## of each and the ratio of the times: the engine's cost should grow linearly. About 2 minutes.
ENGINE_BENCH := benches/pipelines/engine-1e6.yaml
bench-engine: build
	command -v /usr/bin/time >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends time >/dev/null; }
	rm -rf target/bench-engine && mkdir -p target/bench-engine
	for n in 100 1000; do \
	  /usr/bin/time -f "%e %M" -o target/bench-engine/time-$$n $(DPLAB) run $(ENGINE_BENCH) --quiet --jobs 2 \
	    --set "b={linspace: {from: 0.5, to: 5.0, num: $$n}}" \
	    --store target/bench-engine/store-$$n --out target/bench-engine/out-$$n || exit 1; \
	  read secs kb < target/bench-engine/time-$$n; \
	  echo "engine-1e6 at $$((n * 1000)) instances: $$secs s wall, peak memory $$((kb / 1024)) MiB"; \
	done; \
	awk '{t[NR] = $$1} END {printf "time ratio 10^6 / 10^5: %.1f (linear: 10)\n", t[2] / t[1]}' \
	  target/bench-engine/time-100 target/bench-engine/time-1000

## The audit at scale (issue #27): benches/pipelines/audit-scale.yaml, the Laplace mechanism and
## Report Noisy Max audited at 10.7 M validation draws per side (DP-Sniper's count) and at 10⁸,
## sampling included. Prints wall time and peak memory of each: the memory must not grow with
## the validation split (it is counted chunk by chunk). About a minute.
AUDIT_BENCH := benches/pipelines/audit-scale.yaml
bench-audit: build
	command -v /usr/bin/time >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends time >/dev/null; }
	rm -rf target/bench-audit && mkdir -p target/bench-audit
	for n in 10700000 100000000; do \
	  /usr/bin/time -f "%e %M" -o target/bench-audit/time-$$n $(DPLAB) run $(AUDIT_BENCH) --quiet --jobs 2 \
	    --set "n=[$$n]" --no-store --out target/bench-audit/out-$$n || exit 1; \
	  read secs kb < target/bench-audit/time-$$n; \
	  echo "audit-scale at $$n draws per side (Laplace and Report Noisy Max): $$secs s wall, peak memory $$((kb / 1024)) MiB"; \
	done

## Fuzz `dplab validate` (reading, parsing and planning a pipeline file) with cargo-fuzz on the
## nightly toolchain (`cargo install cargo-fuzz`). Not part of `make test`. FUZZ_TARGET=validate
## mutates bytes, validate_yaml mutates the YAML tree; both start from fuzz/seeds (real
## pipelines) and keep what they learn in fuzz/corpus/<target>; crashes go to fuzz/artifacts/.
## A panic, a run over 10 s or over 4 GiB of memory is a failure. More libFuzzer flags in
## FUZZ_ARGS (e.g. -max_len=65536: by default inputs stay at most as large as the largest seed).
FUZZ_SECONDS ?= 600
FUZZ_TARGET ?= validate
FUZZ_SANITIZER ?= none
FUZZ_ARGS ?=
NICE ?= nice -n 10
fuzz:
	mkdir -p fuzz/corpus/$(FUZZ_TARGET)
	$(NICE) $(CARGO) +nightly fuzz run --sanitizer $(FUZZ_SANITIZER) --debug-assertions $(FUZZ_TARGET) \
	  fuzz/corpus/$(FUZZ_TARGET) fuzz/seeds -- \
	  -dict=fuzz/pipeline.dict -rss_limit_mb=4096 -timeout=10 \
	  -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $(FUZZ_ARGS)

lint: pyenv
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	target/pyenv/bin/python -c 'import ruff' 2>/dev/null || target/pyenv/bin/pip install -q 'ruff==$(RUFF_VERSION)'
	target/pyenv/bin/ruff check python tests/python
	target/pyenv/bin/ruff format --check python tests/python

clean:
	rm -rf target/ci-results target/golden target/browser-test
