"""End to end in a real browser: JupyterLab (on loopback, with a token) and headless Chromium driven by
Playwright. A `%%compile` cell's report must be drawn by the extension (not the HTML fallback), its tabs
and kernel-line hover must work, and the saved notebook must still render when reopened with no kernel
available. Screenshots (light, then dark) go to $MC_ARTIFACTS or the test's tmp dir.

Needs Debian's chromium (/usr/bin/chromium: `make browser-deps` installs it) and the built extension;
skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
LABEXTENSION = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "minicompiler-jupyterlab"
playwright = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (make browser-deps installs it)"),
    pytest.mark.skipif(not (LABEXTENSION / "package.json").exists(),
                       reason="the extension is not installed here (make extension/labextension/package.json)"),
]
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
CELLS = [
    "import torch\n%load_ext minicompiler\ntorch.manual_seed(0)\nx = torch.randn(16, 32)\nw = torch.randn(32)",
    "%%compile --backend cpp\ny = torch.cos(x) * w + 1\nz = torch.softmax(y, dim=-1)",
]
REPORT_OUTPUT = ".jp-OutputArea-output.mc-report-output"  # the extension's widget, not the HTML fallback


def write_notebook(path: Path) -> None:
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": source} for i, source in enumerate(CELLS)]
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": kernel}, "nbformat": 4,
                                "nbformat_minor": 5}))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def jupyterlab(root: Path, *extra: str) -> Iterator[str]:
    """A JupyterLab server on loopback serving `root`/notebooks; yields its URL (token in the query)."""
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(root / "settings"), "JUPYTER_CONFIG_DIR": str(root / "config"),
           "JUPYTERLAB_WORKSPACES_DIR": str(root / "workspaces"), "JUPYTER_RUNTIME_DIR": str(root / "runtime")}
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root / 'notebooks'}", "--LabApp.expose_app_in_browser=True", "--allow-root",
               *extra]
    with open(root / "server.log", "ab") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError((root / "server.log").read_text()[-3000:]) from None
                time.sleep(0.5)
        yield f"{url}/lab/tree/demo.ipynb?token={token}&reset"
    finally:
        server.terminate()
        server.wait(timeout=20)


def check_report(page, screenshot: Path) -> None:
    """The report is drawn by the extension; tabs switch; hovering a kernel line lights its source line."""
    output = page.locator(REPORT_OUTPUT).first
    output.locator(".mc-rich").wait_for(timeout=120_000)
    assert output.locator(".mc-tab").count() >= 8
    output.locator(".mc-tab", has_text="kernels").click()
    panel = output.locator(".mc-panel:not([hidden])")
    assert panel.locator(".mc-side-by-side").count() == 1
    line = panel.locator(".mc-line[data-src]").nth(3)
    line.hover()
    assert panel.locator(".mc-src.mc-lit").count() >= 1, "hovering a kernel line lit no source line"
    assert panel.locator(".mc-line span[class]").count() > 0, "the kernel code is not highlighted"
    output.locator(".mc-tab", has_text="simplify").click()
    assert output.locator(".mc-panel:not([hidden]) svg.mc-dag g[data-kernel]").count() >= 3
    output.locator(".mc-tab", has_text="kernels").click()
    panel.locator(".mc-line[data-src]").nth(3).hover()
    output.screenshot(path=str(screenshot))


def answer_kernel_dialog(page, button: str) -> None:
    """Opening a notebook may ask which kernel to start: `button` is "Select" or "No Kernel"."""
    dialog = page.locator(".jp-Dialog")
    try:
        dialog.wait_for(timeout=15_000)
    except playwright.TimeoutError:
        return
    dialog.locator("button", has_text=button).click()


@contextmanager
def browser(root: Path) -> Iterator:
    with playwright.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(root / "profile"), executable_path=str(CHROMIUM), headless=True, args=FLAGS,
            viewport={"width": 1300, "height": 900})
        try:
            yield context.new_page()
        finally:
            context.close()


def test_the_report_renders_in_jupyterlab_and_after_reopening_without_a_kernel(tmp_path: Path) -> None:
    artifacts = Path(os.environ.get("MC_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    (tmp_path / "notebooks").mkdir()
    notebook = tmp_path / "notebooks" / "demo.ipynb"
    write_notebook(notebook)
    with jupyterlab(tmp_path) as url, browser(tmp_path) as page:
        page.goto(url)
        page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=60_000)
        answer_kernel_dialog(page, "Select")
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        check_report(page, artifacts / "report-light.png")
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        deadline = time.monotonic() + 30
        while "minicompiler.report+json" not in notebook.read_text() and time.monotonic() < deadline:
            time.sleep(0.5)
    assert "application/vnd.minicompiler.report+json" in notebook.read_text()

    # Reopened with no kernel available, in the dark theme: drawn from the saved JSON alone
    themes = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    themes.mkdir(parents=True, exist_ok=True)
    (themes / "themes.jupyterlab-settings").write_text(json.dumps({"theme": "JupyterLab Dark"}))
    with jupyterlab(tmp_path, "--KernelSpecManager.allowed_kernelspecs=['none']") as url, browser(tmp_path) as page:
        page.goto(url)
        page.wait_for_selector("body[data-jp-theme-light='false']", state="attached", timeout=60_000)
        answer_kernel_dialog(page, "No Kernel")
        check_report(page, artifacts / "report-dark.png")
