"""KV cache with `keep(path)`: after verification only the accepted root-to-node path's K/V remain.

`KVCache` is a transformers `DynamicCache` (so any HF causal LM accepts it through its public `cache=`
argument) whose layers write into preallocated buffers instead of concatenating (HF's `DynamicLayer`
copies the whole cache on every forward with `torch.cat`). Capacity doubles when exceeded.

Verify forward over a tree of N nodes appends N entries at slots [L, L+N). `keep(path)` then gathers
the entries of the accepted nodes (path = tree indices, root first, increasing) into slots
[L, L+len(path)) and truncates: the cache grows by exactly len(path). Because each node was rotated with
position L + depth and path[d] has depth d, the kept K/V sit exactly where a fresh forward would put
them — no re-rotation (tests check keep + forward == recompute from scratch).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

__all__ = ["KVCache"]


class BufferedLayer(DynamicLayer):
    """A DynamicLayer over a growable buffer: `keys`/`values` are views of the filled prefix."""

    def __init__(self, capacity: int = 256, **kwargs):
        super().__init__(**kwargs)
        self.capacity = capacity
        self.length = 0
        self._k: torch.Tensor | None = None  # (B, H_kv, capacity, D)
        self._v: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        b, h, _, d = key_states.shape
        # zeros, not garbage: a compiled step (`compiled.py`) attends over every slot, masked ones included, and
        # uninitialised memory can hold NaNs that a mask's 0 weight does not cancel (0 · NaN = NaN)
        self._k = key_states.new_zeros(b, h, self.capacity, d)
        self._v = value_states.new_zeros(b, h, self.capacity, value_states.shape[-1])
        self.is_initialized = True

    def _grow(self, needed: int) -> None:
        cap = self.capacity
        while cap < needed:
            cap *= 2
        k = self._k.new_zeros(*self._k.shape[:2], cap, self._k.shape[3])
        v = self._v.new_zeros(*self._v.shape[:2], cap, self._v.shape[3])
        k[:, :, : self.length] = self._k[:, :, : self.length]
        v[:, :, : self.length] = self._v[:, :, : self.length]
        self._k, self._v, self.capacity = k, v, cap

    # `keys`/`values` are views of the filled prefix made when read, not stored: a step truncates every layer of
    # every row (30 layers × B rows), and re-slicing on each truncate cost more than the reads it served
    @property
    def keys(self) -> torch.Tensor | None:
        return None if self._k is None else self._k[:, :, : self.length]  # (B, H_kv, L, D) view, no copy

    @keys.setter
    def keys(self, value) -> None:  # DynamicLayer.__init__/reset assign None; the buffers are the state
        if value is not None:
            raise NotImplementedError(
                "BufferedLayer's K/V live in its buffers: write with update(), drop with "
                "truncate()/keep() (offloading and beam reordering are not supported)"
            )

    @property
    def values(self) -> torch.Tensor | None:
        return None if self._v is None else self._v[:, :, : self.length]

    @values.setter
    def values(self, value) -> None:
        type(self).keys.fset(self, value)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        if self.length + n > self.capacity:
            self._grow(self.length + n)
        self._k[:, :, self.length : self.length + n] = key_states
        self._v[:, :, self.length : self.length + n] = value_states
        self.length += n
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError("crop takes a negative number of tokens to remove")
        self.truncate(self.length + tokens_to_remove)

    def truncate(self, length: int) -> None:
        self.length = length

    def keep(self, start: int, offsets: torch.Tensor, contiguous_prefix: bool) -> None:
        """Keep entries start+offsets (offsets increasing from 0) at slots [start, start+len(offsets))."""
        if self.is_initialized and not contiguous_prefix:
            src = offsets + start  # (P,)
            dst = slice(start, start + len(offsets))
            self._k[:, :, dst] = self._k.index_select(2, src)  # gather first (a copy), then write: no aliasing
            self._v[:, :, dst] = self._v.index_select(2, src)
        self.truncate(start + len(offsets))

    def reset(self) -> None:
        self.length = 0
        self._k = self._v = None
        self.is_initialized = False


class KVCache(DynamicCache):
    """An HF-compatible cache with `keep(path)`; pass it as `model(..., cache=kv, use_cache=True)`.

    `length` is the number of committed tokens. Between a verify forward and `keep`, the layers also hold
    the N tree entries; `keep` commits the accepted ones and drops the rest; `rollback()` drops all.
    """

    def __init__(self, num_layers: int, capacity: int = 256):
        from transformers.cache_utils import Cache

        Cache.__init__(self, layers=[BufferedLayer(capacity=capacity) for _ in range(num_layers)])
        self.length = 0

    @classmethod
    def for_model(cls, model, capacity: int = 256) -> KVCache:
        config = model.config.get_text_config(decoder=True)
        return cls(config.num_hidden_layers, capacity=capacity)

    def commit(self) -> None:
        """Accept everything written since the last commit (prefill, or a fully accepted chain)."""
        self.length = self.layers[0].length if self.layers else 0

    @torch.inference_mode()  # the buffers were created by forwards under inference mode
    def keep(self, path: list[int] | torch.Tensor) -> None:
        """Keep only the K/V of tree nodes `path` (indices into the last verified tree, root first)."""
        path_t = torch.as_tensor(path, dtype=torch.long)
        if path_t.ndim != 1 or len(path_t) == 0 or int(path_t[0]) != 0:
            raise ValueError(f"path must start at the root node 0, got {path_t.tolist()}")
        if len(path_t) > 1 and not bool((path_t[1:] > path_t[:-1]).all()):
            raise ValueError(f"path must be increasing (topological order), got {path_t.tolist()}")
        written = self.layers[0].length - self.length if self.layers else 0
        if int(path_t[-1]) >= written:
            raise ValueError(f"path {path_t.tolist()} reaches past the {written} nodes of the last forward")
        contiguous = int(path_t[-1]) == len(path_t) - 1  # path = 0, 1, ..., m: already in place
        offsets = path_t.to(self.layers[0]._k.device) if self.layers and self.layers[0].is_initialized else path_t
        for layer in self.layers:
            layer.keep(self.length, offsets, contiguous)
        self.length += len(path_t)

    @torch.inference_mode()
    def extend_from(self, other: KVCache, start: int, end: int) -> None:
        """Append `other`'s committed entries [start, end) of layers 0..len(self.layers)−1, and commit them.

        A layer-skip draft's first layers ARE the target's: for tokens the target has committed, their K/V
        in those layers is already in the target's cache, so the draft copies it instead of recomputing it.
        """
        if self.layers[0].length != self.length or self.length != start:
            raise ValueError(f"extend_from appends at the committed end {self.length} with nothing uncommitted; "
                             f"got start={start} with {self.layers[0].length} entries written")  # fmt: skip
        if not start <= end <= other.length or len(self.layers) > len(other.layers):
            raise ValueError(f"cannot copy entries [{start}, {end}) of {len(self.layers)} layers from a cache of "
                             f"{other.length} committed entries and {len(other.layers)} layers")  # fmt: skip
        if end > start:
            for mine, theirs in zip(self.layers, other.layers, strict=False):  # (B, H_kv, end - start, D)
                mine.update(theirs.keys[:, :, start:end], theirs.values[:, :, start:end])
            self.commit()

    def rollback(self) -> None:
        """Drop every uncommitted entry."""
        for layer in self.layers:
            layer.truncate(self.length)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.layers[layer_idx].length if layer_idx < len(self.layers) else 0


# ---- rows: a batch of sequences, each at its own length ---------------------------------------------------------
class _RowLayer(BufferedLayer):
    """One row's layer: a view of the shared (B, H_kv, C, D) buffers at that row (writes land in the batch's
    memory). The batch's capacity is fixed when it is made, so a row never grows on its own."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor):
        super().__init__(capacity=k.shape[2])
        self._k, self._v, self.device, self.is_initialized = k, v, k.device, True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        raise AssertionError("a row's buffers are the batch's: made with the batch")  # is_initialized is True

    def _grow(self, needed: int) -> None:
        raise ValueError(
            f"a row of this batch holds {self.capacity} cache slots and needs {needed}: make the batch with a "
            "larger capacity (RowsCache(capacity=prompt + max_new_tokens + nodes))"
        )


class _Slots:
    """Where one batched forward writes: row r's N new entries go to slots [L_r, L_r + N), the same for every
    layer, so the index is built once per forward (and is a plain slice when every row is at the same length)."""

    def __init__(self, starts: list[int]):
        self.starts, self.index = starts, None

    def write(self, buf: torch.Tensor, new: torch.Tensor) -> None:
        """buf (B, H_kv, C, D) <- new (B, H_kv, N, D) at each row's slots."""
        b, h, n, d = new.shape
        if len(set(self.starts)) == 1:  # every row at one length: one slice
            buf[:, :, self.starts[0] : self.starts[0] + n] = new
            return
        if self.index is None or self.index.shape != new.shape:
            starts = torch.tensor(self.starts, device=new.device)
            slots = starts[:, None] + torch.arange(n, device=new.device)  # (B, N)
            self.index = slots[:, None, :, None].expand(b, h, n, d)
        buf.scatter_(2, self.index, new)  # one write for every row


class _BatchLayer(DynamicLayer):
    """One layer of a batched forward: row r's N new entries go to its slots [L_r, L_r + N) (ragged rows: each
    at its own length), and attention reads every row's slots [0, max L + N), masked per row by the caller
    (`verify.rows_attention_mask`)."""

    def __init__(self, rows: list[BufferedLayer], k: torch.Tensor, v: torch.Tensor, slots: _Slots):
        super().__init__()
        self.rows, self._k, self._v, self.slots, self.is_initialized = rows, k, v, slots, True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        n = key_states.shape[2]  # key_states (B, H_kv, N, D)
        span = max(self.slots.starts) + n  # = max L_r + N
        if span > self._k.shape[2]:
            self.rows[self.slots.starts.index(max(self.slots.starts))]._grow(span)  # raises, naming the fix
        self.slots.write(self._k, key_states)
        self.slots.write(self._v, value_states)
        for row, start in zip(self.rows, self.slots.starts, strict=True):
            row.length = start + n  # its views are set again by the keep (or rollback) that follows the forward
        return self._k[:, :, :span], self._v[:, :, :span]

    def get_seq_length(self) -> int:
        return max(self.slots.starts)


class RowsCache:
    """The K/V of B sequences decoded together, each at its own length: one (B, H_kv, C, D) buffer per layer, and
    per row a `KVCache` over its slice (`row(b)`: prefill, keep(path), rollback and every proposer's reads are
    the single-sequence code unchanged). `batch()` is what one forward over every row at once writes through.

    Rows advance by different counts (ragged acceptance: each keeps its own accepted path), and a finished row
    is `reset(b)` for the next prompt while the others go on (continuous batching).
    """

    def __init__(self, model, rows: int, capacity: int):
        config = model.config.get_text_config(decoder=True)
        d = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        ref = next(model.parameters())
        shape = (rows, config.num_key_value_heads, capacity, d)
        self.k = [ref.new_zeros(shape) for _ in range(config.num_hidden_layers)]  # per layer (B, H_kv, C, D)
        self.v = [ref.new_zeros(shape) for _ in range(config.num_hidden_layers)]
        self.capacity = capacity
        self.rows = [self._row(b) for b in range(rows)]

    def _row(self, b: int) -> KVCache:
        cache = KVCache(len(self.k), capacity=self.capacity)
        cache.layers = [_RowLayer(k[b : b + 1], v[b : b + 1]) for k, v in zip(self.k, self.v, strict=True)]
        return cache

    def row(self, b: int) -> KVCache:
        return self.rows[b]

    def reset(self, b: int) -> None:
        """Row b starts empty (its next prompt is prefilled into it); its old entries are never read again."""
        row = self.rows[b]
        row.length = 0
        row.rollback()

    @property
    def lengths(self) -> list[int]:
        """Each row's committed length L_b."""
        return [row.length for row in self.rows]

    def batch(self) -> DynamicCache:
        """The cache one forward over every row passes the model (`verify.verify_rows`)."""
        from transformers.cache_utils import Cache

        cache = DynamicCache.__new__(DynamicCache)
        slots = _Slots(self.lengths)  # where this forward writes: each row at its committed length
        layers = [
            _BatchLayer([row.layers[i] for row in self.rows], k, v, slots)
            for i, (k, v) in enumerate(zip(self.k, self.v, strict=True))
        ]
        Cache.__init__(cache, layers=layers)
        return cache
