"""Measurements: import (probe runs, vLLM logs), coverage, comparison with the ledger, staged plan."""
