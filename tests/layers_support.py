"""The import contracts (pyproject.toml) checked on a copy laid out as installed.

The package-dir mapping puts `ingest/` at `loopledger` and `app/` at `loopledger.app`; import-linter
finds packages by folder, so it reads a copy with `app/` inside `loopledger/`. `make lint` runs this
module; tests/test_layers.py runs it on a copy with a deliberately broken import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def lay_out(dest: Path, root: Path = ROOT) -> Path:
    """Copy ingest/ and app/ into dest/loopledger (as installed) with pyproject.toml beside it."""
    if dest.exists():
        shutil.rmtree(dest)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(root / "ingest", dest / "loopledger", ignore=ignore)
    shutil.copytree(root / "app", dest / "loopledger" / "app", ignore=ignore)
    shutil.copy(root / "pyproject.toml", dest / "pyproject.toml")
    return dest


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter on a laid-out copy (its own folder first on the path)."""
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "pyproject.toml", "--no-cache"], cwd=tree, capture_output=True, text=True,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})


def main() -> int:
    tree = lay_out(ROOT / ".lint")
    res = lint_imports(tree)
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    return res.returncode



def diagram(root: Path = ROOT) -> str:
    """The layers contract as a text picture (docs/architecture.md holds it; a test keeps it true)."""
    import tomllib

    conf = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in conf["contracts"] if c["type"] == "layers"]
    rows = []
    for layer in layers:
        names = [n.strip().removeprefix("loopledger.") for n in layer.split("|")]
        rows.append("   ".join(f"[{n}]" for n in names))
    width = max(len(r) for r in rows)
    out = []
    for i, r in enumerate(rows):
        out.append(r.center(width).rstrip())
        if i < len(rows) - 1:
            out.append("│".center(width).rstrip())
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
