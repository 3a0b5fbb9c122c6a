"""Fuzz: the user catalogue loader, the triage reader and the measure importers.

Properties: a user catalogue with broken GPU/offer/model files loads (the broken files become
one-line problems) and `gpus`/`offers`/`models`/`shortlist` still answer; `read_log` returns a
reading for any text (mutated real logs, OOM lines repeated without an end marker, 200 KB
lines), with advice and printed output free of ESC; the probe and vLLM importers return
measurements or a one-line VramtuiError. Never more than 5 s per case.
"""

import pytest
from hypothesis import given

from fuzz_areas import (
    catalog_dirs,
    check_catalog_files,
    check_measure_text,
    check_triage_text,
    known_measure_texts,
    known_triage_texts,
    measure_texts,
    triage_texts,
)
from fuzz_support import fuzz_settings

KNOWN_TRIAGE = known_triage_texts()
KNOWN_MEASURE = known_measure_texts()


@pytest.mark.parametrize("name", sorted(KNOWN_TRIAGE))
def test_known_hostile_logs(name):
    check_triage_text(KNOWN_TRIAGE[name])


@pytest.mark.parametrize("name", sorted(KNOWN_MEASURE))
def test_known_hostile_measure_files(name):
    check_measure_text(KNOWN_MEASURE[name])


@fuzz_settings(max_examples=60)
@given(files=catalog_dirs())
def test_user_catalogue_fuzz(files):
    check_catalog_files(files)


@fuzz_settings(max_examples=300)
@given(text=triage_texts())
def test_triage_reader_fuzz(text):
    check_triage_text(text)


@fuzz_settings(max_examples=300)
@given(text=measure_texts())
def test_measure_importers_fuzz(text):
    check_measure_text(text)
