"""Shared fixtures: where the C build and the ONNX test data are."""
import os
import shutil

import pytest

NODE_DIR = "/usr/share/libonnx-testdata/data/node"


def rlx_cli():
    """The rlx program of the build the package was built against (RLX_CLI), if any."""
    p = os.environ.get("RLX_CLI") or shutil.which("rlx")
    return p if p and os.path.exists(p) else None


@pytest.fixture
def cli():
    p = rlx_cli()
    if not p:
        pytest.skip("no rlx program (set RLX_CLI)")
    return p


@pytest.fixture
def node_dir():
    if not os.path.isdir(NODE_DIR):
        pytest.skip(f"{NODE_DIR} missing (Debian's libonnx-testdata)")
    return NODE_DIR


def case(name):
    p = os.path.join(NODE_DIR, name)
    if not os.path.isdir(p):
        pytest.skip(f"{p} missing")
    return p
