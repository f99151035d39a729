"""Model cards rendered from a method's [`~hf_ext.core.registry.MethodSpec`] plus `model_cards/<method>.md`.

The hand-written file holds the sections only a person can write (intended use, limits, risks, the reproduction
table as measured); the metadata (library, tags, datasets, metrics, arXiv link) comes from the spec, so the YAML is
always in sync with the registry and validates with `huggingface_hub`'s card classes.
"""

from __future__ import annotations

from huggingface_hub import ModelCard, ModelCardData

from .registry import MethodSpec

CARD_TEMPLATE = """---
{{ card_data }}
---

# {{ title }}

{{ summary }}

- **Paper:** [{{ paper_title }}]({{ paper_url }})
- **Library:** hf_ext — `{{ kind }}` method `{{ name }}`{{ model_type_line }}

## How to use

```python
{{ usage }}
```

{{ body }}
"""

REQUIRED_METADATA = ("library_name", "license", "tags")


class CardError(ValueError):
    """A model card is missing metadata or has malformed YAML."""


def _usage(spec: MethodSpec, repo_id: str) -> str:
    if spec.usage:
        return spec.usage.format(repo_id=repo_id)
    if spec.kind in ("model", "adapter") and spec.auto_classes:
        auto = next(iter(spec.auto_classes))
        return (
            f"from transformers import {auto}\n\n"
            f"# with hf_ext installed (`import hf_ext` registers the model type):\n"
            f"import hf_ext\n"
            f"model = {auto}.from_pretrained(\"{repo_id}\")\n\n"
            f"# without hf_ext: the modeling code ships in the repo\n"
            f"model = {auto}.from_pretrained(\"{repo_id}\", trust_remote_code=True)"
        )
    return f"import hf_ext\n# see `hf-ext {spec.name} --help`\nhf_ext.get_method(\"{spec.name}\")"


def render_card(
    spec: MethodSpec, *, repo_id: str | None = None, body: str | None = None, base_model: str | None = None
) -> ModelCard:
    """Renders and validates the model card of a method.

    Args:
        spec ([`MethodSpec`]): the registered method.
        repo_id (`str`, *optional*): the Hub repo the card is for (used in the usage snippet).
        body (`str`, *optional*): hand-written Markdown; defaults to `model_cards/<method>.md`.
        base_model (`str`, *optional*): base model id for adapters.
    """
    if body is None:
        if not spec.card_file.is_file():
            raise CardError(f"{spec.name}: missing hand-written card sections {spec.card_file}")
        body = spec.card_file.read_text()
    tags = ["hf_ext", spec.kind, *spec.tags]
    if spec.arxiv_id:
        tags.append(f"arxiv:{spec.arxiv_id}")
    data = ModelCardData(
        library_name=spec.library_name,
        license=spec.license,
        tags=list(dict.fromkeys(tags)),
        datasets=list(spec.datasets) or None,
        metrics=list(spec.metrics) or None,
        pipeline_tag=spec.pipeline_tag,
        base_model=base_model,
    )
    card = ModelCard.from_template(
        data,
        template_str=CARD_TEMPLATE,
        title=spec.title if spec.title.lower().startswith(spec.name.replace("_", "-")) else f"{spec.name} — {spec.title}",
        summary=spec.summary,
        paper_title=spec.title,
        paper_url=spec.arxiv_url or "",
        kind=spec.kind,
        name=spec.name,
        model_type_line=f", model type `{spec.model_type}`" if spec.model_type else "",
        usage=_usage(spec, repo_id or f"your-name/{spec.name}"),
        body=body.strip(),
    )
    validate_card(card)
    return card


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
