"""Model cards rendered from a method's [`~hf_ext.core.registry.MethodSpec`], `model_cards/<method>.md` and, for a
push, the artifact's own training record.

- [`render_card`]: the method's card (metadata from the spec, hand-written sections from `model_cards/<method>.md`);
  what `save_artifact` writes next to the weights.
- [`render_artifact_card`]: what `hf-ext push` uploads. The card describes *this* artifact: the run's config, the
  data it was trained on, its measured metrics as `model-index` results ([`huggingface_hub.EvalResult`]),
  `base_model` for adapters and split parts, the paper's BibTeX. An artifact without `training_record.json` is
  published as "untrained / random init" (or refused, see `allow_untrained`), and the hand-written reproduction
  table is labelled as the method's numbers, never the artifact's.

Dataset metadata lists Hub dataset ids only where they exist (a `hub_id` in the record, or a namespaced
`owner/name` id in the spec); local or synthetic data sets are named in the card text.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .registry import MethodSpec

CARD_TEMPLATE = """---
{{ card_data }}
---

# {{ title }}

{{ summary }}

- **Paper:** [{{ paper_title }}]({{ paper_url }})
- **Library:** hf_ext — `{{ kind }}` method `{{ name }}`{{ model_type_line }}
{{ status }}
## How to use

{{ install }}

```python
{{ usage }}
```
{{ artifact_section }}
{{ body }}

## Citation

```bibtex
{{ bibtex }}
```
"""

REQUIRED_METADATA = ("library_name", "license", "tags")

# How hf_ext itself is installed; the Spaces' requirements.txt use the same wheel (see spaces/README.md).
HF_EXT_WHEEL = "hf_ext-0.1.0-py3-none-any.whl"

# Third-party packages the *remote code* of a method needs beyond torch + transformers, imported lazily there, with
# the exact pip line shown on the card (a missing one raises an ImportError that prints the same line).
REMOTE_CODE_EXTRAS: dict[str, tuple[str, str]] = {
    "tinyalign": (
        "pip install 'faiss-cpu>=1.15.1,<1.16'",
        "the memory bank (a faiss index) is needed to run the model",
    ),
    "tba": (
        "pip install 'diffusers>=0.42.1,<0.43'",
        "only the DHNG noise generator; the pose regressor loads without it",
    ),
}
# Methods whose artifact needs hf_ext itself (not only remote code) to give the method's outputs.
NEEDS_HF_EXT = {
    "h2tune": 'the adapter_config.json says `peft_type: "HF_EXT_H2TUNE"`: plain PEFT refuses it (KeyError), '
    "`import hf_ext` registers the triple-matrix LoRA variant",
    "codebc": "the security-tag control tokens and `generate_with_tag` live in hf_ext",
    "gpmfs": "the selector is a scikit-learn estimator from hf_ext (its arrays are plain safetensors)",
    "amplitudes": "the table is a `datasets` Arrow table; `datasets.load_dataset(repo_id)` reads it without hf_ext",
}

# Authors as recorded in /work/shared/specs (only where the spec has the full list); the rest cite by arXiv id.
AUTHORS: dict[str, str] = {
    "amplitudes": "Cao, Qu and Dong, Jin and He, Song and Zhu, Fan",
    "tba": "Li, Zhiying and Jin, Yeying and Shen, Fan and Liu, Zhi and Chen, Weibin and Zhang, Pengju and Zhang, "
    "Xiaomei and Chen, Boyu and Shen, Michael and Wu, Kejian and Fan, Zhaoxin and Dong, Jin",
    "proto_evfl": "Guo, Wei and Duan, Yiyang and Hu, Zhaojun and Tong, Yiqi and Zhuang, Fuzhen and Zhang, Xiao and "
    "Dong, Jin and Wu, Ruofan and Liu, Tengfei and Sun, Yifan",
}
VENUES: dict[str, str] = {"tba": "Pattern Recognition", "orca": "CIKM"}

# Task types for `model-index` results (the Hub's task ids), by pipeline tag and by kind.
TASK_BY_KIND = {"model": "other", "adapter": "text-generation", "estimator": "feature-extraction", "numerics": "other"}
UNTRAINED_NOTE = (
    "> **This artifact is untrained (random initialisation).** No training record was saved with it, so its outputs "
    "are meaningless and no result below was measured on it. Train one with `{command}` and push that instead."
)


class CardError(ValueError):
    """A model card is missing metadata or has malformed YAML."""


class UntrainedArtifactError(CardError):
    """`hf-ext push` of an artifact without a training record, without `--allow-untrained`."""


def bibtex(spec: MethodSpec) -> str:
    """The paper's BibTeX entry (arXiv eprint; authors where the spec records the full list)."""
    key = f"{spec.name.replace('_', '')}{('20' + spec.arxiv_id[:2]) if spec.arxiv_id else ''}"
    fields = [("title", "{" + spec.title + "}")]
    if spec.name in AUTHORS:
        fields.append(("author", AUTHORS[spec.name]))
    if spec.arxiv_id:
        fields += [
            ("year", "20" + spec.arxiv_id[:2]),
            ("eprint", spec.arxiv_id),
            ("archivePrefix", "arXiv"),
            ("url", spec.arxiv_url),
        ]
    if spec.name in VENUES:
        fields.append(("note", VENUES[spec.name]))
    body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields)
    return f"@misc{{{key},\n{body}\n}}"


def core_requirement(package: str, default: str) -> str:
    """`package`'s requirement as hf_ext's installed metadata declares it for every install (no extra), with the
    lower bound first (`transformers>=5.24,<6`); `default` where the metadata is not there."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    try:
        lines = metadata.requires("hf_ext") or []
    except metadata.PackageNotFoundError:
        return default
    for line in lines:
        req = Requirement(line)
        if canonicalize_name(req.name) == canonicalize_name(package) and req.marker is None and req.specifier:
            specs = sorted(req.specifier, key=lambda sp: (not sp.operator.startswith(">"), sp.version))
            return req.name + ",".join(str(sp) for sp in specs)
    return default


def _install(spec: MethodSpec) -> str:
    lines = [
        f'`pip install "hf_ext[{spec.name.replace("_", "-")}] @ <URL or path of {HF_EXT_WHEEL}>"` '
        '(the wheel: see the hf_ext README, "Publishing to the Hub").'
    ]
    if spec.name in NEEDS_HF_EXT:
        lines.append(f"hf_ext is needed here: {NEEDS_HF_EXT[spec.name]}.")
    elif spec.kind in ("model", "adapter"):
        torch_req = core_requirement("torch", "torch>=2.13,<2.15")
        transformers_req = core_requirement("transformers", "transformers>=5.24,<6")
        lines.append(
            f"Without hf_ext: `pip install '{torch_req}' '{transformers_req}'`; "
            "`trust_remote_code=True` runs the modeling code shipped in this repo."
        )
    if spec.name in REMOTE_CODE_EXTRAS:
        pip, why = REMOTE_CODE_EXTRAS[spec.name]
        lines.append(f"Optional dependency of the remote code: `{pip}` ({why}).")
    return "\n".join(f"- {line}" for line in lines)


def _usage(spec: MethodSpec, repo_id: str) -> str:
    if spec.usage:
        return spec.usage.format(repo_id=repo_id)
    if spec.kind in ("model", "adapter") and spec.auto_classes:
        auto = next(iter(spec.auto_classes))
        return (
            f"from transformers import {auto}\n\n"
            f"# with hf_ext installed (`import hf_ext` registers the model type):\n"
            f"import hf_ext\n"
            f'model = {auto}.from_pretrained("{repo_id}")\n\n'
            f"# without hf_ext: the modeling code ships in the repo\n"
            f'model = {auto}.from_pretrained("{repo_id}", trust_remote_code=True)'
        )
    return f'import hf_ext\n# see `hf-ext {spec.name} --help`\nhf_ext.get_method("{spec.name}")'


def _hub_dataset_ids(spec: MethodSpec, record: dict | None) -> list[str]:
    """Hub dataset ids only: the record's `hub_id`s, else the spec's namespaced (`owner/name`) ids."""
    if record is not None:
        return [d["hub_id"] for d in record.get("datasets", []) if d.get("hub_id")]
    return [d for d in spec.datasets if re.fullmatch(r"[\w.-]+/[\w.-]+", d)]


def _eval_results(spec: MethodSpec, record: dict) -> list[EvalResult]:
    task = spec.pipeline_tag or TASK_BY_KIND[spec.kind]
    datasets = {d["name"]: d for d in record.get("datasets", [])}
    default_ds = next(iter(datasets), spec.name)
    results = []
    for m in record.get("metrics", []):
        ds_name = m.get("dataset") or default_ds
        ds = datasets.get(ds_name, {})
        results.append(
            EvalResult(
                task_type=task,
                dataset_type=ds.get("hub_id") or ds_name,
                dataset_name=ds_name,
                dataset_split=m.get("split"),
                metric_type=m["type"],
                metric_name=m["name"],
                metric_value=m["value"],
            )
        )
    return results


def _relabel_body(body: str, trained: bool) -> str:
    """The hand-written reproduction table is the method's (from `hf-ext reproduce`), never this artifact's."""
    body = re.sub(
        r"^## Reproduction \(as measured\)",
        "## Method reproduction (measured by `hf-ext reproduce`; not this artifact's numbers)",
        body,
        flags=re.M,
    )
    if not trained:
        body = re.sub(
            r"^## Training data$",
            "## Training data (of the reproduce runs; this artifact was not trained)",
            body,
            flags=re.M,
        )
    return body


def _artifact_section(spec: MethodSpec, record: dict) -> str:
    lines = ["", "## This artifact", ""]
    if record.get("command"):
        lines.append(f"Produced by `{record['command']}` (hf_ext {record.get('hf_ext_version', '?')}).")
    if record.get("notes"):
        lines.append(f"{record['notes']}")
    if record.get("base_model"):
        base = record["base_model"]
        base = [base] if isinstance(base, str) else base
        lines.append("Base model: " + ", ".join(f"`{b}`" for b in base) + ".")
    if record.get("datasets"):
        lines += ["", "**Data it was trained on:**", ""]
        for d in record["datasets"]:
            where = (
                f"[`{d['hub_id']}`](https://huggingface.co/datasets/{d['hub_id']})"
                if d.get("hub_id")
                else "not on the Hub (built or read locally by hf_ext)"
            )
            desc = f" — {d['description']}" if d.get("description") else ""
            lines.append(f"- `{d['name']}`: {where}{desc}")
    if record.get("metrics"):
        lines += [
            "",
            "**Measured on this artifact** (also in the `model-index` metadata):",
            "",
            "metric | value | split | data | higher is better",
            "--- | --- | --- | --- | ---",
        ]
        for m in record["metrics"]:
            hib = {True: "yes", False: "no"}.get(m.get("higher_is_better"), "")
            lines.append(f"{m['name']} | {m['value']:.4g} | {m.get('split') or ''} | {m.get('dataset') or ''} | {hib}")
    if record.get("config"):
        lines += [
            "",
            "<details><summary>Run config</summary>",
            "",
            "```json",
            json.dumps(record["config"], indent=2, sort_keys=True, default=str),
            "```",
            "",
            "</details>",
        ]
    return "\n".join(lines) + "\n"


def render_card(
    spec: MethodSpec,
    *,
    repo_id: str | None = None,
    body: str | None = None,
    base_model: str | list[str] | None = None,
    record: dict | None = None,
    untrained: bool = False,
) -> ModelCard:
    """Renders and validates the model card of a method.

    Args:
        spec ([`MethodSpec`]): the registered method.
        repo_id (`str`, *optional*): the Hub repo the card is for (used in the usage snippet).
        body (`str`, *optional*): hand-written Markdown; defaults to `model_cards/<method>.md`.
        base_model (`str`, *optional*): base model id for adapters (a record's `base_model` wins).
        record (`dict`, *optional*): the artifact's training record ([`~hf_ext.core.records.load_training_record`]):
            adds the "This artifact" section, `model-index` results, Hub dataset ids and `base_model`.
        untrained (`bool`, *optional*): the artifact has no record; the card says "untrained / random init".
    """
    if body is None:
        card_file = _card_file(spec)
        if not card_file.is_file():
            raise CardError(f"{spec.name}: missing hand-written card sections {card_file}")
        body = card_file.read_text()
    tags = ["hf_ext", spec.kind, *spec.tags]
    if spec.arxiv_id:
        tags.append(f"arxiv:{spec.arxiv_id}")
    if untrained:
        tags.append("untrained")
    status = ""
    if record is not None:
        if record.get("base_model"):
            base_model = record["base_model"]
        elif base_model:
            record = {**record, "base_model": base_model}  # the "This artifact" section names it too
        if not record.get("trained", True):
            untrained = True
    if untrained:
        status = "\n" + UNTRAINED_NOTE.format(command=f"hf-ext reproduce {spec.name}") + "\n"
    results = _eval_results(spec, record) if record is not None and not untrained else None
    model_name = (repo_id or f"{spec.name}").split("/")[-1]
    data = ModelCardData(
        library_name=spec.library_name,
        license=spec.license,
        tags=list(dict.fromkeys(tags)),
        datasets=_hub_dataset_ids(spec, record) or None,
        metrics=list(spec.metrics) or None,
        pipeline_tag=spec.pipeline_tag,
        base_model=base_model,
        eval_results=results or None,
        model_name=model_name if results else None,
    )
    card = ModelCard.from_template(
        data,
        template_str=CARD_TEMPLATE,
        title=spec.title
        if spec.title.lower().startswith(spec.name.replace("_", "-"))
        else f"{spec.name} — {spec.title}",
        summary=spec.summary,
        paper_title=spec.title,
        paper_url=spec.arxiv_url or "",
        kind=spec.kind,
        name=spec.name,
        model_type_line=f", model type `{spec.model_type}`" if spec.model_type else "",
        status=status,
        install=_install(spec),
        usage=_usage(spec, repo_id or f"your-name/{spec.name}"),
        artifact_section=_artifact_section(spec, record) if record is not None and not untrained else "",
        body=_relabel_body(body.strip(), trained=not untrained) if (record is not None or untrained) else body.strip(),
        bibtex=bibtex(spec),
    )
    validate_card(card)
    return card


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def _known_local_bases() -> dict[Path, str]:
    """Local folders hf_ext loads real pretrained backbones from, with their Hub ids (see `core.pretrained`)."""
    try:
        from .pretrained import smollm2_cache

        return {smollm2_cache().resolve(): "HuggingFaceTB/SmolLM2-135M-Instruct"}
    except Exception:  # noqa: BLE001 - no pretrained support installed: nothing to map
        return {}


def infer_base_models(artifact_dir: str | os.PathLike) -> list[str]:
    """Hub ids of the base models the artifact's PEFT adapters name (`adapter_config.json`'s
    `base_model_name_or_path`, in any subfolder): a Hub id as written, a local folder only when it is a known
    pretrained backbone's cache (SmolLM2-135M-Instruct); folders built in code name no Hub base."""
    known = _known_local_bases()
    found = []
    for config in sorted(Path(artifact_dir).rglob("adapter_config.json")):
        try:
            ref = json.loads(config.read_text()).get("base_model_name_or_path")
        except (OSError, ValueError):
            continue
        if not isinstance(ref, str) or not ref:
            continue
        local = Path(ref).expanduser()
        if local.is_absolute() or local.exists():
            try:
                ref = known.get(local.resolve())
            except OSError:
                ref = None
        elif not HUB_ID.fullmatch(ref):
            ref = None
        if ref and ref not in found:
            found.append(ref)
    return found


def render_artifact_card(
    spec: MethodSpec, artifact_dir: str | os.PathLike, *, repo_id: str, allow_untrained: bool = False, **kwargs
) -> ModelCard:
    """The card `hf-ext push` uploads, rendered from the artifact's `training_record.json`.

    Args:
        spec ([`MethodSpec`]): the registered method.
        artifact_dir (`str` or `os.PathLike`): the saved artifact folder.
        repo_id (`str`): the model repo the card is for.
        allow_untrained (`bool`, defaults to `False`): publish an artifact without a record (its card says
            "untrained / random init"); otherwise [`UntrainedArtifactError`] names the command that trains one.
        kwargs: passed to [`render_card`] (`body`, `base_model`).
    """
    from .records import load_training_record

    record = load_training_record(artifact_dir)
    if record is not None and record.get("method") != spec.name:
        raise CardError(
            f"{artifact_dir}: its training record is for method {record.get('method')!r}, not {spec.name!r}"
        )
    untrained = record is None or not record.get("trained", True)
    if untrained and not allow_untrained:
        raise UntrainedArtifactError(
            f"{artifact_dir} has no training record (training_record.json), so nothing says it was trained: "
            f"push an artifact saved by `hf-ext reproduce {spec.name}`, or pass --allow-untrained to publish it "
            "as 'untrained / random init'"
        )
    if record is not None and not record.get("base_model") and "base_model" not in kwargs:
        inferred = infer_base_models(artifact_dir)  # adapters trained on a Hub base say so even if the record forgot
        if inferred:
            kwargs["base_model"] = inferred[0] if len(inferred) == 1 else inferred
    return render_card(spec, repo_id=repo_id, record=record, untrained=untrained, **kwargs)


def _card_file(spec: MethodSpec) -> Path:
    return spec.card_file


def validate_card(card: ModelCard | str) -> ModelCard:
    """Parses the card again and checks its metadata with `huggingface_hub`'s classes (offline).

    `ModelCard.validate()` additionally asks the Hub's YAML validator; the push tests run that against the local
    Hub server.
    """
    try:
        parsed = ModelCard(str(card))
    except Exception as err:  # yaml errors come in several classes
        raise CardError(f"model card YAML does not parse: {err}") from None
    meta = parsed.data.to_dict()
    missing = [k for k in REQUIRED_METADATA if not meta.get(k)]
    if missing:
        raise CardError(f"model card metadata is missing {missing}")
    ModelCardData(**meta)  # re-validates eval_results and field types
    return parsed
