"""A managed toolchain's toolchain.json read as a record (tileprobe/toolchain.py): one without a version, or that is
no JSON object, is refused with the file and the reinstall command; the installed size is read from it."""
from __future__ import annotations

import json

import pytest

from tileprobe import toolchain as tcm
from tileprobe.errors import ToolchainError
from tileprobe.toolchain import Toolchain


@pytest.mark.parametrize("doc", [{"schema_version": 1}, ["13.4.92"], {"version": 13.4}])
def test_a_manifest_without_a_version_string_is_refused_with_the_fix(tmp_path, doc):
    d = tmp_path / "13.4.92"
    d.mkdir()
    (d / "toolchain.json").write_text(json.dumps(doc))
    with pytest.raises(ToolchainError, match=r"toolchain\.json names no version .*tileprobe toolchain remove "
                                             r"13\.4\.92 && tileprobe toolchain install 13\.4\.92"):
        Toolchain.from_dir(d)


def test_a_manifest_gives_its_version_pins_and_size(tmp_path):
    d = tmp_path / "13.4.92"
    d.mkdir()
    (d / "toolchain.json").write_text(json.dumps({"schema_version": 1, "version": "13.4.92", "size_bytes": 209_000_000,
                                                  "pins": {"nvidia-cuda-tileiras": "13.4.92"}, "later": True}))
    tc = Toolchain.from_dir(d)
    assert (tc.version, dict(tc.pins), tc.source) == ("13.4.92", {"nvidia-cuda-tileiras": "13.4.92"}, "managed")
    assert tcm.typical_size_bytes(tmp_path) == 209_000_000


def test_the_mapping_form_keeps_build_identity_and_targets():
    tc = Toolchain.from_dict({"tileiras": "/opt/tileiras", "version": "13.4.92", "build": "V13.4.92",
                              "identity": "abc", "targets": ["sm_90", "sm_100"]})
    assert (tc.tileiras, tc.version, tc.build, tc.identity, list(tc.targets)) == (
        "/opt/tileiras", "13.4.92", "V13.4.92", "abc", ["sm_90", "sm_100"])
    assert Toolchain.from_dict({}).tileiras == "" and Toolchain.from_dict({}).targets is None
