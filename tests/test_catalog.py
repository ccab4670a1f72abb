"""The committed rule catalog is the registry's rendering, and the registry is well formed."""

from pipeline.audit import catalog
from pipeline.audit.registry import RULES, SEVERITIES


def test_catalog_is_up_to_date():
    assert catalog.DEFAULT_OUT.read_text() == catalog.render(), "run: python -m pipeline.audit.catalog"


def test_every_rule_has_code_name_severity_section_and_description():
    for code, rule in RULES.items():
        assert code == rule.code
        assert rule.name.isupper()
        assert rule.severity in SEVERITIES
        assert rule.section in catalog.SECTIONS
        assert len(rule.description) > 20
