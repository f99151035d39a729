"""Gradio demo: the 4- and 5-point stringy Tr(φ³) amplitudes against α′ and against one planar variable, with the
field-theory limit overlaid; a small amplitude table built with the `datasets` builder.

Paper: [Superstring amplitudes meet surfaceology](https://arxiv.org/abs/2504.21676). `build_demo()` only builds
the Blocks; nothing launches on import.
"""

from __future__ import annotations

import numpy as np

from .field_theory import field_theory_amplitude
from .kinematics import x_labels
from .stringy import stringy_amplitude

DEFAULT_X = {4: "0.7, 1.3", 5: "0.9, 1.7, 1.2, 0.8, 1.4"}
MAX_POINTS_PER_CURVE = 400
# Space caps (an α′ scan from 1e-300 to 1e300, or 20,000 α′ values, used to hang the page)
ALPHA_RANGE = (1e-4, 100.0)
X_RANGE = (-100.0, 100.0)
MAX_TABLE_ALPHAS = 8
REQUEST_SECONDS = 60.0


def check_scan(scan: str, lo: float, hi: float, alpha: float) -> None:
    """Raises a `ValueError` naming the field and the allowed range for a scan the Space will not run."""
    from hf_ext.core.demo import check_range

    if scan == "alpha":
        check_range("α′ scan 'from'", lo, *ALPHA_RANGE)
        check_range("α′ scan 'to'", hi, *ALPHA_RANGE)
    else:
        check_range(f"{scan} scan 'from'", lo, *X_RANGE)
        check_range(f"{scan} scan 'to'", hi, *X_RANGE)
        check_range("α′", alpha, *ALPHA_RANGE)


def parse_kinematics(n_points: int, text: str) -> np.ndarray:
    """Comma-separated planar variables in the order of `x_labels(N)`; raises ValueError on bad input."""
    N = int(n_points)
    if N not in (4, 5):
        raise ValueError(f"the demo plots N = 4 or 5 points, got {n_points!r}")
    try:
        values = np.array([float(v) for v in str(text).replace(";", ",").split(",") if v.strip()])
    except ValueError as err:
        raise ValueError(f"planar variables must be numbers separated by commas ({err})") from None
    if values.size != len(x_labels(N)):
        raise ValueError(
            f"N = {N} needs {len(x_labels(N))} planar variables ({', '.join(x_labels(N))}), got {values.size}"
        )
    if not np.all(np.isfinite(values)):
        raise ValueError("planar variables must be finite")
    return values


def amplitude_curves(
    n_points: int,
    text: str,
    scan: str,
    lo: float,
    hi: float,
    alpha: float,
    method: str = "closed_form",
    points: int = 120,
) -> dict:
    """The data behind the plot: x grid, α′^{N-3} A_N and the field-theory value along the scan.

    Args:
        n_points (`int`): 4 or 5.
        text (`str`): planar variables, comma-separated.
        scan (`str`): `"alpha"` (α′ from lo to hi, log-spaced) or a planar-variable label such as `"X13"`.
        lo, hi (`float`): scan range.
        alpha (`float`): α′ when scanning a planar variable.
        method (`str`): `"closed_form"` (continued everywhere) or `"curve"` (convergent region only).
        points (`int`): grid size.

    Raises:
        ValueError: bad kinematics, range or method (shown in the demo as one message).
    """
    N = int(n_points)
    X = parse_kinematics(N, text)
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"need a scan range lo < hi, got {lo} and {hi}")
    points = int(min(max(points, 10), MAX_POINTS_PER_CURVE))
    if method not in ("closed_form", "curve"):
        raise ValueError(f"method must be 'closed_form' or 'curve', got {method!r}")
    if scan == "alpha":
        if lo <= 0:
            raise ValueError("α′ must be > 0: choose a scan range with lo > 0")
        grid = np.geomspace(lo, hi, points)
        A = stringy_amplitude(np.broadcast_to(X, (points, X.size)), grid, N, method=method).value
        ft = np.full(points, field_theory_amplitude(X))
        return {"x": grid, "string": grid ** (N - 3) * A, "field_theory": ft, "xlabel": "α′", "log": True}
    labels = x_labels(N)
    if scan not in labels:
        raise ValueError(f"scan must be 'alpha' or one of {labels}, got {scan!r}")
    if not np.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"α′ must be > 0, got {alpha}")
    k = labels.index(scan)
    grid = np.linspace(lo, hi, points)
    grid = grid[np.abs(alpha * grid - np.round(alpha * grid)) > 1e-6]  # skip the exact poles α′X = 0, -1, ...
    batch = np.repeat(X[None, :], grid.size, axis=0)
    batch[:, k] = grid
    A = stringy_amplitude(batch, alpha, N, method=method).value
    with np.errstate(divide="ignore"):
        ft = np.where(grid != 0, field_theory_amplitude(np.where(batch == 0, np.nan, batch), N), np.nan)
    return {"x": grid, "string": alpha ** (N - 3) * A, "field_theory": ft, "xlabel": scan, "log": False}


def plot_amplitude(n_points, text, scan, lo, hi, alpha, method="closed_form", progress=None):
    """Matplotlib figure and a Markdown summary for the demo; errors become `gr.Error` (no stack trace)."""
    import gradio as gr
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hf_ext.core.demo import time_limited

    if progress is not None:
        progress(0.1, desc=f"evaluating the {method} amplitude along the scan")
    try:
        check_scan(scan, lo, hi, alpha)
        data = time_limited(amplitude_curves, REQUEST_SECONDS)(
            int(n_points), text, scan, float(lo), float(hi), float(alpha), method
        )
    except (ValueError, TypeError, TimeoutError) as err:
        raise gr.Error(str(err)) from None
    N = int(n_points)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(data["x"], data["string"], label=f"α′^{N - 3} A_{N} (string)")
    ax.plot(data["x"], data["field_theory"], "--", label="field theory (sum over cubic diagrams)")
    if data["log"]:
        ax.set_xscale("log")
    finite = data["string"][np.isfinite(data["string"])]
    if finite.size:
        lo_y, hi_y = np.percentile(finite, [5, 95])
        pad = 0.5 * (hi_y - lo_y + 1e-12)
        ax.set_ylim(lo_y - pad, hi_y + pad)
    ax.set_xlabel(data["xlabel"])
    ax.set_ylabel("amplitude")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig, reading(data, N)


def reading(data: dict, n_points: int) -> str:
    """One line on the curves: at the smallest scanned value, how far the string amplitude is from field theory."""
    i = int(np.argmin(data["x"]))
    last, ft = data["string"][i], data["field_theory"][i]
    gap = abs(last - ft) / abs(ft) if np.isfinite(ft) and ft != 0 else float("nan")
    md = (
        f"**Reading:** N = {n_points}; at the smallest {data['xlabel']} = {data['x'].min():.4g}: string {last:.6g}, "
        f"field theory {ft:.6g} (relative gap {gap:.2%}). "
    )
    if data["log"]:
        md += "The gap shrinks as α′ → 0: the string amplitude tends to the sum over cubic diagrams."
    else:
        md += "Along a planar variable the string curve crosses its poles at α′X = 0, -1, -2, ... (closed form)."
    return md


def build_table(theories, alphas_text: str, samples: float, seed: float = 0):
    """A small table from the `datasets` builder, as a DataFrame; errors become `gr.Error`."""
    import gradio as gr

    from .config import AmplitudeTableConfig
    from .tables import AmplitudeTable

    try:
        from hf_ext.core.demo import check_range, time_limited

        alphas = tuple(float(a) for a in str(alphas_text).split(",") if a.strip())
        if len(alphas) > MAX_TABLE_ALPHAS:
            raise ValueError(f"the demo builds at most {MAX_TABLE_ALPHAS} α′ values, got {len(alphas)}")
        for a in alphas:
            check_range("each α′ value", a, *ALPHA_RANGE)
        if int(samples) > 16:
            raise ValueError("the demo builds at most 16 samples per cell")
        config = AmplitudeTableConfig(
            theories=tuple(theories or ()),
            points=(4, 5),
            gluons=(3, 4),
            alphas=alphas,
            samples=int(samples),
            seed=int(seed),
        )
        table = time_limited(AmplitudeTable, REQUEST_SECONDS)(config)
    except (ValueError, TypeError, TimeoutError) as err:
        raise gr.Error(str(err)) from None
    df = table.dataset.to_pandas()
    df["x"] = df["x"].map(lambda v: ", ".join(f"{x:.4g}" for x in v))
    return df.drop(columns=["x_labels", "polarisation"])


def five_gluon_report(seed: float, alpha: float, theory: str = "bosonic") -> str:
    """The paper's new content at 5 gluons, as Markdown: the continued residue L(α′) at a random point (any α′),
    its α′ expansion against the YM + F³ Berends-Giele amplitudes, and the symmetric-determinant form against the
    105 Pfaffian terms. Errors become `gr.Error`."""
    import gradio as gr

    from hf_ext.core.demo import check_range, time_limited

    from .five_gluons_continued import continued_five_gluon
    from .gluons import GluonKinematics
    from .identities_issue42 import F3_CONSTANT, YM_CONSTANT, alpha_coefficients
    from .residues import _term_values, residue_terms
    from .symmetric_determinant import symmetric_determinant_integrand
    from .yang_mills import gluon_vectors
    from .yang_mills_f3 import f3_amplitude, perturbiner_amplitude

    try:
        if theory not in ("bosonic", "super"):
            raise ValueError(f"theory must be 'bosonic' or 'super', got {theory!r}")
        check_range("α′", alpha, 0.01, 5.0)
        check_range("seed", seed, 0, 2**31 - 1)
        rng = np.random.default_rng(int(seed))
        kin = GluonKinematics.random(5, rng, -2.0, 2.0)

        def run():
            value = continued_five_gluon(kin, float(alpha), theory)
            coeffs = alpha_coefficients(kin, "bosonic")
            gaps = np.concatenate([np.ones((3, 1)), rng.uniform(0.2, 1.0, (3, 3))], axis=1)
            det = symmetric_determinant_integrand(kin, 0.9, gaps)
            ref = _term_values(kin, 0.9, residue_terms(5, "super"), gaps).sum(axis=0)
            return value, coeffs, float(np.max(np.abs(det / ref - 1)))

        value, c, det_err = time_limited(run, REQUEST_SECONDS)()
    except (ValueError, TypeError, TimeoutError) as err:
        raise gr.Error(str(err)) from None
    k, e, G = gluon_vectors(kin)
    a_ym, a_f3 = perturbiner_amplitude(k, e, G).real, f3_amplitude(k, e, G).real
    return (
        f"**Continued 5-gluon residue** ({theory}, α′ = {float(alpha):g}, seed {int(seed)}): L = {value.real:.10g}\n\n"
        f"**α′ expansion (bosonic, Cauchy circle):** α′¹: {c[1].real:.3g} (0); α′²: {c[2].real:.10g} "
        f"(2A_YM = {YM_CONSTANT * a_ym:.10g}); α′³: {c[3].real:.10g} (-4A_F³ = {F3_CONSTANT['bosonic'] * a_f3:.10g}, "
        "Berends-Giele). The superstring's α′³ term is 0: its cycle classes cancel the bosonic F³.\n\n"
        f"**n x n symmetric determinant** vs the 105 Pfaffian terms, 3 random points: max relative difference "
        f"{det_err:.2e}."
    )


def build_demo():
    """The amplitudes Gradio app (`gradio.Blocks`); launch it with `build_demo().launch()`."""
    import gradio as gr

    from .config import THEORIES

    with gr.Blocks(title="Stringy Tr(φ³) and superstring amplitudes") as demo:
        gr.Markdown(
            "# Superstring amplitudes meet surfaceology\n"
            "Paper: [arXiv:2504.21676](https://arxiv.org/abs/2504.21676). The stringy Tr(φ³) amplitude "
            "A_N is a curve integral over u-variables; α′^{N-3} A_N tends to the sum over cubic diagrams. "
            f"Space limits: α′ in [{ALPHA_RANGE[0]:g}, {ALPHA_RANGE[1]:g}], planar variables in "
            f"[{X_RANGE[0]:g}, {X_RANGE[1]:g}], at most {MAX_TABLE_ALPHAS} α′ values per table."
        )
        with gr.Tab("4 and 5 points"):
            with gr.Row():
                n_points = gr.Radio([4, 5], value=5, label="N (points)")
                text = gr.Textbox(
                    DEFAULT_X[5], label="planar variables (X13, X24 | X13, X14, X24, X25, X35)", elem_id="amplitudes-x"
                )
                method = gr.Radio(["closed_form", "curve"], value="closed_form", label="evaluator")
            with gr.Row():
                scan = gr.Dropdown(["alpha"] + x_labels(5), value="alpha", label="scan")
                lo = gr.Number(0.01, label="from")
                hi = gr.Number(3.0, label="to")
                alpha = gr.Number(1.0, label="α′ (when scanning an X)")
            gr.Examples(
                examples=[
                    [5, DEFAULT_X[5], "closed_form", "alpha", 0.01, 3.0, 1.0],
                    [4, DEFAULT_X[4], "closed_form", "X13", -2.5, 2.5, 1.0],
                    [5, DEFAULT_X[5], "curve", "alpha", 0.01, 0.5, 1.0],
                ],
                inputs=[n_points, text, method, scan, lo, hi, alpha],
                label="examples: the α′ → 0 field-theory limit, the string poles along X13, the curve integral",
            )
            button = gr.Button("Plot", variant="primary")
            plot = gr.Plot(elem_id="amplitudes-plot")
            summary = gr.Markdown(elem_id="amplitudes-summary")
            n_points.change(
                lambda n: (DEFAULT_X[int(n)], gr.Dropdown(choices=["alpha"] + x_labels(int(n)), value="alpha")),
                n_points,
                [text, scan],
            )

            def on_plot(n_points, text, scan, lo, hi, alpha, method, progress=gr.Progress()):
                return plot_amplitude(n_points, text, scan, lo, hi, alpha, method, progress=progress)

            button.click(on_plot, [n_points, text, scan, lo, hi, alpha, method], [plot, summary])
        with gr.Tab("5 gluons: F³ and the determinant"):
            gr.Markdown(
                "The 5-gluon scaffolding residue continued to any α′ (Laurent subtraction at the collisions), its "
                "α′² and α′³ terms against the Yang-Mills + F³ Berends-Giele recursion, and the n x n symmetric "
                "determinant with commutator prefactors against the (2n-3)!! = 105 Pfaffian terms. About 10-20 s."
            )
            with gr.Row():
                g_seed = gr.Number(0, label="seed", precision=0)
                g_alpha = gr.Number(0.3, label="α′ for L(α′)")
                g_theory = gr.Radio(["bosonic", "super"], value="bosonic", label="theory of L(α′)")
            g_button = gr.Button("Compute")
            g_out = gr.Markdown(elem_id="amplitudes-five-gluons")
            g_button.click(five_gluon_report, [g_seed, g_alpha, g_theory], g_out)
        with gr.Tab("Amplitude table"):
            theories = gr.CheckboxGroup(list(THEORIES), value=["tr_phi3", "field_theory"], label="theories")
            alphas = gr.Textbox("0.5, 1.0", label="α′ values")
            samples = gr.Slider(1, 16, value=2, step=1, label="samples per cell")
            seed = gr.Number(0, label="seed", precision=0)
            make = gr.Button("Build table")
            gr.Markdown(
                "Each row is one amplitude: `n` points (`polygon`: the surface's polygon), `alpha_prime` "
                "α′, `theory`, the planar variables `x`, the `amplitude` there (a value to read: neither "
                "higher nor lower is better), the evaluator `method`, and `error`, its estimated numerical "
                "error (↓ lower is better)."
            )
            frame = gr.Dataframe()
            make.click(build_table, [theories, alphas, samples, seed], frame)
    return demo


if __name__ == "__main__":
    build_demo().launch()
