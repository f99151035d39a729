"""Child-process CodeBLEU (run as a script, so it imports neither hf_ext nor torch): reads `[[ref, pred], ...]`
JSON on stdin and prints the per-sample `calc_codebleu` dicts as JSON. See `metrics.codebleu_scores`."""

import json
import logging
import sys

if __name__ == "__main__":
    logging.disable(logging.WARNING)  # "no reference data-flows" warnings, one per interface file
    from codebleu import calc_codebleu

    out = []
    for ref, pred in json.load(sys.stdin):
        r = calc_codebleu([ref], [pred], lang="javascript", weights=(0.25, 0.25, 0.25, 0.25))
        out.append({k: float(v) for k, v in r.items()})
    json.dump(out, sys.stdout)
