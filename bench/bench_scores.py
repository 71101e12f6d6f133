"""The guard leaderboard on the shared corpus: ../shared/corpus ingested under every built-in
detector at its defaults, its labels.csv imported, every policy scored by loopledger.analysis.scoring (the
same code as `loopledger score` and the leaderboard page), plus the default policy set taken as
one guard (its earliest halt). Then docs/detection.md, if present: why the defaults are what they are.

Seconds, not minutes: 64 sessions, about 1,300 calls. Skipped (with a note) when the corpus is absent.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from loopledger import worker
from loopledger.analysis import scoring
from loopledger.cli.score import leaderboard, markdown_table, saved_spend
from loopledger.detectors.policy import BUILTIN_SPECS, DEFAULT_SPECS
from loopledger.ledger import labels, migrate, read
from loopledger.ledger.engine import make_engine

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
DETECTION = ROOT / "docs" / "detection.md"
SET_ID = "default-set"


def table(corpus: Path = CORPUS) -> tuple[str, dict]:
    """The leaderboard of the corpus as Markdown, and what was measured on the way."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'corpus.sqlite'}")
        try:
            migrate.upgrade(engine)
            t0 = time.perf_counter()
            specs = list(dict.fromkeys((*DEFAULT_SPECS, *BUILTIN_SPECS)))
            totals = worker.ingest_paths(engine, [corpus], worker.Options(specs=specs))
            t1 = time.perf_counter()
            with engine.begin() as conn:
                report = labels.import_file(conn, corpus / "labels.csv")
            with engine.connect() as conn:
                counts = read.label_totals(conn)
                scores = leaderboard(conn)
                spend = saved_spend(conn)
                defaults = [s.id for s in DEFAULT_SPECS]
                judged = read.judged_rows(read.judged(conn, tuple(defaults)))
            t2 = time.perf_counter()
        finally:
            engine.dispose()
    set_label = "default set, as one guard (" + " + ".join(s.detector for s in DEFAULT_SPECS) + ")"
    (combined,) = scoring.score(scoring.any_of(judged, defaults, SET_ID), [(SET_ID, set_label)])
    ranked = [combined, *scoring.rank(scores)]
    facts = {"sessions": totals.sessions, "calls": totals.calls, "ingest_s": t1 - t0, "score_s": t2 - t1,
             "labelled": report.labelled, "unmatched": len(report.problems), **counts}
    return markdown_table(ranked, spend), facts


def run(quick: bool = False) -> str:
    out = ["## Guard leaderboard on the shared corpus (`bench_scores`)\n"]
    if not (CORPUS / "labels.csv").is_file():
        out.append("Skipped: ../shared/corpus (with labels.csv) is not present on this machine.\n")
    else:
        md, f = table()
        out.append(
            f"{f['sessions']} sessions / {f['calls']:,} calls ingested under every built-in detector in "
            f"{f['ingest_s']:.1f} s; labels.csv: {f['labelled']} sessions labelled, {f['unmatched']} rows "
            f"unmatched; scored in {f['score_s']:.2f} s. {f['loop']} loops, {f['normal']} normal, "
            f"{f['unclear']} unclear (left out). A halt scores as caught only inside the labelled loop "
            "(loopledger.analysis.scoring; docs/architecture.md, \"Labels and scoring\"). `calls into loop`: "
            "the median, then each catch's. The first row takes the default policy set (what `ingest` and "
            "`make run` use) as one guard: its earliest halt in each session.\n")
        out.append(md)
    if DETECTION.is_file():
        out.append(f"\n### Why these defaults (docs/detection.md)\n\n{DETECTION.read_text(encoding='utf-8')}\n")
    return "\n".join(out)


if __name__ == "__main__":
    print(run())
