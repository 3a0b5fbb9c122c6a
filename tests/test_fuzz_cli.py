"""Fuzz: the CLI in process, with generated flags for estimate (simple mode and spec
overrides), shortlist --days/--today/--detail, triage (files, stdin, --spec, --apply), gpus,
offers and models (with broken user catalogues).

Property: main() returns 0, 1, 2 or 3 (argparse's own usage errors exit 2), prints no
traceback, every stderr line starts with `vramtui:`, no ESC byte reaches stdout or stderr,
and no run takes more than 5 s.

The whole fuzz suite's budget and measured time: tests/fuzz_support.py's docstring.
"""

import pytest
from hypothesis import given

from fuzz_areas import check_cli_case, cli_cases, known_cli_cases
from fuzz_support import fuzz_settings

KNOWN = known_cli_cases()


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_known_hostile_command_lines(name):
    check_cli_case(KNOWN[name])


@fuzz_settings(max_examples=250)
@given(case=cli_cases())
def test_cli_fuzz(case):
    check_cli_case(case)
