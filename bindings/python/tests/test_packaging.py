"""The package as pip users get it: built and installed outside autotools.

A copy of bindings/python (what a checkout holds: the generated modules
are committed) is built into an sdist and a wheel with `python3 -m build`,
and installed with pip into fresh virtual environments three ways (the
wheel, the sdist, the directory itself: `pip install ./bindings/python`).
Each installed package is imported from its environment, with the build's
stage off the path, and used against a real daemon; the first Python
example of the top README.md runs from it, and every Python block of both
READMEs and of doc/*.md must at least compile.  mypy --strict checks the package and a
user's script against the installed package.

Offline and bounded: pip gets --no-index and --no-build-isolation, and the
environments see the system's packages (--system-site-packages) for
protobuf and setuptools; each step has a timeout.  Needs the Debian
packages python3-build (the sdist and the wheel) and mypy; without them
those tests skip, saying so.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import WAIT

PY_SRC = Path(__file__).resolve().parents[1]          # bindings/python
TOP = PY_SRC.parents[1]
#: What every build of the package must hold besides the plain sources.
GENERATED = ["bitwheel/bitwheel_pb2.py", "bitwheel/bitwheel_pb2.pyi",
             "bitwheel/_codes.py", "bitwheel/_version.py",
             "bitwheel/py.typed"]
pytestmark = pytest.mark.skipif(
    os.environ.get("BW_TEST_PACKAGING") == "0",
    reason="BW_TEST_PACKAGING=0: the packaging is checked in another run")

#: pip, venv, build and mypy on a busy 2-core machine.
STEP = 120.0 * max(1, int(os.environ.get("BW_TEST_SLOW", "1") or 1))


def run(*cmd: str | Path, cwd: Path | None = None,
        env: dict[str, str] | None = None) -> str:
    """Run a command; its output, or a failure showing it."""
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=STEP)
    assert r.returncode == 0, (
        f"{' '.join(map(str, cmd))}: exit {r.returncode}\n"
        f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without the build's stage on the path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of bindings/python without build products: what a fresh
    checkout or an unpacked bitwheel tarball holds there."""
    dest = tmp_path_factory.mktemp("tree") / "python"
    shutil.copytree(PY_SRC, dest, ignore=shutil.ignore_patterns(
        "stage", "build", "dist", "*.egg-info", "__pycache__", "*.log",
        "*.trs"))
    return dest


@pytest.fixture(scope="module")
def dists(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel, by `python3 -m build` (in a copy, so the
    tree stays as it was)."""
    if importlib.util.find_spec("build") is None:
        pytest.skip("python3 -m build is not installed (Debian: "
                    "python3-build): the sdist and the wheel are not built")
    work = tmp_path_factory.mktemp("build") / "python"
    shutil.copytree(tree, work)
    out = work.parent / "dist"
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out,
        work)
    return out


def one(directory: Path, pattern: str) -> Path:
    (found,) = directory.glob(pattern)
    return found


def make_venv(where: Path, source: Path) -> Path:
    """A fresh environment with `source` pip-installed; its python."""
    run(sys.executable, "-m", "venv", "--system-site-packages",
        "--without-pip", where)
    python = where / "bin" / "python"
    # The system's pip, seen through --system-site-packages, installs into
    # the environment it runs in.
    run(python, "-m", "pip", "install", "--no-index", "--no-build-isolation",
        "--disable-pip-version-check", "--no-cache-dir", "--quiet", source,
        env=clean_env())
    return python


def test_sdist_and_wheel_hold_the_generated_modules(dists: Path) -> None:
    with tarfile.open(one(dists, "bitwheel-*.tar.gz")) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    with zipfile.ZipFile(one(dists, "bitwheel-*-py3-none-any.whl")) as z:
        wheel = set(z.namelist())
    for f in GENERATED + ["bitwheel/__init__.py", "bitwheel/client.py"]:
        assert f in names, f"the sdist lacks {f}: {sorted(names)}"
        assert f in wheel, f"the wheel lacks {f}: {sorted(wheel)}"
    assert "pyproject.toml" in names and "README.md" in names
    version = os.environ.get("BW_VERSION")
    if version:
        assert one(dists, "*.whl").name.startswith(f"bitwheel-{version}-")


USE = textwrap.dedent("""
    import asyncio, os, sys, bitwheel
    assert bitwheel.__file__.startswith(sys.prefix), bitwheel.__file__
    path = os.environ["BITWHEEL_SOCKET"]
    with bitwheel.Client(path, session="pip") as c:
        c.schedule(7, in_=0, payload=b"from pip")
    with bitwheel.Client(path, session="pip", consume=True) as c:
        f = c.next_fire(float(os.environ["WAIT"]))
        assert f is not None and f.payload == b"from pip", f
        assert f.ack(wait=True) == 1

    async def main():
        async with bitwheel.AsyncClient(path) as c:
            return await c.cancel(1)

    assert asyncio.run(main()) is False
    assert issubclass(bitwheel.NotPermitted, PermissionError)
    print(bitwheel.__version__, bitwheel.DuplicateKeyError.code_name)
""")


@pytest.fixture(scope="module")
def venvs(tree: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[dict[str, Any]]:
    """name -> the python of an environment it was installed into, made
    on first use: "tree" (pip install ./bindings/python), "wheel",
    "sdist"."""
    made: dict[str, Path] = {}

    def get(name: str, dists: Path | None = None) -> Path:
        if name not in made:
            source = tree if dists is None else one(
                dists, "*.whl" if name == "wheel" else "*.tar.gz")
            made[name] = make_venv(tmp_path_factory.mktemp(name) / "venv",
                                   source)
        return made[name]
    yield {"get": get}


@pytest.mark.parametrize("how", ["tree", "wheel", "sdist"])
def test_installed_package_talks_to_the_daemon(
        how: str, venvs: dict[str, Any], daemon: Any,
        request: pytest.FixtureRequest) -> None:
    dists = None if how == "tree" else request.getfixturevalue("dists")
    python = venvs["get"](how, dists)
    out = run(python, "-c", USE, cwd=python.parent,
              env=clean_env(BITWHEEL_SOCKET=daemon.sock, WAIT=str(WAIT)))
    version, code = out.split()
    assert code == "DUPLICATE_KEY"
    if os.environ.get("BW_VERSION"):
        assert version == os.environ["BW_VERSION"]


def python_blocks(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


#: The helper the README's quick start leaves to the reader: handle() takes
#: the first fire and ends the example (its loop waits for fires forever).
PRELUDE = textwrap.dedent("""
    class _Done(Exception):
        pass

    def handle(*args):
        print("fire", *args)
        raise _Done
""")


def test_readme_examples(venvs: dict[str, Any], daemon: Any) -> None:
    readmes = (TOP / "README.md", PY_SRC / "README.md")
    pages = sorted((TOP / "doc").glob("*.md"))
    assert pages, f"{TOP / 'doc'}: no pages"
    blocks = {p: python_blocks(p) for p in (*readmes, *pages)}
    for path, found in blocks.items():
        assert found or path in pages, f"{path}: no ```python block"
        for i, code in enumerate(found):
            try:
                ast.parse(code)
            except SyntaxError as e:
                # Snippets with a bare await run inside a coroutine.
                if "await" not in code and "async" not in code:
                    pytest.fail(f"{path}, Python block {i + 1}: {e}")
                ast.parse("async def _():\n" + textwrap.indent(code, "    "))
    # The quick start (the first block of README.md): its producer arms
    # timers, its consumer loops over fires; a fire due already in its
    # session ends that loop at once, whatever the delays it arms.
    quick = blocks[TOP / "README.md"][0]
    session = re.search(r"session=[\"']([^\"']+)", quick)
    keys = re.findall(r"\.schedule\((\d+)", quick)
    assert session and keys and "handle(" in quick, (
        f"README.md's first Python block is no longer a producer and a "
        f"consumer calling handle(): adapt this test\n{quick}")
    python = venvs["get"]("tree")
    env = clean_env(BITWHEEL_SOCKET=daemon.sock)
    run(python, "-c", f"import bitwheel; bitwheel.Client(session="
        f"{session[1]!r}).schedule(2**64 - 1, in_=0, payload=b'due')",
        env=env)
    code = PRELUDE + "try:\n" + textwrap.indent(quick, "    ") + \
        "except _Done:\n    pass\n"
    out = run(python, "-c", code, env=env, cwd=python.parent)
    assert out.startswith(f"fire {2**64 - 1}"), out
    listing = run(python, "-c", "import bitwheel; print(*[t.key for t in "
                  f"bitwheel.Client().list_timers({session[1]!r}).entries])",
                  env=env)
    assert set(keys) <= set(listing.split()), (keys, listing)


@pytest.fixture(scope="module")
def mypy(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """mypy(*args, cwd=DIR): mypy --strict, its cache in a temporary
    directory; skips the test when mypy is not installed."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (Debian: mypy): the package's "
                    "types are not checked")
    cache = tmp_path_factory.mktemp("mypy-cache")

    def check(*args: str | Path, cwd: Path) -> None:
        run(sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache,
            *args, cwd=cwd, env=clean_env())
    return check


def test_mypy_strict_package(tree: Path, mypy: Any) -> None:
    """mypy --strict on the package, with its pyproject.toml's settings."""
    work = tree.parent / "mypy-package"
    shutil.copytree(tree, work)
    mypy("bitwheel", cwd=work)


USER = textwrap.dedent("""
    import asyncio
    import bitwheel


    def produce(path: str) -> bitwheel.Scheduled:
        with bitwheel.Client(path, session="orders") as c:
            return c.schedule(1, in_=0.5, payload=b"x", replace=True)


    def consume(path: str) -> int:
        try:
            with bitwheel.Client(path, session="orders", consume=True,
                                 reconnect=bitwheel.Backoff(give_up=5)) as c:
                for fire in c.fires(timeout=1):
                    fire.release(backoff=bitwheel.ReleaseBackoff())
                    return fire.key
        except bitwheel.NotPermitted as e:
            print(e.group, e.errno)
        except bitwheel.DuplicateKeyError as e:
            print(e.code, e.name, e.message)
        return -1


    async def cancel(path: str) -> bool:
        async with bitwheel.AsyncClient(path) as c:
            return await c.cancel(1)


    print(produce("s").deadline_ns, consume("s"), asyncio.run(cancel("s")))
""")


def test_mypy_strict_user_of_installed_package(
        venvs: dict[str, Any], tmp_path: Path, mypy: Any) -> None:
    """A user's script under mypy --strict, the package from pip: every
    name of the API is exported and typed."""
    python = venvs["get"]("tree")
    (tmp_path / "user.py").write_text(USER, encoding="utf-8")
    mypy("--python-executable", python, "user.py", cwd=tmp_path)
