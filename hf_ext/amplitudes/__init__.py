"""Stringy Tr(φ³) and superstring amplitudes from surfaceology (https://arxiv.org/abs/2504.21676).

A verified numerics library: planar kinematics, the stringy Tr(φ³) amplitude as a curve / worldsheet integral,
field-theory Tr(φ³), the scaffolded bosonic string as one shift, the superstring as the (2n-3)!! reduced-Pfaffian
sum of shifted amplitudes, gluon amplitudes (3, 4, 5 gluons, real or helicity kinematics) from scaffolding
residues checked against Berends-Giele Yang-Mills and the Mafra-Schlotterer-Stieberger 5-gluon form, the
continuation outside the Euclidean region, the F³ amplitude at first α′ order via Yang-Mills-scalar amplitudes, the
determinant form of the residue integrand, and Hub-native amplitude tables.
"""

from hf_ext.core.lazy import lazy_exports
from hf_ext.core.registry import MethodSpec, register_method

# Public names load on first use (PEP 562): `import hf_ext` imports neither the numerics (scipy, mpmath) nor the
# tables (datasets).
__getattr__, __dir__ = lazy_exports(__name__, {
    "AmplitudeTableConfig": ".config", "field_theory_amplitude": ".field_theory", "triangulations": ".field_theory",
    "mss_amplitude": ".five_gluons", "z_integrals": ".five_gluons",
    "GluonKinematics": ".gluons", "t8f4": ".gluons", "type_i_four_gluon": ".gluons", "mandelstams": ".kinematics",
    "planar_from_mandelstams": ".kinematics", "planar_variables": ".kinematics",
    "random_planar_kinematics": ".kinematics", "laurent_coefficient": ".residues", "SpinorKinematics": ".spinors",
    "Evaluation": ".stringy", "stringy_amplitude": ".stringy", "cycle_weights": ".superstring",
    "scaffolded_bosonic_amplitude": ".superstring", "superstring_amplitude": ".superstring",
    "superstring_terms": ".superstring", "berends_giele": ".yang_mills", "ym_amplitude": ".yang_mills",
    "AmplitudeTable": ".tables", "AmplitudeTableBuilder": ".tables",
    "continued_amplitude": ".continuation", "alpha_series": ".alpha_expansion",
    "continued_four_gluon": ".alpha_expansion", "determinant_integrand": ".determinant_form",
    "f3_amplitude": ".yang_mills_f3", "f3_via_yms": ".yang_mills_f3", "perturbiner_amplitude": ".yang_mills_f3",
})  # fmt: skip

SPEC = register_method(
    MethodSpec(
        name="amplitudes",
        kind="numerics",
        title="Superstring amplitudes meet surfaceology",
        arxiv_id="2504.21676",
        summary=(
            "Stringy Tr(φ³) amplitudes as curve integrals, the superstring as (2n-3)!! shifted Tr(φ³) amplitudes "
            "from a reduced Pfaffian, gluons from scaffolding residues; vectorised numerics checked against "
            "closed forms, with amplitude tables published as Hub datasets."
        ),
        tags=("physics", "scattering-amplitudes", "string-theory", "numerics", "datasets"),
        config_class="hf_ext.amplitudes.config:AmplitudeTableConfig",
        reproduce="hf_ext.amplitudes.reproduce:main",
        # "training" a numerics library = tabulating the user's kinematics (see train.py)
        train="hf_ext.amplitudes.train:main",
        evaluate="hf_ext.amplitudes.evaluate:main",
        commands={"table": "hf_ext.amplitudes.table_cli:main"},
        demo="hf_ext.amplitudes.demo:build_demo",
        contract="hf_ext.amplitudes.testing:contract_fixture",
        library_name="datasets",
        status="implemented (identities of spec §2.7 at N <= 6, continued to every α′X > -1; 3, 4 and 5 gluons, "
        "helicity amplitudes; F³ via YMS at 4 gluons; determinant form)",
    )
)


__all__ = [
    "SPEC",
    "AmplitudeTable",
    "AmplitudeTableBuilder",
    "AmplitudeTableConfig",
    "Evaluation",
    "GluonKinematics",
    "SpinorKinematics",
    "alpha_series",
    "berends_giele",
    "continued_amplitude",
    "continued_four_gluon",
    "cycle_weights",
    "determinant_integrand",
    "f3_amplitude",
    "f3_via_yms",
    "field_theory_amplitude",
    "laurent_coefficient",
    "mandelstams",
    "mss_amplitude",
    "perturbiner_amplitude",
    "planar_from_mandelstams",
    "planar_variables",
    "random_planar_kinematics",
    "scaffolded_bosonic_amplitude",
    "stringy_amplitude",
    "superstring_amplitude",
    "superstring_terms",
    "t8f4",
    "triangulations",
    "type_i_four_gluon",
    "ym_amplitude",
    "z_integrals",
]
