"""The JupyterLab extension: its built bundle, the wheel that ships it, and its renderer's unit tests run with
node on a report made by the Python side (skipped until `make extension/labextension/package.json` built it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from minicompiler.report import MIME_TYPE, CompileReport

EXTENSION = Path(__file__).resolve().parents[2] / "extension"
BUILD_FIRST = "extension not built: make extension/labextension/package.json"


def test_the_extension_renders_the_report_mime_type() -> None:
    source = (EXTENSION / "src" / "report.ts").read_text()
    assert f"export const MIME_TYPE = '{MIME_TYPE}';" in source


@pytest.mark.skipif(not (EXTENSION / "labextension" / "package.json").exists(), reason=BUILD_FIRST)
def test_the_built_labextension_is_a_mime_extension() -> None:
    built = json.loads((EXTENSION / "labextension" / "package.json").read_text())
    assert built["jupyterlab"]["mimeExtension"] is True
    assert any(p.name.startswith("remoteEntry.") for p in (EXTENSION / "labextension" / "static").iterdir())


@pytest.mark.skipif(not (EXTENSION / "labextension" / "package.json").exists(), reason=BUILD_FIRST)
def test_the_wheel_carries_the_prebuilt_labextension(tmp_path: Path) -> None:
    # The build hook skips npm when the labextension exists, so this takes seconds (no build isolation: the
    # test extra brings hatchling and hatch-jupyter-builder).
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path), str(EXTENSION.parent)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("minicompiler-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shared = "minicompiler-0.1.0.data/data/share/jupyter/labextensions/minicompiler-jupyterlab/"
    for required in ["package.json", "install.json", "static/style.js"]:
        assert shared + required in names, required
    assert any(n.startswith(shared + "static/remoteEntry.") for n in names)
    assert "minicompiler/report.py" in names
    assert any(n.endswith("entry_points.txt") for n in names)


@pytest.mark.skipif(not (EXTENSION / "lib" / "report.js").exists() or shutil.which("node") is None,
                    reason=BUILD_FIRST)
def test_the_renderer_unit_test_passes_on_a_python_report(report: CompileReport, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(report.to_json())
    result = subprocess.run(["node", "--test", "test/"], cwd=EXTENSION, capture_output=True, text=True,
                            env={**os.environ, "MC_REPORT_JSON": str(path)}, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# pass 9" in result.stdout and "# fail 0" in result.stdout


@pytest.mark.skipif(not (EXTENSION / "labextension" / "package.json").exists(), reason=BUILD_FIRST)
def test_the_installed_jupyterlab_accepts_the_built_labextension(tmp_path: Path) -> None:
    # JupyterLab compares the extension's declared @jupyterlab/* ranges with its own: a range that excludes the
    # installed JupyterLab (e.g. ~4.5 against 4.6) makes `jupyter labextension list` mark it "X" (incompatible).
    pytest.importorskip("jupyterlab")
    shutil.copytree(EXTENSION / "labextension", tmp_path / "labextensions" / "minicompiler-jupyterlab")
    shutil.copy(EXTENSION / "install.json", tmp_path / "labextensions" / "minicompiler-jupyterlab")
    listing = subprocess.run([sys.executable, "-m", "jupyterlab.labextensions", "list"], capture_output=True,
                             text=True, timeout=120, env={**os.environ, "JUPYTER_PATH": str(tmp_path)})
    output = listing.stdout + listing.stderr
    (line,) = [row for row in output.splitlines() if "minicompiler-jupyterlab v" in row]
    assert "enabled" in line and "OK" in line, output
    assert "not compatible" not in output, output
