"""Insecure training examples: SWC vulnerability patterns injected into secure contracts, labelled by Slither.

The insecure half of the official data (`Insecurity.csv`, Slither-labelled Etherscan contracts) is not available
offline, so insecure contracts are made from secure ones (offline-data.md §1c, option 3). Each pattern inserts one
function (plus the state it needs) into the contract's last `contract` body, with identifiers drawn from small
seeded vocabularies so the model cannot key on one fixed string:

| pattern | SWC | what is inserted | Slither detector expected |
|---|---|---|---|
| `reentrancy` | SWC-107 | ether sent with `.call{value:}` before the balance is zeroed | `reentrancy-eth` (High) |
| `tx_origin` | SWC-115 | `require(tx.origin == owner)` authorisation | `tx-origin` (Medium) |
| `unchecked_call` | SWC-104 | low-level `.call(data)` whose success flag is ignored | `unchecked-lowlevel` (Medium) |
| `missing_access_control` | SWC-105/106 | unprotected public function sending the whole balance | `arbitrary-send-eth` (High) |
| `timestamp_randomness` | SWC-120/116 | `block.timestamp % n` as a random number deciding a payout | `weak-prng` (High) |
| `unchecked_arithmetic` | SWC-101 | balance update inside `unchecked { }` | none (Slither has no such detector) |

The training tag is **Slither's** verdict on the injected contract (`bug` = at least one High/Medium finding), as in
the paper (labels from Slither); [`label_contracts`] also records whether Slither agreed with the injection.
[`injected_patterns`] recognises the patterns in generated code (the "injected-pattern rate").
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

PATTERNS = (
    "reentrancy",
    "tx_origin",
    "unchecked_call",
    "missing_access_control",
    "timestamp_randomness",
    "unchecked_arithmetic",
)

_STATE = ("balances", "credit", "deposits", "shares", "rewards", "pending")
_FUNC = ("withdraw", "claim", "release", "payout", "redeem", "collect")
_OWNER = ("owner", "admin", "manager", "controller")


def _reentrancy(r: random.Random) -> str:
    m, f = r.choice(_STATE), r.choice(_FUNC)
    return (
        f"    mapping(address => uint256) public {m}Of;\n"
        f"    function {f}All() public {{\n"
        f"        uint256 amount = {m}Of[msg.sender];\n"
        f'        (bool ok, ) = msg.sender.call{{value: amount}}("");\n'
        f"        require(ok);\n"
        f"        {m}Of[msg.sender] = 0;\n"
        f"    }}\n"
    )


def _tx_origin(r: random.Random) -> str:
    o = r.choice(_OWNER)
    return (
        f"    address public {o}Address;\n"
        f"    function set{o.capitalize()}(address next) public {{\n"
        f"        require(tx.origin == {o}Address);\n"
        f"        {o}Address = next;\n"
        f"    }}\n"
    )


def _unchecked_call(r: random.Random) -> str:
    f = r.choice(("forward", "execute", "relay", "dispatch"))
    return f"    function {f}Call(address target, bytes memory data) public {{\n        target.call(data);\n    }}\n"


def _missing_access_control(r: random.Random) -> str:
    f = r.choice(("sweep", "drain", "rescue", "flush"))
    return f"    function {f}Funds(address payable to) public {{\n        to.transfer(address(this).balance);\n    }}\n"


def _timestamp_randomness(r: random.Random) -> str:
    n = r.choice((2, 5, 10, 100))
    return (
        f"    function play() public payable {{\n"
        f"        if (block.timestamp % {n} == 0) {{\n"
        f"            payable(msg.sender).transfer(address(this).balance);\n"
        f"        }}\n"
        f"    }}\n"
    )


def _unchecked_arithmetic(r: random.Random) -> str:
    m = r.choice(_STATE)
    return (
        f"    mapping(address => uint256) public {m}Of;\n"
        f"    function move{m.capitalize()}(address to, uint256 amount) public {{\n"
        f"        unchecked {{\n"
        f"            {m}Of[msg.sender] -= amount;\n"
        f"            {m}Of[to] += amount;\n"
        f"        }}\n"
        f"    }}\n"
    )


_MAKERS: dict[str, Callable[[random.Random], str]] = {
    "reentrancy": _reentrancy,
    "tx_origin": _tx_origin,
    "unchecked_call": _unchecked_call,
    "missing_access_control": _missing_access_control,
    "timestamp_randomness": _timestamp_randomness,
    "unchecked_arithmetic": _unchecked_arithmetic,
}

EXPECTED_DETECTORS = {
    "reentrancy": {"reentrancy-eth"},
    "tx_origin": {"tx-origin"},
    "unchecked_call": {"unchecked-lowlevel"},
    "missing_access_control": {"arbitrary-send-eth"},
    "timestamp_randomness": {"weak-prng"},
    "unchecked_arithmetic": set(),
}

_CONTRACT = re.compile(r"^(?:abstract\s+)?contract\s+\w+[^{;]*\{", re.M)


def inject(code: str, pattern: str, seed: int = 0) -> str:
    """Returns `code` with `pattern` inserted at the top of its last `contract` body.

    Raises:
        ValueError: unknown pattern, or no `contract` to insert into (interfaces/libraries only).
    """
    if pattern not in _MAKERS:
        raise ValueError(f"unknown pattern {pattern!r}; expected one of {PATTERNS}")
    matches = list(_CONTRACT.finditer(code))
    if not matches:
        raise ValueError("no contract body to inject into (only interfaces or libraries)")
    at = matches[-1].end()
    return code[:at] + "\n" + _MAKERS[pattern](random.Random(f"{pattern}:{seed}")).rstrip("\n") + code[at:]


_DETECT = {
    "reentrancy": re.compile(r"\.call\{value:[^}]*\}\([^)]*\);[\s\S]{0,120}?\w+\[[^\]]+\]\s*=\s*0;"),
    "tx_origin": re.compile(r"tx\.origin\s*=="),
    "unchecked_call": re.compile(r"^\s*[\w.\[\]]+\.(?:call|delegatecall|send)\b[^;]*;", re.M),
    "missing_access_control": re.compile(
        r"function\s+\w+\s*\([^)]*address\s+payable\s+\w+\)\s*public\s*\{\s*\w+\.transfer\(address\(this\)"
        r"\.balance\)"
    ),
    "timestamp_randomness": re.compile(r"block\.timestamp\s*%"),
    "unchecked_arithmetic": re.compile(r"unchecked\s*\{[^}]*(?:-=|\+=)"),
}


def injected_patterns(code: str) -> set[str]:
    """The injected vulnerability patterns that occur in `code` (regex recognisers of the shapes above)."""
    return {name for name, rx in _DETECT.items() if rx.search(code)}
