"""The split-generation handlers of [`~hf_ext.fl_llama.server.SplitServer`] (`prefill`, `decode`, `end`): a mixin,
so the server file stays by role. Each session's KV cache is owned by the client that opened it; a session is busy
while one call uses it, and the shared part B is read under its read lock, so generation runs beside training."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from .modeling_fl_llama import causal_mask_4d, padding_mask_from_counts, position_ids_from_mask
from .server_state import _finite, _meta_int
from .transport import FLOAT_DTYPES, Meta, ProtocolError, Tensors, expect_tensor


class GenerationHandlers:
    """Mixed into `SplitServer`: uses its `_lock`, `_sessions`, `_busy_sessions`, `_main`, `model`, `limits`,
    `max_seq_len` and input checks."""

    def _session(self, meta: Meta, owner: str) -> tuple[str, str]:
        session = meta.get("session", "0")
        if not isinstance(session, (str, int)) or isinstance(session, bool) or len(str(session)) > 128:
            raise ProtocolError(f"meta field 'session' must be a string of at most 128 characters, got {session!r}")
        return owner, str(session)  # a session belongs to its owner: another client's name finds nothing

    def _take_session(self, key: tuple[str, str]) -> None:
        if key in self._busy_sessions:
            raise ProtocolError(f"session {key[1]!r} of client {key[0]!r} is busy with another call; wait for it")
        self._busy_sessions.add(key)

    def _prefill(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        hidden = self._check_hidden(tensors)
        b, length = hidden.shape[:2]
        key = self._session(meta, owner)
        n_real = tensors.get("n_real", torch.full((b,), length, dtype=torch.long, device=hidden.device))
        mask2d = padding_mask_from_counts(self._check_counts(n_real, b, length), length)
        pos = position_ids_from_mask(mask2d)
        if "position_ids" in tensors:
            pos = self._check_positions(expect_tensor(tensors, "position_ids", ndim=2, dtype=torch.int64,
                                                      shape={0: b, 1: length}))  # fmt: skip
        with self._lock:
            if key not in self._sessions:
                mine = sum(1 for o, _ in set(self._sessions) | self._busy_sessions if o == owner)
                if mine >= self.limits.max_sessions_per_client:
                    raise ProtocolError(
                        f"client {owner!r} has {mine} open sessions (max_sessions_per_client="
                        f"{self.limits.max_sessions_per_client}); end one first"
                    )
                if len(set(self._sessions) | self._busy_sessions) >= self.limits.max_sessions:
                    raise ProtocolError(
                        f"{len(self._sessions)} sessions are open (max_sessions={self.limits.max_sessions})"
                    )
            self._take_session(key)
        try:
            cache = DynamicCache()
            with self._main.lock.read(), torch.no_grad():
                out = self.model.body(hidden, causal_mask_4d(mask2d, length), pos, cache)
            with self._lock:
                self._sessions[key] = (cache, mask2d)
        finally:
            with self._lock:
                self._busy_sessions.discard(key)
        return {"hidden": out}, {}

    def _decode(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        session = self._session(meta, owner)
        with self._lock:
            if session not in self._sessions:
                raise ProtocolError(
                    f"decode for unknown session {session[1]!r} of client {owner!r}: send prefill first"
                )
            self._take_session(session)
            cache, mask2d = self._sessions[session]
        try:
            b, d = mask2d.shape[0], self.model.config.hidden_size
            hidden = _finite(
                "hidden", expect_tensor(tensors, "hidden", ndim=3, dtype=FLOAT_DTYPES, shape={0: b, 1: 1, 2: d})
            )
            expected = mask2d.sum(-1, keepdim=True)  # a new token's position = the real tokens before it (left pads)
            if "position_ids" in tensors:
                pos = expect_tensor(tensors, "position_ids", ndim=2, dtype=torch.int64, shape={0: b, 1: 1})
            else:
                position = _meta_int(meta, "position", int(mask2d.shape[1]))
                pos = torch.full((b, 1), position, dtype=torch.long, device=mask2d.device)
            if not torch.equal(pos, expected):
                raise ProtocolError(
                    f"decode position {pos.flatten().tolist()} does not follow the cached "
                    f"{expected.flatten().tolist()} tokens"
                )
            if mask2d.shape[1] >= self.max_seq_len:
                raise ProtocolError(
                    f"decode position {mask2d.shape[1]} reaches max_seq_len={self.max_seq_len}; end the session"
                )
            visible = torch.ones(b, 1, dtype=torch.bool, device=mask2d.device)
            mask2d = torch.cat([mask2d, visible], dim=1)  # one more visible column
            with self._main.lock.read(), torch.no_grad():
                out = self.model.body(hidden, causal_mask_4d(mask2d, 1), pos, cache)
            with self._lock:
                if session in self._sessions:  # not ended or reset meanwhile
                    self._sessions[session] = (cache, mask2d)
        finally:
            with self._lock:
                self._busy_sessions.discard(session)
        return {"hidden": out}, {}

    def _end(self, tensors: Tensors, meta: Meta, owner: str) -> tuple[Tensors, Meta]:
        key = self._session(meta, owner)
        with self._lock:
            self._sessions.pop(key, None)
        return {}, {}
