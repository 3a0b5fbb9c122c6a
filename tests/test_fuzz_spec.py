"""Fuzz: the spec parser, then the ledger, the shortlist and their rendering on every spec it
accepts (sample specs with hostile values, edited TOML text, non-UTF-8 files).

Property: a valid Spec (estimated, shortlisted, rendered with no ESC byte) or a one-line
SpecError; never another exception, never more than 5 s per case.
"""

import pytest
from hypothesis import given

from fuzz_areas import (
    check_spec_bytes,
    check_spec_data,
    check_spec_text,
    known_spec_data,
    known_spec_texts,
    spec_bytes,
    spec_dicts,
    spec_texts,
)
from fuzz_support import fuzz_settings

KNOWN_DATA = known_spec_data()
KNOWN_TEXTS = known_spec_texts()


@pytest.mark.parametrize("name", sorted(KNOWN_DATA))
def test_known_hostile_spec_values(name):
    check_spec_data(KNOWN_DATA[name])


@pytest.mark.parametrize("name", sorted(KNOWN_TEXTS))
def test_known_hostile_spec_texts(name):
    check_spec_text(KNOWN_TEXTS[name])


def test_spec_file_that_is_not_utf8():
    assert check_spec_bytes(b'schema_version = 1\nname = "\xff"\n') == "error"


@fuzz_settings(max_examples=800)
@given(data=spec_dicts())
def test_spec_from_dict_fuzz(data):
    check_spec_data(data)


@fuzz_settings(max_examples=300)
@given(text=spec_texts())
def test_loads_spec_fuzz(text):
    check_spec_text(text)


@fuzz_settings(max_examples=60)
@given(raw=spec_bytes())
def test_load_spec_file_fuzz(raw):
    check_spec_bytes(raw)
