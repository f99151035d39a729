"""Stringy Tr(φ³) and superstring amplitudes from surfaceology (https://arxiv.org/abs/2504.21676).

A verified numerics library: planar kinematics, the stringy Tr(φ³) amplitude as a curve / worldsheet integral,
field-theory Tr(φ³), the scaffolded bosonic string as one shift, the superstring as the (2n-3)!! reduced-Pfaffian
sum of shifted amplitudes, gluon amplitudes (3, 4, 5 gluons, real or helicity kinematics) from scaffolding
residues checked against Berends-Giele Yang-Mills and the Mafra-Schlotterer-Stieberger 5-gluon form, and Hub-native
amplitude tables.
"""

from hf_ext.core.registry import MethodSpec, register_method

from .config import AmplitudeTableConfig
from .field_theory import field_theory_amplitude, triangulations
from .five_gluons import mss_amplitude, z_integrals
from .gluons import GluonKinematics, t8f4, type_i_four_gluon
from .kinematics import mandelstams, planar_from_mandelstams, planar_variables, random_planar_kinematics
from .residues import laurent_coefficient
from .spinors import SpinorKinematics
from .stringy import Evaluation, stringy_amplitude
from .superstring import cycle_weights, scaffolded_bosonic_amplitude, superstring_amplitude, superstring_terms
from .yang_mills import berends_giele, ym_amplitude

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
        config_class=AmplitudeTableConfig,
        reproduce="hf_ext.amplitudes.reproduce:main",
        commands={"table": "hf_ext.amplitudes.table_cli:main"},
        demo="hf_ext.amplitudes.demo:build_demo",
        contract="hf_ext.amplitudes.testing:contract_fixture",
        library_name="datasets",
        status="implemented (identities of spec §2.7 at N <= 6; 3, 4 and 5 gluons, helicity amplitudes)",
    )
)



def __getattr__(name: str):
    # `datasets` is imported only when a table is used, so `import hf_ext` stays light
    if name in ("AmplitudeTable", "AmplitudeTableBuilder"):
        from . import tables

        return getattr(tables, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SPEC", "AmplitudeTable", "AmplitudeTableBuilder", "AmplitudeTableConfig", "Evaluation", "GluonKinematics",
    "SpinorKinematics", "berends_giele", "cycle_weights", "field_theory_amplitude", "laurent_coefficient",
    "mandelstams", "mss_amplitude", "planar_from_mandelstams", "planar_variables", "random_planar_kinematics",
    "scaffolded_bosonic_amplitude", "stringy_amplitude", "superstring_amplitude", "superstring_terms", "t8f4",
    "triangulations", "type_i_four_gluon", "ym_amplitude", "z_integrals",
]
