# bindings/python/: the Python package bitwheel (pure Python, over
# python3-protobuf).  The package is staged in the build directory,
# bindings/python/stage/, from the sources here plus three generated
# modules: bitwheel_pb2.py (protoc, from proto/bitwheel.proto), _codes.py
# (gen_codes.py: one exception class per ErrorCode) and _version.py.  The
# pytest suites run against that stage and real daemons from make check;
# make install hands the stage to pip (setuptools backend, pyproject.toml).
# All of it only when configure found Python (BW_HAVE_PYTHON).

bw_py_stage = bindings/python/stage
bw_py_modules = \
	bindings/python/bitwheel/__init__.py \
	bindings/python/bitwheel/_core.py \
	bindings/python/bitwheel/_errors.py \
	bindings/python/bitwheel/aio.py \
	bindings/python/bitwheel/client.py \
	bindings/python/bitwheel/py.typed
bw_py_tests = \
	bindings/python/tests/test_client.py \
	bindings/python/tests/test_errors.py \
	bindings/python/tests/test_aio.py \
	bindings/python/tests/test_interop.py \
	bindings/python/tests/test_reconnect.py \
	bindings/python/tests/test_failures.py
EXTRA_DIST += $(bw_py_modules) $(bw_py_tests) \
	bindings/python/tests/conftest.py \
	bindings/python/pyproject.toml \
	bindings/python/README.md \
	bindings/python/gen_codes.py

# One stamp for the whole stage: the copies and the generated modules are
# made together, from scratch, whenever a source changes.
$(bw_py_stage)/.stamp: $(bw_py_modules) bindings/python/pyproject.toml \
		bindings/python/README.md bindings/python/gen_codes.py \
		proto/bitwheel.proto
	$(AM_V_GEN)rm -rf $(bw_py_stage) && \
	$(MKDIR_P) $(bw_py_stage)/bitwheel && \
	for f in $(bw_py_modules); do \
		cp $(srcdir)/$$f $(bw_py_stage)/bitwheel/ || exit 1; \
	done && \
	cp $(srcdir)/bindings/python/pyproject.toml \
		$(srcdir)/bindings/python/README.md $(bw_py_stage)/ && \
	echo '__version__ = "$(VERSION)"' >$(bw_py_stage)/bitwheel/_version.py && \
	$(PROTOC) -I$(srcdir)/proto --python_out=$(bw_py_stage)/bitwheel \
		--pyi_out=$(bw_py_stage)/bitwheel \
		$(srcdir)/proto/bitwheel.proto && \
	$(PYTHON) $(srcdir)/bindings/python/gen_codes.py \
		$(bw_py_stage)/bitwheel $(srcdir)/proto/bitwheel.proto \
		$(bw_py_stage)/bitwheel/_codes.py && \
	touch $@

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

.PHONY: bw-python-install bw-python-uninstall bw-python-clean
