"""`scripts/fuzz_report.py` counts clear / deep / silent / hang per suite file from its `CASES`."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _report_module():
    spec = importlib.util.spec_from_file_location("fuzz_report", REPO_ROOT / "scripts" / "fuzz_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_counts_every_verdict(tmp_path, capsys):
    (tmp_path / "tests" / "fuzz").mkdir(parents=True)
    (tmp_path / "tests" / "fuzz" / "test_toy.py").write_text(
        textwrap.dedent(
            """
        import time
        from hf_ext.core.testing import BadInput

        def bad(value):
            if value < 0:
                raise ValueError(f"value must be >= 0, got {value}")
            return value

        CASES = [
            BadInput("clear", lambda: bad(-1), r"value must be >= 0"),
            BadInput("deep", lambda: [][1], r"index"),
            BadInput("unclear message", lambda: bad(-2), r"names the field"),
            BadInput("silent", lambda: bad(3), r"value"),
            BadInput("hang", lambda: time.sleep(5), r"never"),
        ]
        """
        )
    )
    report = _report_module()
    report.ROOT = tmp_path
    table = report.run(None, timeout_s=0.5, verbose=True)
    assert {k: table["toy"][k] for k in ("cases", "clear", "deep", "silent", "hang")} == {
        "cases": 5,
        "clear": 1,
        "deep": 2,
        "silent": 1,
        "hang": 1,
    }
    text = report.format_table(table)
    assert "| toy | 5 | 1 | 2 | 1 | 1 |" in text and "| **total** | 5 | 1 | 2 | 1 | 1 |" in text
    assert "silent silent" in capsys.readouterr().err
