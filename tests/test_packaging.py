"""How dex installs: the examples in flows/ as a package of dex's own name, so a project with a
`flows` package of its own still gets `dex run polling`; and every package folder is installed."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _setuptools() -> dict[str, object]:
    table: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return table


def test_every_package_folder_is_installed() -> None:
    """setuptools' find cannot rename flows/, so the packages are listed: a new folder must be too."""
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "dexcli").rglob("__init__.py")}
    renamed = {name: folder for name, folder in _setuptools()["package-dir"].items()}  # type: ignore[attr-defined]
    assert set(_setuptools()["packages"]) == folders | set(renamed)  # type: ignore[arg-type]
    assert renamed == {"dexcli_flows": "flows"}


def test_a_project_with_its_own_flows_package_still_runs_the_examples(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "flows").mkdir(parents=True)
    for module in ("__init__", "plugins", "polling"):  # the project's own: nothing of dex's
        (project / "flows" / f"{module}.py").write_text('"""the project\'s own"""\n')
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(NO_COLOR="1", TERM="dumb", DEX_DB=str(tmp_path / "dex.db"))

    def dex(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dexcli", *args], cwd=project, env=env, capture_output=True,
                              text=True, timeout=60)

    check = subprocess.run([sys.executable, "-c", "import flows; print(flows.__file__)"], cwd=project, env=env,
                           capture_output=True, text=True, timeout=30)
    assert check.stdout.strip() == str(project / "flows" / "__init__.py")  # the shadow is in place
    listed = dex("flows")
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    rows = listed.stdout.splitlines()
    assert {ln.split()[0] for ln in rows} >= {"polling", "three-steps", "approval", "payment"}
    assert any(" dexcli_flows.three_steps " in ln for ln in rows)  # the installed module, named as imported
    starts = {ln.index(" " + ln.split()[3], ln.index("dexcli_flows.")) for ln in rows}
    assert len(starts) == 1  # the descriptions line up, whatever the module names
    res = dex("run", "polling", "--flow-id", "p1", "--time-skip", "--job-duration", "2s")
    assert res.returncode == 0, res.stderr
    assert "COMPLETED" in res.stdout and 'result: "artifact for p1"' in res.stdout
