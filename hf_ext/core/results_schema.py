"""The schema of a reproduction's `results.json` (what [`~hf_ext.core.results_render`] renders), its validation and
the helpers the writers use to build display tables.

## The schema (version 1 and 2)

What the renderer reads; [`validate_results`] refuses anything else with a `ValueError` naming the field.
Other keys (a method's raw numbers) may be present and are kept but not rendered.

* `schema_version` (int, 1 or 2): [`~hf_ext.core.reporting.RESULTS_SCHEMA_VERSION`] of the writer.
* `method` (str): the registered method name; `scale` (str): `"quick"` (what `make run` measures), `"full"`
  (`--full`) or another named scale.
* `environment` (object): where and when — `date` (str), `commit` (str or null), `machine` (str),
  `load_average` (three numbers or null), `torch_threads` (int, *optional*: torch's intra-op threads),
  `cpu_capability` (str, *optional*: torch's CPU kernel set, e.g. `"AVX512"`), `accelerator` (str, *optional*: the
  GPU a run used, e.g. `"NVIDIA H200"`).
* `smoke` (bool, *optional*): `true` for a smoke run — it exercises the code path and its numbers decide nothing;
  the renderer says so in the report heading and the README cell.
* `command` (str, *optional*): the command that produced it (default `hf-ext reproduce <method>`, `--full` added
  at full scale).
* `rules` (list, or an object whose values are the rules): each [`~hf_ext.core.reporting.VerdictRule.to_dict`]
  — `claim`, `metric`, `margin`, `higher_is_better`, `text` (the rule in words).
* `verdicts` (list, or an object whose values are the verdicts): each [`~hf_ext.core.reporting.Verdict.to_dict`]
  — `claim`, `verdict` (one of [`~hf_ext.core.reporting.VERDICTS`]), `reason`, `difference` (null, or `mean`,
  `sd`, `n`, `ci_low`, `ci_high`, `confidence`, `per_pair` with `n` values, `method`: `"t"` over seeds or
  `"bootstrap"` over items).
* `headline` (str): one line for the README; required when `verdicts` is empty (e.g. a numerics library whose
  checks are identities with tolerances).
* `report` (non-empty list): the display tables, each `{"title": str, "columns": [str], "rows": [[cell]],
  "note": str (optional), "plot": {...} (optional)}`; a cell is a string (as printed), a number or null.
* `figures` (list of str, *optional*): the method's own figures; every PNG beside `results.json` is shown.

A display table's optional `plot` asks the renderer for a figure of that table:
`{"x": column, "y": [columns], "kind": "line" | "bar", "log_y": bool, "ylabel": str}` (numbers are read from the
cells; a cell `"0.412 ± 0.031"` plots its first number).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .reporting import VERDICTS

SCHEMA_VERSIONS = (1, 2)


class ResultsSchemaError(ValueError):
    """A `results.json` that the renderer cannot read; the message names the field."""


# ---- the schema --------------------------------------------------------------------------------------------------


def _need(obj: Mapping, key: str, types: type | tuple[type, ...], where: str, *, nullable: bool = False) -> Any:
    if key not in obj:
        raise ResultsSchemaError(f"{where}.{key} is missing")
    value = obj[key]
    if value is None and nullable:
        return None
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise ResultsSchemaError(f"{where}.{key} must be {_names(types)}, got bool")
    if not isinstance(value, types):
        raise ResultsSchemaError(f"{where}.{key} must be {_names(types)}, got {type(value).__name__}")
    return value


def _names(types: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))


_NUM = (int, float)


def _check_difference(d: Any, where: str) -> None:
    if not isinstance(d, Mapping):
        raise ResultsSchemaError(f"{where} must be an object or null, got {type(d).__name__}")
    _need(d, "mean", _NUM, where)
    for key in ("sd", "ci_low", "ci_high"):
        _need(d, key, _NUM, where, nullable=True)
    n = _need(d, "n", int, where)
    _need(d, "confidence", _NUM, where)
    per_pair = _need(d, "per_pair", list, where)
    if len(per_pair) != n:
        raise ResultsSchemaError(f"{where}.per_pair has {len(per_pair)} values but n is {n}")
    for i, v in enumerate(per_pair):
        if isinstance(v, bool) or not isinstance(v, _NUM):
            raise ResultsSchemaError(f"{where}.per_pair[{i}] must be a number, got {type(v).__name__}")


def validate_results(results: Any) -> dict[str, Any]:
    """Checks `results` (a parsed `results.json`) against the schema above; returns a copy with `rules` and
    `verdicts` as lists.

    Raises:
        ResultsSchemaError: (a `ValueError`) naming the first field that is missing or of the wrong type.
    """
    if not isinstance(results, Mapping):
        raise ResultsSchemaError(f"results must be a JSON object, got {type(results).__name__}")
    version = _need(results, "schema_version", int, "results")
    if version not in SCHEMA_VERSIONS:
        raise ResultsSchemaError(f"results.schema_version must be one of {SCHEMA_VERSIONS}, got {version}")
    _need(results, "method", str, "results")
    _need(results, "scale", str, "results")
    if "command" in results:
        _need(results, "command", str, "results")
    if "smoke" in results:
        _need(results, "smoke", bool, "results")
    env = _need(results, "environment", dict, "results")
    _need(env, "date", str, "results.environment")
    _need(env, "commit", str, "results.environment", nullable=True)
    _need(env, "machine", str, "results.environment")
    load = _need(env, "load_average", list, "results.environment", nullable=True)
    if load is not None and (len(load) != 3 or not all(isinstance(x, _NUM) for x in load)):
        raise ResultsSchemaError(f"results.environment.load_average must be three numbers, got {load!r}")
    if "torch_threads" in env:
        _need(env, "torch_threads", int, "results.environment")
    for key in ("cpu_capability", "accelerator"):
        if key in env:
            _need(env, key, str, "results.environment")
    results = dict(results)
    for key in ("rules", "verdicts"):  # some writers key them by name: the renderer reads the values in order
        if isinstance(results.get(key), Mapping):
            items = results[key]
            claims = [v.get("claim") if isinstance(v, Mapping) else None for v in items.values()]
            if key == "verdicts" and len(set(claims)) < len(claims):  # one claim decided on several settings
                items = {k: {**v, "claim": _with_setting(v["claim"], k)} for k, v in items.items()}
            results[key] = list(items.values())
    for i, rule in enumerate(_need(results, "rules", list, "results")):
        where = f"results.rules[{i}]"
        if not isinstance(rule, Mapping):
            raise ResultsSchemaError(f"{where} must be an object")
        _need(rule, "claim", str, where)
        _need(rule, "metric", str, where)
        _need(rule, "margin", _NUM, where)
        _need(rule, "higher_is_better", bool, where)
        _need(rule, "text", str, where)
    verdicts = _need(results, "verdicts", list, "results")
    for i, verdict in enumerate(verdicts):
        where = f"results.verdicts[{i}]"
        if not isinstance(verdict, Mapping):
            raise ResultsSchemaError(f"{where} must be an object")
        _need(verdict, "claim", str, where)
        word = _need(verdict, "verdict", str, where)
        if word not in VERDICTS:
            raise ResultsSchemaError(f"{where}.verdict must be one of {VERDICTS}, got {word!r}")
        _need(verdict, "reason", str, where)
        if verdict.get("difference") is not None:
            _check_difference(verdict["difference"], f"{where}.difference")
    if not verdicts:
        if not isinstance(results.get("headline"), str) or not results["headline"].strip():
            raise ResultsSchemaError("results.headline is missing (required when results.verdicts is empty)")
    elif "headline" in results:
        _need(results, "headline", str, "results")
    tables = _need(results, "report", list, "results")
    if not tables:
        raise ResultsSchemaError("results.report is empty: a reproduction reports at least one table")
    for i, table in enumerate(tables):
        where = f"results.report[{i}]"
        if not isinstance(table, Mapping):
            raise ResultsSchemaError(f"{where} must be an object")
        _need(table, "title", str, where)
        columns = _need(table, "columns", list, where)
        if not columns or not all(isinstance(c, str) for c in columns):
            raise ResultsSchemaError(f"{where}.columns must be a non-empty list of strings")
        for j, row in enumerate(_need(table, "rows", list, where)):
            if not isinstance(row, list) or len(row) != len(columns):
                raise ResultsSchemaError(f"{where}.rows[{j}] must be a list of {len(columns)} cells")
            for k, cell in enumerate(row):
                if cell is not None and not isinstance(cell, str | int | float):
                    raise ResultsSchemaError(f"{where}.rows[{j}][{k}] must be a string, number or null")
        if "note" in table:
            _need(table, "note", str, where)
        if "plot" in table:
            _check_plot(table["plot"], columns, f"{where}.plot")
    figures = results.get("figures", [])
    if not isinstance(figures, list) or not all(isinstance(f, str) for f in figures):
        raise ResultsSchemaError("results.figures must be a list of file names")
    return results


def _with_setting(claim: str, key: str) -> str:
    """`"<claim> (small LM)"` from the key `"tinyalign_vs_baseline (small LM)"`: the setting the key names."""
    setting = key[key.index("(") :] if "(" in key and key.endswith(")") else f"[{key}]"
    return f"{claim} {setting}"


def _check_plot(plot: Any, columns: list[str], where: str) -> None:
    if not isinstance(plot, Mapping):
        raise ResultsSchemaError(f"{where} must be an object")
    x = _need(plot, "x", str, where)
    ys = _need(plot, "y", list, where)
    for c in [x, *ys]:
        if c not in columns:
            raise ResultsSchemaError(f"{where} names column {c!r}, which the table does not have")
    if plot.get("kind", "line") not in ("line", "bar"):
        raise ResultsSchemaError(f"{where}.kind must be 'line' or 'bar', got {plot.get('kind')!r}")


def load_results(path: str | os.PathLike) -> dict[str, Any]:
    """Reads and validates one `results.json`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ResultsSchemaError(f"{path}: not JSON ({err})") from err
    try:
        return validate_results(data)
    except ResultsSchemaError as err:
        raise ResultsSchemaError(f"{path}: {err}") from err


# ---- helpers the writers use -------------------------------------------------------------------------------------


def table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    note: str | None = None,
    plot: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One display table for `results["report"]` (cells as they are printed: strings, or numbers)."""
    out: dict[str, Any] = {"title": title, "columns": [str(c) for c in columns], "rows": [list(r) for r in rows]}
    if note:
        out["note"] = note
    if plot:
        out["plot"] = dict(plot)
    return out


_SEPARATOR = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?$")


def _split_row(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)]


def markdown_tables(titles: str | Sequence[str], markdown: str) -> list[dict[str, Any]]:
    """Display tables parsed from Markdown a method already prints: a header line, a `---` separator line, then
    the rows (cells separated by `|`, outer pipes optional) until a line without `|`. Other lines are skipped.

    `titles` names them in order (a single string: `title`, `title (2)`, `title (3)`, ...).
    """
    lines = markdown.splitlines()
    out, i = [], 0
    while i + 1 < len(lines):
        if "|" in lines[i] and _SEPARATOR.match(lines[i + 1].strip()):
            header = _split_row(lines[i])
            rows, i = [], i + 2
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                row = _split_row(lines[i])
                rows.append((row + [""] * len(header))[: len(header)])
                i += 1
            k = len(out)
            if isinstance(titles, str):
                title = titles if k == 0 else f"{titles} ({k + 1})"
            else:
                title = titles[k] if k < len(titles) else f"{titles[-1]} ({k + 1})"
            out.append(table(title, header, rows))
        else:
            i += 1
    return out
