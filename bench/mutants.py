"""`make mutants`: mutation testing of the detectors and the scoring rule with mutmut (3.x).

mutmut 3 names a mutant by its file's path (`src.` stripped) and imports the mutated copy from
`mutants/src`; LoopLedger's package `loopledger` lives in folder `ingest/` (pyproject's
package-dir), so the run happens in a staging folder, `.mutants/`, laid out the way mutmut
expects: `src/loopledger` (a copy of ingest/), `tests/` and a pyproject.toml whose `[tool.mutmut]`
names the modules and the tests that pin them (the [tool.mutmut] table of ours, with each
module's own tests). Each module's survivors go to its own file, mutants/<module>.txt (its kill
rate on the first line, then one line per survivor with why it is harmless and the mutant's diff
below), so a run of one module never overwrites another's; the kill rate per module to stdout. Slow (minutes per module on two cores): not part of `make test`.

    python -m bench.mutants [MODULE ...]     (default: every module in MODULES)
    python -m bench.mutants --report MODULE  (the survivors of the last run, written again)
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / ".mutants"
OUT = ROOT / "mutants"  # one file per module: mutants/detectors-progress.txt

# module (under ingest/) -> the tests that pin it
MODULES: dict[str, tuple[str, ...]] = {
    # (the hypothesis properties are left out for progress: minutes per mutant on two cores, and
    # every rule has an example test)
    "detectors/progress.py": ("tests/test_progress.py", "tests/test_detection_fixtures.py"),
    # (the seed guards likewise: each of their rules is pinned by an example test in its own file;
    # test_run_length_match.py imports the dashboard's test support, which the staging folder
    # does not hold, and its pure tests of `match` have twins in test_run_length.py)
    "detectors/run_length.py": ("tests/test_run_length.py", "tests/test_stagnation.py"),
    "detectors/ladder.py": ("tests/test_ladder.py",),
    "detectors/window.py": ("tests/test_window.py",),
    # (cycle: the hypothesis property is left out too; tests/test_cycle.py pins every rule by example)
    "detectors/cycle.py": ("tests/test_cycle.py",),
    # (scoring: tests/test_score_cli.py is left out: it runs the console script, a subprocess that
    # imports the unmutated package, so it can kill no mutant; it only costs an ingest per mutant)
    "analysis/scoring.py": ("tests/test_scoring.py",),
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


def run(module: str, report_only: bool = False) -> tuple[int, int, list[str]]:
    mutmut = [sys.executable, "-m", "mutmut"]
    if not report_only:
        stage(module, MODULES[module])
        subprocess.run([*mutmut, "run", "--max-children", "2"], cwd=STAGE, check=False)
    res = subprocess.run([*mutmut, "results", "--all", "true"], cwd=STAGE, capture_output=True, text=True)
    lines = [ln.strip() for ln in res.stdout.splitlines() if ":" in ln]
    # a timeout is a detection too (the mutant made the tests hang: an infinite loop)
    killed = sum(1 for ln in lines if ln.endswith((": killed", ": timeout")))
    survived = [ln.split(":")[0] for ln in lines if not ln.endswith((": killed", ": timeout"))]
    details, read = [], readings(module)
    for name in survived:
        diff = subprocess.run([*mutmut, "show", name], cwd=STAGE, capture_output=True, text=True).stdout
        details.append(f"{name}@{fingerprint(diff)}  [{why(name, diff, read)}]\n{diff.strip()}\n")
    return killed, len(lines), details


# Why a surviving mutant changes nothing a caller can see, by the shape of its change (checked
# by reading them; what matches none of these is marked so until a person reads it into mutants/<module>.why).
_WHY = (
    (re.compile(r"^-.*= (False|True|0|\"\")\b.*\n\+.*= None\b", re.M), "falsy/truthy twin: None where False/True/0/'' was"),
    (re.compile(r"^-.*\.r?split\(\"/\", 1\)\[-1\]", re.M), "split/rsplit on '/' keeping the last part: the same program name"),
    (re.compile(r"_classified|_CLASSES|16384|16385", re.M), "a cache of a pure function (same values, only slower)"),
    (re.compile(r"\\x01|\"#\"|XX#XX", re.M), "a placeholder character: any one replaces the same parts"),
    (re.compile(r"_step [-+]=|_step = 1|step: int = 1", re.M), "agent step numbers are only compared for equality"),
    (re.compile(r"4 \* self.window|5 \* self.window|4 / self.window", re.M), "the tool index bound: memory, not verdicts"),
    # the seed guards (run-length, ladder, window):
    (re.compile(r"^\+.*len\((?:_LIMITS|self\._lims|self\._classes)\) *[<>]=? *\d+", re.M),
     "a memo's size bound: when it is emptied, not what it holds"),
    (re.compile(r'^\+.*(?:canon|canonical\([\w.]+\)|call_key\(\w+\)\[0\])\.decode\((?:"UTF-8", "surrogatepass"|'
                r'"utf-8", "(?:XXsurrogatepassXX|SURROGATEPASS)"|"utf-8", ?)\)', re.M),
     "canonical text is valid UTF-8 (lone surrogates are written as \\uXXXX): the error handler is never used"),
)


def why(name: str, diff: str, read: dict[str, tuple[str, str]] | None = None) -> str:
    """Why a survivor is harmless: a person's reading of this change (mutants/<module>.why), else
    its shape. A reading of the name written for another change is stale: it is not used."""
    stale = ""
    if read and name in read:
        fp, reason = read[name]
        if fp == fingerprint(diff):
            return reason
        stale = f" (stale: its reading @{fp} was of another change, now @{fingerprint(diff)})"
    for pattern, reason in _WHY:
        if pattern.search(diff) or pattern.search(name):
            return reason + stale
    return "not classified: no reading in mutants/<module>.why yet" + stale


def fingerprint(diff: str) -> str:
    """The change a mutant makes — its diff's removed and added lines, stripped — hashed to 8 hex
    digits. mutmut numbers a function's mutants in order, so when that function's code changes a
    name moves onto another change: a reading holds only for the change it was written for."""
    body = "\n".join(ln[1:].strip() for ln in diff.splitlines()
                     if ln[:1] in "+-" and not ln.startswith(("+++", "---")))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:8]


def readings(module: str) -> dict[str, tuple[str, str]]:
    """mutants/<module>.why: one survivor a line, `mutant_name@fingerprint  why it changes no
    verdict`, written by the person who read its diff; name → (fingerprint, reading). A name no
    longer surviving is simply unused; one whose change is no longer the one read is stale (why)."""
    p = OUT / (module.removesuffix(".py").replace("/", "-") + ".why")
    out: dict[str, tuple[str, str]] = {}
    if p.exists():
        for n, ln in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if ln.strip() and not ln.startswith("#"):
                key, _, reason = ln.strip().partition(" ")
                name, at, fp = key.partition("@")
                if not at or not re.fullmatch(r"[0-9a-f]{8}", fp):
                    raise ValueError(f"{p}:{n}: a reading starts with mutant_name@fingerprint (8 hex digits), "
                                     f"got {key!r}")
                out[name] = (fp, reason.strip())
    return out


def main(argv: list[str]) -> int:
    report_only = "--report" in argv  # the last run's results again (.mutants/ holds one module)
    modules = [a for a in argv if a != "--report"] or list(MODULES)
    OUT.mkdir(exist_ok=True)
    for m in modules:
        killed, total, survivors = run(m, report_only)
        rate = killed / total if total else 0.0
        line = f"{m}: {killed}/{total} killed ({rate:.1%}), {len(survivors)} survived"
        print(line)
        out = report_path(m)
        out.write_text(f"## {line}\n\n" + "\n".join(survivors) + "\n", encoding="utf-8")
        print(f"survivors: {out}")
    return 0


def report_path(module: str) -> Path:
    return OUT / (module.removesuffix(".py").replace("/", "-") + ".txt")


def summaries() -> list[str]:
    """The first line of each module's last report ("module: k/n killed (r%), s survived")."""
    lines = []
    for m in MODULES:
        p = report_path(m)
        if p.exists():
            lines.append(p.read_text(encoding="utf-8").split("\n", 1)[0].removeprefix("## "))
    return lines


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
