"""The CodeBC Space: write a requirement, pick the security tag, see the generated contract, whether solc-js compiles
it, and Slither's findings. Loads the model `hf-ext reproduce codebc` writes (from the linked model repo: base + TI
adapter + tokenizer); without it, a tiny untrained model with a tokenizer trained on the few contracts written into
this module ([`FALLBACK_CONTRACTS`]; the training corpus is not shipped with the Space), and says so."""

from __future__ import annotations

import functools

from hf_ext.core.demo import space_model_repo

MAX_CHARS = 2000
EXAMPLE = (
    "Generate smart contract code that meets the following requirements:\n"
    "Programming with solidity ^ version number 0.8.20\n"
    "Implement an interface named IERC165 for contract introspection\n"
    "The following functions need to be implemented, with the following names and functions:\n"
    "supportsInterface: Returns true if this contract implements the interface.\n"
    "Please give the contract code"
)
TAG_CHOICES = ("correct", "bug", "none")
# The offline fallback's tokenizer corpus: small comment-free contracts written for the Space.
FALLBACK_CONTRACTS = (
    """pragma solidity ^0.8.20;
interface IERC165 {
    function supportsInterface(bytes4 interfaceId) external view returns (bool);
}
contract ERC165 is IERC165 {
    function supportsInterface(bytes4 interfaceId) public view virtual override returns (bool) {
        return interfaceId == type(IERC165).interfaceId;
    }
}""",
    """pragma solidity ^0.8.20;
contract Counter {
    uint256 private _count;
    event Incremented(address indexed by, uint256 value);
    function increment() external {
        _count += 1;
        emit Incremented(msg.sender, _count);
    }
    function current() external view returns (uint256) {
        return _count;
    }
}""",
    """pragma solidity ^0.8.20;
contract Ownable {
    address private _owner;
    error NotOwner(address caller);
    constructor() {
        _owner = msg.sender;
    }
    modifier onlyOwner() {
        if (msg.sender != _owner) revert NotOwner(msg.sender);
        _;
    }
    function owner() public view returns (address) {
        return _owner;
    }
    function transferOwnership(address newOwner) external onlyOwner {
        require(newOwner != address(0), "zero address");
        _owner = newOwner;
    }
}""",
    """pragma solidity ^0.8.20;
contract SimpleToken {
    mapping(address => uint256) public balanceOf;
    uint256 public totalSupply;
    event Transfer(address indexed from, address indexed to, uint256 value);
    constructor(uint256 supply) {
        balanceOf[msg.sender] = supply;
        totalSupply = supply;
    }
    function transfer(address to, uint256 value) external returns (bool) {
        require(balanceOf[msg.sender] >= value, "balance");
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
        return true;
    }
}""",
)


@functools.lru_cache(maxsize=2)
def load_model(root: str | None = None):
    """`(model, tokenizer, source)`: base + TI adapter + tokenizer from the linked model repo (or `root`, a repo id or
    a folder as `hf-ext reproduce codebc` writes it), or an untrained tiny fallback with a note."""
    root = root or space_model_repo("codebc")
    why = "no model repo is linked"
    if root:
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

        try:
            base = AutoModelForCausalLM.from_pretrained(root)
            return (
                PeftModel.from_pretrained(base, root, subfolder="adapter"),
                PreTrainedTokenizerFast.from_pretrained(root),
                f"model repo `{root}`",
            )
        except Exception as err:  # noqa: BLE001 - offline or missing: the tiny model below, and the page says so
            why = f"could not load the linked model repo {root} ({type(err).__name__})"
    import torch

    from .adapter import add_adapter
    from .presets import tiny_config
    from .tokenizer import codebc_token_ids, train_tokenizer

    tok = train_tokenizer(list(FALLBACK_CONTRACTS) * 4, vocab_size=512)
    config = tiny_config(
        vocab_size=len(tok),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tag_token_ids=codebc_token_ids(tok),
        max_position_embeddings=512,
    )
    from .modeling_codebc import CodeBCForCausalLM

    torch.manual_seed(0)
    return (
        add_adapter(CodeBCForCausalLM(config)),
        tok,
        f"**Note:** {why}; showing an untrained tiny model built in code instead",
    )


def run_requirement(requirement: str, tag: str, max_new_tokens: int = 200) -> dict:
    """Generates, compiles and analyses one contract. Raises `ValueError` on bad input."""
    from .solidity import analyze, compile_once
    from .tags import generate_with_tag

    if not requirement or not requirement.strip():
        raise ValueError("the requirement is empty: describe the contract to generate (see the example)")
    if len(requirement) > MAX_CHARS:
        raise ValueError(f"the requirement has {len(requirement)} characters; at most {MAX_CHARS}")
    if tag not in TAG_CHOICES:
        raise ValueError(f"security tag must be one of {TAG_CHOICES}, got {tag!r}")
    model, tok, source = load_model()
    gen = generate_with_tag(model, tok, requirement, None if tag == "none" else tag, max_new_tokens=max_new_tokens)[0]
    code = gen["code"] or "(empty)"
    comp = compile_once(code, "Generated.sol")
    findings = []
    if comp.ok:
        a = analyze(code, "Generated.sol")
        if a.ok:
            findings = [[f["impact"], f["check"], f["description"].splitlines()[0][:160]] for f in a.findings]
            status = (
                f"**compiles** with solc-js {comp.warnings and f'({comp.warnings} warnings)' or ''}; Slither: "
                + ", ".join(f"{k} {v}" for k, v in a.counts.items())
            )
        else:
            status = f"**compiles**; Slither could not analyse it ({a.reason}: {(a.error or '')[:200]})"
    else:
        first = comp.errors[0].splitlines()[0] if comp.errors else ""
        status = f"**does not compile** ({comp.reason}): {first}"
    if tag != "none":
        status = f"response forced to start with `[Tag] {tag} [/Tag]` · " + status
    status += "\n\n" + reading(comp.ok, len(findings), tag, source)
    return {"response": gen["response"], "code": code, "status": status, "findings": findings, "source": source}


def reading(compiles: bool, n_findings: int, tag: str, source: str) -> str:
    """One honest line on one generation: what it shows, and what one sample cannot show."""
    if "Note:" in source:
        return (
            "**Reading:** this is an untrained model built in code, so the contract is not meaningful; the page "
            "shows the pipeline (forced tag → generation → solc-js → Slither), not CodeBC's quality."
        )
    verdict = f"compiles with {n_findings} Slither finding(s)" if compiles else "does not compile"
    return (
        f"**Reading:** this sample {verdict}"
        + (f" under the `{tag}` tag" if tag != "none" else "")
        + "; one sample says little: the README's compile rate and Slither counts over 41 tasks × 5 samples are "
        "the measurement."
    )


def build_demo():
    """The Gradio Blocks of the CodeBC Space."""
    import gradio as gr

    from hf_ext.core.demo import time_limited

    def run(requirement, tag, progress=gr.Progress()):
        progress(0.1, desc="generating, then compiling (solc-js) and analysing (Slither)")
        try:
            r = time_limited(run_requirement, 240)(requirement, tag)
        except (ValueError, TimeoutError) as err:  # bad input: a readable message, not a stack trace
            raise gr.Error(str(err)) from None
        rows = r["findings"] or [["-", "no findings", "(or the contract did not compile)"]]
        return r["code"], r["status"] + f"\n\n_{r['source']}_", rows

    with gr.Blocks(title="CodeBC: security-tag guided Solidity generation") as demo:
        gr.Markdown(
            "# CodeBC — Solidity generation steered by a security tag\n"
            "[arXiv 2504.21043](https://arxiv.org/abs/2504.21043) · hf_ext. One LoRA adapter trained code infilling → "
            "vulnerability detection → tag-guided instruction tuning; the tag you pick is forced at the start of the "
            "response. The contract is compiled with solc-js 0.8.37 and analysed by Slither."
        )
        requirement = gr.Textbox(value=EXAMPLE, lines=7, label="requirement", elem_id="codebc-requirement")
        tag = gr.Radio(list(TAG_CHOICES), value="correct", label="security tag")
        gr.Examples(
            examples=[[EXAMPLE, "correct"], [EXAMPLE, "bug"], [EXAMPLE, "none"]],
            inputs=[requirement, tag],
            label="examples: the same requirement with each tag (the tag is the method's steering input)",
        )
        button = gr.Button("Generate", variant="primary")
        code = gr.Code(label="generated contract", elem_id="codebc-code")
        status = gr.Markdown(elem_id="codebc-status")
        findings = gr.Dataframe(
            headers=["impact", "detector", "description"], label="Slither findings", elem_id="codebc-findings"
        )
        button.click(run, [requirement, tag], [code, status, findings], api_name="generate")
    return demo
