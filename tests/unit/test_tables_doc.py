"""docs/tables.md is the rendering of `schemas/`, and every column of every table says what it means."""

import pytest

from pipeline.tables import catalog
from schemas import SCHEMAS


def test_tables_doc_is_up_to_date():
    assert catalog.DEFAULT_OUT.read_text() == catalog.render(), "run: python -m pipeline.tables.catalog"


@pytest.mark.parametrize("table", sorted(SCHEMAS))
def test_every_column_has_a_meaning_and_every_meaning_a_column(table):
    meanings = catalog.table_module(table).COLUMN_MEANINGS
    columns = SCHEMAS[table].fieldNames()
    assert [c for c in columns if len(meanings.get(c, "").strip()) < 3] == [], "columns without a meaning"
    assert sorted(set(meanings) - set(columns)) == [], "meanings of columns the table does not have"
