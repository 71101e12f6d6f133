"""`make mutants`: mutation testing of the detectors and the scoring rule with mutmut (3.x).

mutmut 3 names a mutant by its file's path (`src.` stripped) and imports the mutated copy from
`mutants/src`; LoopLedger's package `loopledger` lives in folder `ingest/` (pyproject's
package-dir), so the run happens in a staging folder, `.mutants/`, laid out the way mutmut
expects: `src/loopledger` (a copy of ingest/), `tests/` and a pyproject.toml whose `[tool.mutmut]`
names the modules and the tests that pin them (the [tool.mutmut] table of ours, with each
module's own tests). Survivors go to mutants.txt (one line each, the mutant's diff below), the
kill rate per module to stdout. Slow (minutes per module on two cores): not part of `make test`.

    python -m bench.mutants [MODULE ...]     (default: every module in MODULES)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / ".mutants"
OUT = ROOT / "mutants.txt"

# module (under ingest/) -> the tests that pin it
MODULES: dict[str, tuple[str, ...]] = {
    # (the hypothesis properties are left out for progress: minutes per mutant on two cores, and
    # every rule has an example test)
    "detectors/progress.py": ("tests/test_progress.py", "tests/test_detection_fixtures.py"),
    "detectors/run_length.py": ("tests/test_run_length.py", "tests/test_run_length_match.py",
                                "tests/test_stagnation.py", "tests/test_detectors_hypothesis.py"),
    "detectors/ladder.py": ("tests/test_ladder.py", "tests/test_detectors_hypothesis.py"),
    "detectors/window.py": ("tests/test_window.py", "tests/test_detectors_hypothesis.py"),
    "detectors/cycle.py": ("tests/test_cycle.py", "tests/test_detectors_hypothesis.py"),
    "analysis/scoring.py": ("tests/test_scoring.py", "tests/test_score_cli.py"),
}


def stage(module: str, tests: tuple[str, ...]) -> None:
    if STAGE.exists():
        shutil.rmtree(STAGE)
    (STAGE / "src").mkdir(parents=True)
    shutil.copytree(ROOT / "ingest", STAGE / "src" / "loopledger",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", STAGE / "tests", ignore=shutil.ignore_patterns("__pycache__", "e2e"))
    selection = ", ".join(f'"{t}"' for t in tests)
    (STAGE / "pyproject.toml").write_text(
        "[tool.pytest.ini_options]\n"
        'testpaths = ["tests"]\n'
        "markers = [\"e2e: browser\", \"corpus: corpus\", \"postgres: pg\"]\n\n"
        "[tool.mutmut]\n"
        f'source_paths = ["src/loopledger/{module}"]\n'
        'also_copy = ["src/loopledger"]\n'
        f"pytest_add_cli_args_test_selection = [{selection}]\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-x", "-q", "-n", "0"]\n',
        encoding="utf-8")


def run(module: str) -> tuple[int, int, list[str]]:
    stage(module, MODULES[module])
    mutmut = [sys.executable, "-m", "mutmut"]
    subprocess.run([*mutmut, "run", "--max-children", "2"], cwd=STAGE, check=False)
    res = subprocess.run([*mutmut, "results", "--all", "true"], cwd=STAGE, capture_output=True, text=True)
    lines = [ln.strip() for ln in res.stdout.splitlines() if ":" in ln]
    # a timeout is a detection too (the mutant made the tests hang: an infinite loop)
    killed = sum(1 for ln in lines if ln.endswith((": killed", ": timeout")))
    survived = [ln.split(":")[0] for ln in lines if not ln.endswith((": killed", ": timeout"))]
    details = []
    for name in survived:
        diff = subprocess.run([*mutmut, "show", name], cwd=STAGE, capture_output=True, text=True).stdout
        details.append(f"{name}\n{diff.strip()}\n")
    return killed, len(lines), details


def main(argv: list[str]) -> int:
    modules = argv or list(MODULES)
    report = []
    for m in modules:
        killed, total, survivors = run(m)
        rate = killed / total if total else 0.0
        line = f"{m}: {killed}/{total} killed ({rate:.1%}), {len(survivors)} survived"
        print(line)
        report.append(f"## {line}\n\n" + "\n".join(survivors))
    OUT.write_text("\n".join(report) + "\n", encoding="utf-8")
    print(f"survivors: {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
