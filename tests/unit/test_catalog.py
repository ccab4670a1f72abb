"""The committed rule catalog is the registry's rendering, and the registry is well formed."""

import pytest

from pipeline.audit import catalog
from pipeline.audit.core.registry import RULES, Rule
from schemas.findings import SEVERITIES


def test_catalog_is_up_to_date():
    assert catalog.DEFAULT_OUT.read_text() == catalog.render(), "run: python -m pipeline.audit.catalog"


def test_every_rule_has_code_name_severity_section_and_description():
    for code, rule in RULES.items():
        assert code == rule.code
        assert rule.name.isupper()
        assert rule.severity in SEVERITIES
        assert rule.section in catalog.SECTIONS
        assert len(rule.description) > 20


def test_every_rule_says_why_it_matters_and_what_to_do():
    for code, rule in RULES.items():
        assert len(rule.impact) > 20, f"{code}: impact too short"
        assert len(rule.action) > 5, f"{code}: action too short"
        assert rule.impact != rule.description and rule.impact != rule.action, code
        assert f"### {code} {rule.name}" in catalog.render()


def test_a_rule_without_impact_or_action_is_refused():
    with pytest.raises(ValueError, match="impact"):
        Rule("TST-001", "TEST", "INFO", "6.1", "a rule under test, never registered", " ", "do this")
