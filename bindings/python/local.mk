# bindings/python/: the Python package bitwheel (pure Python, over
# python3-protobuf).  Its protobuf module (bitwheel_pb2.py and .pyi, from
# proto/bitwheel.proto by protoc), its exception classes (_codes.py, by
# gen_codes.py from the ErrorCode enum) and _version.py (configure.ac's
# version) are generated, and kept in the source tree as generated: so
# `pip install ./bindings/python` and `python3 -m build bindings/python`
# work from a checkout or an sdist with no autotools, no protoc and no
# build-time code generation (protoc is not on PyPI, grpcio-tools' is 20 MB
# and not in Debian 12 in a usable version).  `make python-generated`
# writes them again; tests/test_generated.py fails when they are stale
# (the descriptor protoc makes from the proto, _codes.py and the version).
# The package is staged in the build directory, bindings/python/stage/,
# a copy of what pip packs; the pytest suites run against that stage and
# real daemons from make check; make install hands the stage to pip
# (setuptools backend, pyproject.toml).  All of it only when configure
# found Python (BW_HAVE_PYTHON).

bw_py_stage = bindings/python/stage
bw_py_generated = \
	bindings/python/bitwheel/bitwheel_pb2.py \
	bindings/python/bitwheel/bitwheel_pb2.pyi \
	bindings/python/bitwheel/_codes.py \
	bindings/python/bitwheel/_version.py
bw_py_modules = \
	bindings/python/bitwheel/__init__.py \
	bindings/python/bitwheel/_core.py \
	bindings/python/bitwheel/_errors.py \
	bindings/python/bitwheel/aio.py \
	bindings/python/bitwheel/client.py \
	bindings/python/bitwheel/py.typed \
	$(bw_py_generated)
bw_py_tests = \
	bindings/python/tests/test_client.py \
	bindings/python/tests/test_errors.py \
	bindings/python/tests/test_aio.py \
	bindings/python/tests/test_interop.py \
	bindings/python/tests/test_reconnect.py \
	bindings/python/tests/test_failures.py \
	bindings/python/tests/test_generated.py \
	bindings/python/tests/test_packaging.py
EXTRA_DIST += $(bw_py_modules) $(bw_py_tests) \
	bindings/python/tests/conftest.py \
	bindings/python/pyproject.toml \
	bindings/python/README.md \
	bindings/python/gen_codes.py

# One stamp for the whole stage, made again from scratch whenever a source
# changes.
$(bw_py_stage)/.stamp: $(bw_py_modules) bindings/python/pyproject.toml \
		bindings/python/README.md
	$(AM_V_GEN)rm -rf $(bw_py_stage) && \
	$(MKDIR_P) $(bw_py_stage)/bitwheel && \
	for f in $(bw_py_modules); do \
		cp $(srcdir)/$$f $(bw_py_stage)/bitwheel/ || exit 1; \
	done && \
	cp $(srcdir)/bindings/python/pyproject.toml \
		$(srcdir)/bindings/python/README.md $(bw_py_stage)/ && \
	touch $@

# The generated modules, written into the source tree (they are committed):
# after a change of proto/bitwheel.proto or of configure.ac's version.
python-generated:
	@test -n "$(PROTOC)" && test -n "$(PYTHON)" || { echo \
		"python-generated: needs protoc and Python (install" \
		"protobuf-compiler python3-protobuf, run configure again)" >&2; \
		exit 1; }
	$(AM_V_GEN)d=$(srcdir)/bindings/python/bitwheel && \
	$(PROTOC) -I$(srcdir)/proto --python_out=$$d --pyi_out=$$d \
		$(srcdir)/proto/bitwheel.proto && \
	$(PYTHON) $(srcdir)/bindings/python/gen_codes.py $$d \
		$(srcdir)/proto/bitwheel.proto $$d/_codes.py && \
	printf '%s\n' '"""The package'"'"'s version: configure.ac'"'"'s, written by make' \
		'python-generated (bindings/python/local.mk)."""' '' \
		'__version__ = "$(VERSION)"' >$$d/_version.py

if BW_HAVE_PYTHON
noinst_DATA = $(bw_py_stage)/.stamp
TESTS += $(bw_py_tests)
bw_py_enabled = yes
else
bw_py_enabled = no
endif

# Each test file is one test of the harness, run by pytest with the paths
# of this build's programs (distcheck's build finds its own) and the stage
# on PYTHONPATH; nothing is written to the source tree.
TEST_EXTENSIONS = @EXEEXT@ .test .py
PY_LOG_COMPILER = env BITWHEELD=$(abs_top_builddir)/daemon/bitwheeld \
	BWCTL=$(abs_top_builddir)/client/bwctl \
	PROTOC="$(PROTOC)" BW_VERSION="$(VERSION)" \
	PYTHONPATH=$(abs_top_builddir)/$(bw_py_stage) \
	PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m pytest -p no:cacheprovider
AM_PY_LOG_FLAGS = -v -rs

# pip puts the package and its dist-info in $(pythondir) (configure:
# --with-pythondir), DESTDIR respected; uninstall removes those two.
install-data-local: bw-python-install
uninstall-local: bw-python-uninstall
clean-local: bw-python-clean

bw-python-install: $(noinst_DATA)
	@test $(bw_py_enabled) = yes || exit 0; \
	echo "  PIP      bitwheel -> $(DESTDIR)$(pythondir)"; \
	$(MKDIR_P) "$(DESTDIR)$(pythondir)" && \
	$(PYTHON) -m pip install --quiet --no-deps --no-index \
		--no-build-isolation --no-cache-dir --disable-pip-version-check \
		--root-user-action=ignore --upgrade \
		--target "$(DESTDIR)$(pythondir)" $(bw_py_stage)

bw-python-uninstall:
	@test $(bw_py_enabled) = yes || exit 0; \
	rm -rf "$(DESTDIR)$(pythondir)/bitwheel" \
		"$(DESTDIR)$(pythondir)"/bitwheel-*.dist-info

bw-python-clean:
	-rm -rf $(bw_py_stage)

.PHONY: python-generated bw-python-install bw-python-uninstall bw-python-clean
