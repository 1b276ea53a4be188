"""The generated modules kept in the source tree match their sources.

bitwheel_pb2.py, bitwheel_pb2.pyi, _codes.py and _version.py are committed
as generated (bindings/python/local.mk says why), so a change of
proto/bitwheel.proto or of configure.ac's version that is not followed by
`make python-generated` would ship a package that speaks the old protocol
or states the wrong version.  These tests make them again, with this
build's protoc ($PROTOC) and gen_codes.py, into a temporary directory and
compare: the descriptor (what the module registers with protobuf, whatever
protoc version wrote it), _codes.py and the version exactly, and the text
of the protoc output where this protoc is the one that wrote the committed
files (another version words the same descriptor differently).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

import pytest
from google.protobuf import descriptor_pb2

PY_SRC = Path(__file__).resolve().parents[1]          # bindings/python
PKG = PY_SRC / "bitwheel"
PROTO = PY_SRC.parents[1] / "proto" / "bitwheel.proto"
REGEN = ("run `make python-generated` in the build directory and commit "
         "bindings/python/bitwheel/")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """protoc's and gen_codes.py's output for the proto, made now."""
    protoc = os.environ.get("PROTOC")
    if not protoc:
        pytest.skip("protoc not found by configure (install "
                    "protobuf-compiler): the committed generated modules "
                    "are not checked against proto/bitwheel.proto")
    out = tmp_path_factory.mktemp("generated")
    subprocess.run([protoc, f"-I{PROTO.parent}", f"--python_out={out}",
                    f"--pyi_out={out}",
                    f"--descriptor_set_out={out / 'set.pb'}", str(PROTO)],
                   check=True, timeout=60)
    subprocess.run([sys.executable, str(PY_SRC / "gen_codes.py"), str(out),
                    str(PROTO), str(out / "_codes.py")],
                   check=True, timeout=60)
    return out


def serialized_descriptor(module: Path) -> bytes:
    """The bytes of AddSerializedFile(b'...') in a protoc module, read
    without running it (the default pool holds the package's already)."""
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(
                node.func, "attr", None) == "AddSerializedFile":
            value = ast.literal_eval(node.args[0])
            assert isinstance(value, bytes)
            return value
    pytest.fail(f"{module}: no AddSerializedFile(...) call: not protoc's "
                f"Python output")


def clear_json_names(msgs: Iterable[Any]) -> None:
    """protoc's Python output leaves json_name out; its descriptor set
    has them."""
    for m in msgs:
        for f in m.field:
            f.ClearField("json_name")
        clear_json_names(m.nested_type)


def test_descriptor_matches_proto(fresh: Path) -> None:
    want = descriptor_pb2.FileDescriptorSet()
    want.ParseFromString((fresh / "set.pb").read_bytes())
    (proto,) = want.file
    clear_json_names(proto.message_type)
    have = descriptor_pb2.FileDescriptorProto()
    have.ParseFromString(serialized_descriptor(PKG / "bitwheel_pb2.py"))
    assert have == proto, (
        f"bindings/python/bitwheel/bitwheel_pb2.py is stale: it describes "
        f"another proto/bitwheel.proto; {REGEN}")


def test_codes_match_proto(fresh: Path) -> None:
    assert (PKG / "_codes.py").read_text(encoding="utf-8") == (
        fresh / "_codes.py").read_text(encoding="utf-8"), (
        f"bindings/python/bitwheel/_codes.py is stale; {REGEN}")


def test_protoc_text(fresh: Path) -> None:
    """Same protoc, same text: the .pyi (the types mypy sees) included."""
    committed = (PKG / "bitwheel_pb2.py").read_text(encoding="utf-8")
    if committed != (fresh / "bitwheel_pb2.py").read_text(encoding="utf-8"):
        pytest.skip("this protoc words bitwheel_pb2.py otherwise than the "
                    "one that wrote the committed files (the descriptors "
                    "are compared above)")
    assert (PKG / "bitwheel_pb2.pyi").read_text(encoding="utf-8") == (
        fresh / "bitwheel_pb2.pyi").read_text(encoding="utf-8"), (
        f"bindings/python/bitwheel/bitwheel_pb2.pyi is stale; {REGEN}")


def test_version_matches_configure() -> None:
    version = os.environ.get("BW_VERSION")
    if not version:
        pytest.skip("$BW_VERSION (configure.ac's version) is not set: run "
                    "the suites with make check")
    tree = ast.parse((PKG / "_version.py").read_text(encoding="utf-8"))
    found = [ast.literal_eval(n.value) for n in tree.body
             if isinstance(n, ast.Assign)
             and getattr(n.targets[0], "id", None) == "__version__"]
    assert found == [version], (
        f"bindings/python/bitwheel/_version.py says {found}, configure.ac "
        f"{version!r}; {REGEN}")
