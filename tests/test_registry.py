"""The detector registry: built-ins in order, one registration per detector, plugins by name."""

from __future__ import annotations

import sys
import textwrap

import pytest
from loopledger.detectors import registry
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.policy import DEFAULT_SPECS, PARAMS, PolicySpec, make_policy
from loopledger.events import Batch, Call


def test_builtins_are_registered_in_display_order():
    assert registry.names()[:5] == ("run-length", "stagnation", "ladder", "window", "cycle")
    assert [p.name for p in PARAMS["window"]] == ["window", "threshold"]


def test_unknown_detector_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown detector 'nope'; known: run-length, stagnation"):
        PolicySpec.parse("nope:x=1")


def test_a_taken_name_is_refused():
    with pytest.raises(ConfigError, match="already registered"):
        registry.register(registry.Detector("window", (), lambda spec: None))


def test_cross_field_rules_come_from_the_detector_module():
    with pytest.raises(ConfigError) as e:
        PolicySpec.parse("window:window=3,threshold=4")
    assert e.value.field == "threshold"
    with pytest.raises(ConfigError) as e:
        PolicySpec.parse("ladder:warn_at=3,block_at=3")
    assert "block_at" in str(e.value)


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """A module on sys.path whose factory returns a Detector: what `module:factory` names."""
    (tmp_path / "ll_test_plugin.py").write_text(textwrap.dedent('''
        from loopledger import vocab
        from loopledger.detectors.base import INT, Check, Param, Policy
        from loopledger.detectors.registry import Detector

        class SameTool(Policy):
            def __init__(self, spec):
                super().__init__(spec)
                self.limit, self.last, self.count = spec.params["limit"], None, 0
            def user_turn(self):
                self.last, self.count = None, 0
            def check(self, batch):
                out = []
                for i, call in enumerate(batch.calls):
                    self.count = self.count + 1 if call.name == self.last else 1
                    self.last = call.name
                    verdict = vocab.HALT if self.count >= self.limit else vocab.ALLOW
                    out.append(Check(i, verdict, self.count, None, self.limit, ""))
                return out
            def state(self):
                return {"last": self.last, "count": self.count}

        def make():
            return Detector("same-tool", (Param("limit", INT, 3, 1, "calls of one tool in a row"),), SameTool)
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "ll_test_plugin:make"
    sys.modules.pop("ll_test_plugin", None)


def test_module_factory_spec_loads_and_round_trips(plugin_module):
    spec = PolicySpec.parse(f"{plugin_module}:limit=2", trusted=True)
    assert spec.detector == plugin_module and spec.params == {"limit": 2}
    assert PolicySpec.parse(spec.text) == spec
    policy = make_policy(spec)
    verdicts = [c.verdict for _ in range(2) for c in policy.check(Batch((Call("c", "bash", {}),)))]
    assert verdicts == ["allow", "halt"]
    assert plugin_module in registry.names() and plugin_module in PARAMS


def test_module_factory_that_cannot_import_is_a_config_error():
    with pytest.raises(ConfigError, match="cannot load detector 'no_such_mod_x:make'"):
        PolicySpec.parse("no_such_mod_x:make", trusted=True)


def test_default_specs_are_registered_detectors():
    assert all(s.detector in registry.names() for s in DEFAULT_SPECS)


def test_the_peer_ports_are_built_in_after_ours():
    builtin = registry.builtin_names()
    assert builtin[-4:] == ("openhands", "gemini-cli", "roo", "kilo")
    assert builtin.index("progress") < builtin.index("openhands")
    assert set(builtin) <= set(registry.names())


def test_a_module_factory_plugin_is_not_built_in_and_can_be_forgotten(plugin_module):
    PolicySpec.parse(plugin_module, trusted=True)
    assert plugin_module in registry.names() and plugin_module not in registry.builtin_names()
    registry.unregister(plugin_module)
    assert plugin_module not in registry.names()
    with pytest.raises(ConfigError, match="built in"):
        registry.unregister("window")
    assert "window" in registry.names()


def test_the_builtin_table_names_what_each_module_defines():
    import importlib

    defined = {}
    for modname in registry.BUILTIN_MODULES:
        mod = importlib.import_module(modname)
        for value in vars(mod).values():
            if isinstance(value, registry.Detector):
                defined[value.name] = modname
    assert defined == registry.BUILTINS
    assert tuple(registry.BUILTINS) == registry.builtin_names()


def test_one_lookup_imports_only_its_own_detector_module():
    import subprocess

    code = ("import sys\nfrom loopledger.detectors import registry\nfrom loopledger.detectors.policy import DETECTORS\n"
            "assert DETECTORS == registry.builtin_names()\n"
            "registry.get('roo')\n"
            "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('loopledger.detectors.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["base", "canonical", "errors", "policy", "registry", "roo"]  # noqa: S307 (our own output)
