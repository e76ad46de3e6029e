# Two commands matter: `make lab` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --disable-pip-version-check -c constraints.txt
# On a Linux laptop, PyPI's torch is a large CUDA build; to get the small CPU
# build, point pip at PyTorch's CPU wheel index, e.g.
#   make lab PIP_EXTRA="--extra-index-url https://download.pytorch.org/whl/cpu"
PIP_EXTRA ?=
# A PyPI mirror (in China, PyPI itself is slow or unreachable), e.g.
#   make lab PIP_INDEX_URL=https://mirrors.huaweicloud.com/repository/pypi/simple
# (pip reads PIP_INDEX_URL from the environment too; here it also shows in `make -n`).
PIP_INDEX_URL ?=
# An offline install (a room with bad Wi-Fi): `make wheelhouse` once with network,
# then `make lab WHEELHOUSE=wheelhouse` installs from that folder only.
WHEELHOUSE ?=
# What every pip call below is given (tests/course/test_environments.py checks it): a
# variable of its own, because `make lab PIP_EXTRA=...` on the command line would
# override a `PIP_EXTRA +=` here.
PIP_FROM := $(strip $(PIP_EXTRA) $(if $(PIP_INDEX_URL),--index-url $(PIP_INDEX_URL)) \
	$(if $(WHEELHOUSE),--no-index --find-links $(WHEELHOUSE)))
# The notebooks' metadata names this kernel (tests/course/test_jupyter_setup.py checks it).
# It is installed into the venv (--sys-prefix), where the venv's JupyterLab looks first:
# each clone's notebooks run in that clone's .venv, never in another clone's.
KERNEL_NAME := collective-course
KERNEL_DISPLAY := Collective communication course
# JupyterLab settings for the course (news pop-up off, line numbers on), applied
# inside the venv only; your own settings in ~/.jupyter are never read or written.
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json
LAB_ENV := JUPYTERLAB_SETTINGS_DIR=$(abspath $(VENV))/etc/jupyter/lab/user-settings \
	JUPYTERLAB_WORKSPACES_DIR=$(abspath $(VENV))/etc/jupyter/lab/workspaces
# Jupyter refuses to run as root unless told; containers often run as root.
JUPYTER_ARGS ?= $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)
# `make lab COURSE_LANG=zh_CN`: JupyterLab's menus in Chinese, opened on the Chinese
# notebooks (notebooks/zh_CN/). Not LANG: make takes LANG from every shell, and a LANG
# given to make reaches every recipe, the kernel and the ranks, where glibc's zh_CN is
# GB2312 and printing "µs" fails. The choice is made for this run only (a default
# setting read from jupyter/lang/zh_CN/ through JUPYTER_CONFIG_PATH): a later plain
# `make lab` is English again, unless you pick a language in JupyterLab's own menu.
COURSE_LANG ?=
ifneq ($(filter-out zh_CN,$(COURSE_LANG)),)
$(error COURSE_LANG=$(COURSE_LANG) is not a language of the course: use COURSE_LANG=zh_CN, or leave it out for English)
endif
ifeq ($(COURSE_LANG),zh_CN)
LAB_LANG_STAMP := $(VENV)/.stamp-lang-zh_CN
LAB_LANG_ENV := JUPYTER_CONFIG_PATH=$(abspath jupyter/lang/zh_CN)$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH))
LAB_LANG_DIR = $(if $(wildcard $(LAB_DIR)/zh_CN),/zh_CN)
endif

# The solution notebooks that train: `make test` runs their nbval a second time under other
# CPU kernels than this machine's own (AVX2's on an AVX-512 machine, the baseline's on an
# AVX2 one), torch's, MKL's and oneDNN's alike, so that a stored output whose last digits
# depend on the vector width fails here, not on a learner's laptop (issue 33). Not on Arm,
# where these settings do not apply: see the README, "Stored outputs on another CPU".
TRAINING_NOTEBOOKS := notebooks/solutions/07_overlap.ipynb \
	notebooks/solutions/08_scaling_compression.ipynb notebooks/solutions/10_capstone.ipynb
KERNELS_AVX2 := ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
KERNELS_DEFAULT := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41

.PHONY: lab test test-gpu gpu-wheels test-browser test-slurm lint format notebooks check-notebooks execute-notebooks unit nbval clean \
	slides execute-slides wheelhouse translations npu site test-site

$(PY):
	$(PYTHON) -m venv $(VENV)

# Stamp files: a second `make lab` installs nothing new unless pyproject.toml changed.
$(VENV)/.stamp-lab: pyproject.toml kit/pyproject.toml constraints.txt | $(PY)
	$(PIP) $(PIP_FROM) -e '.[lab]' -e ./kit
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL_NAME) --display-name "$(KERNEL_DISPLAY)" >/dev/null
	touch $@

$(LAB_SETTINGS): jupyter/overrides.json | $(PY)
	mkdir -p $(dir $@)
	cp jupyter/overrides.json $@

$(VENV)/.stamp-test: pyproject.toml kit/pyproject.toml constraints.txt | $(PY)
	$(PIP) $(PIP_FROM) -e '.[lab,test]' -e './kit[maintainer]'
	touch $@

$(VENV)/.stamp-browser: $(VENV)/.stamp-test
	$(PIP) $(PIP_FROM) -e '.[lab,test,browser,zh-cn]' -e './kit[maintainer]'
	touch $@

# `make site`'s Sphinx, MyST-NB, book theme and jieba (the `site` extra).
$(VENV)/.stamp-site: $(VENV)/.stamp-test
	$(PIP) $(PIP_FROM) -e '.[lab,test,site]' -e './kit[maintainer]'
	touch $@

# JupyterLab's Chinese language pack (the `zh-cn` extra).
$(VENV)/.stamp-lang-zh_CN: $(VENV)/.stamp-lab
	$(PIP) $(PIP_FROM) -e '.[lab,zh-cn]' -e ./kit
	touch $@

# The browser that `make test-browser` drives: Debian's chromium, installed with
# apt-get when missing (as root), never Playwright's own download.
CHROMIUM ?= /usr/bin/chromium

# torch_npu on an Ascend server (README, "On an Ascend NPU server"), in its documented
# order: torch first (`make lab`: constraints.txt's 2.13.0, the CPU build with PIP_EXTRA),
# then pyyaml and setuptools, then the npu extra (torch-npu==2.13.0, paired with torch 2.13.0).
npu: $(VENV)/.stamp-lab
	$(PIP) $(PIP_FROM) pyyaml setuptools
	$(PIP) $(PIP_FROM) -e '.[npu]'

# The learners' copies in notebooks/ are committed; `make lab` never rewrites
# them, so your answers are safe. (`make notebooks` regenerates them.)
# JupyterLab serves the whole repository, so that a notebook's link to ../REFERENCES.md
# opens (JupyterLab cannot open a file above the folder it serves), and it opens on
# LAB_DIR, a folder of the repository: `make lab LAB_DIR=slides` to present the decks.
LAB_DIR ?= notebooks
LAB_PATH = $(patsubst $(CURDIR)/%,%,$(patsubst $(CURDIR),$(CURDIR)/,$(abspath $(LAB_DIR))))
LAB_ARGS = --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/$(LAB_PATH)$(LAB_LANG_DIR)
lab: $(VENV)/.stamp-lab $(LAB_SETTINGS) $(LAB_LANG_STAMP)
	$(if $(filter /%,$(LAB_PATH)),$(error LAB_DIR=$(LAB_DIR) is not a folder of this repository \
		($(CURDIR)): JupyterLab serves the repository; give a folder inside it, e.g. LAB_DIR=slides))
	$(LAB_ENV) $(LAB_LANG_ENV) $(PY) -m jupyter lab $(JUPYTER_ARGS) $(LAB_ARGS)

test: $(VENV)/.stamp-test
	$(PY) -m ruff check labsupport kit tests benchmarks examples slides site i18n notebooks/solutions
	$(PY) -m ruff format --check labsupport kit tests benchmarks examples slides site i18n notebooks/solutions
	$(PY) -m labkit.exercises check
	$(PY) -m i18n check
	$(PY) -m pytest tests -q --ignore=tests/browser --ignore=tests/slurm
	LABSUPPORT_LIVE_AFTER=inf $(PY) -m pytest -q --nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg -p no:cacheprovider notebooks/solutions/*.ipynb
	cap=$$($(PY) -c "import torch; print(torch.backends.cpu.get_cpu_capability())"); \
	case "$$cap" in AVX512*) other="$(KERNELS_AVX2)";; AVX2) other="$(KERNELS_DEFAULT)";; *) other="";; esac; \
	if [ -z "$$other" ]; then echo "CPU kernels $$cap: no other x86 kernels to run the training notebooks under"; \
	else echo "the training notebooks again, under other CPU kernels than this machine's $$cap: $$other"; \
	env $$other LABSUPPORT_LIVE_AFTER=inf $(PY) -m pytest -q --nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg -p no:cacheprovider $(TRAINING_NOTEBOOKS); fi
	LABSUPPORT_LIVE_AFTER=inf $(PY) -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider notebooks/*.ipynb
	LABSUPPORT_LIVE_AFTER=inf $(PY) -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider slides/*.ipynb

# The course in a real browser (tests/browser/, about 6 minutes): JupyterLab as `make lab`
# opens it (links to REFERENCES.md, the widest text line), notebooks 00, 03 and 04 (Run All,
# sliders), the stop button, the zh-CN edition, and the built decks offline, every slide
# fitting 1280x720; and the site (`make site`, tests/browser/test_site.py, about 5 minutes more).
test-browser: $(VENV)/.stamp-browser $(VENV)/.stamp-site
	bash tests/browser/ensure_chromium.sh $(CHROMIUM)
	bash tests/browser/ensure_cjk_font.sh
	CHROMIUM=$(CHROMIUM) $(PY) -m pytest tests/browser -q -p no:cacheprovider

# The site alone in the browser (tests/browser/test_site.py, part of `make test-browser`):
# `make site`, then every page offline, the language switch, search, widgets, plots, the
# width at 1280 px, and every internal link and anchor.
test-site: $(VENV)/.stamp-browser $(VENV)/.stamp-site
	bash tests/browser/ensure_chromium.sh $(CHROMIUM)
	bash tests/browser/ensure_cjk_font.sh
	CHROMIUM=$(CHROMIUM) $(PY) -m pytest tests/browser/test_site.py -q -p no:cacheprovider

# The sbatch scripts of examples/slurm/ on a real one-node Slurm started on this machine
# (tests/slurm/, a few minutes). As root on Debian or Ubuntu it installs slurm-wlm and
# munge with apt-get when missing; elsewhere its tests are skipped, saying why.
test-slurm: $(VENV)/.stamp-test
	bash tests/slurm/ensure_slurm.sh
	$(PY) -m pytest tests/slurm -q -rs -p no:cacheprovider

# The CUDA and NCCL paths on a lent NVIDIA machine (tests/gpu/README.md, issue 36), in at
# most 5 minutes: `make test-gpu PY=python3` runs with that machine's own Python and torch
# and installs nothing into them (Jupyter's wheels, from `make gpu-wheels`, go to a temporary
# folder). The report (gpu-check.md, .json, .log) goes to $OUT there, else to GPU_REPORT.
# Here, `make test` runs its dry run (tests/gpu/test_gpu_check.py): CPU, gloo, short steps.
GPU_REPORT ?= $(or $(OUT),gpu-check)
test-gpu:
	PYTHONPATH=$(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH)) $(PY) tests/gpu/run_gpu_check.py --out $(GPU_REPORT)

# The wheels `make test-gpu` carries to that machine (cp312, manylinux x86-64; what its image
# lacks): into .whl/ (git-ignored), with their sizes. Needs network; PYTHON's pip downloads.
gpu-wheels:
	$(PYTHON) tests/gpu/prepare_wheels.py

lint: $(VENV)/.stamp-test
	$(PY) -m ruff check labsupport kit tests benchmarks examples slides site i18n notebooks/solutions

format: $(VENV)/.stamp-test
	$(PY) -m ruff format labsupport kit tests benchmarks examples slides site i18n notebooks/solutions
	$(PY) -m ruff check --fix labsupport kit tests benchmarks examples slides site i18n notebooks/solutions

# Regenerate the learners' notebooks (notebooks/*.ipynb) from the solutions.
notebooks: $(VENV)/.stamp-test
	$(PY) -m labkit.exercises build

# The zh-CN edition (i18n/README.md): a template per notebook, deck and guide, each
# catalogue in i18n/zh_CN/LC_MESSAGES/ merged with it (a changed block keeps its old
# translation, marked fuzzy), the translated copies regenerated, coverage printed.
translations: $(VENV)/.stamp-test
	$(PY) -m i18n update

# Re-run the solution notebooks and store their outputs (then rebuild learners' copies).
execute-notebooks: $(VENV)/.stamp-test
	$(PY) -m labkit.exercises execute notebooks/solutions/*.ipynb
	$(PY) -m labkit.exercises build

# Workshop decks (slides/NN_name.ipynb) as static reveal.js HTML in slides/_build/,
# every script, style and font bundled (fetched once from the npm registry, checked).
slides: $(VENV)/.stamp-test
	$(PY) slides/build.py

# The course as a static site (site/README.md): the solution notebooks with their stored
# outputs (nothing executed), English and zh-CN, the decks, the instructor's guide and the
# references, in site/_build/html/ (en/, zh_CN/, slides/); it reads offline. Read it with
# `python -m http.server -d site/_build/html`.
site: $(VENV)/.stamp-site
	$(PY) slides/build.py
	$(PY) site/build.py

# Re-run the decks and store their outputs (the pictures the HTML shows).
execute-slides: $(VENV)/.stamp-test
	$(PY) -m labkit.exercises execute slides/[0-9][0-9]_*.ipynb

# Every wheel the course needs (lab + test + zh-cn extras, the build backend, torch from
# wherever pip finds it: PIP_EXTRA), for this machine's OS and Python.
wheelhouse: | $(PY)
	$(PY) -m pip download --disable-pip-version-check -c constraints.txt $(PIP_FROM) \
		-d wheelhouse '.[lab,test,zh-cn]' 'setuptools>=64' wheel pip
	@echo "Offline install: make lab WHEELHOUSE=wheelhouse (or make test WHEELHOUSE=wheelhouse)"

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
