"""The import contracts hold on the tree, and an import that breaks them is caught."""

from __future__ import annotations

import pytest

from tests.layers_support import lay_out, lint_imports

pytest.importorskip("importlinter")


def test_contracts_kept(tmp_path):
    res = lint_imports(lay_out(tmp_path / "tree"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout


@pytest.mark.parametrize(("module", "line", "contract"), [
    # an upward import: the detectors' base asking which policy is enforced on live agents
    ("detectors/base.py", "from loopledger.live import enforce", "Layers"),
    # a circle: the events importing the redaction that reads them
    ("events.py", "from loopledger import redact", "Layers"),
    # the dashboard reaching past the read model into a reader
    ("app/data.py", "from loopledger.formats import claude_code", "The dashboard reads"),
])
def test_a_broken_import_fails(tmp_path, module, line, contract):
    tree = lay_out(tmp_path / "tree")
    path = tree / "loopledger" / module
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    res = lint_imports(tree)
    assert res.returncode != 0
    broken = [ln for ln in res.stdout.splitlines() if ln.endswith("BROKEN")]
    assert any(ln.startswith(contract) for ln in broken), res.stdout


def test_the_architecture_picture_is_the_contract():
    from tests.layers_support import ROOT, diagram

    assert diagram() in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
