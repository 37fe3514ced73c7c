"""Many ``np.random.default_rng([seed, epoch, index, salt])`` generators at once, bit for bit.

The stream draws one generator per example from four small integers. Built one at a time, numpy's
SeedSequence (its entropy coercion, hash mixing and ``generate_state``, each a Python-level step)
costs about 10x more than the generator itself: ~40% of a stream's fixed cost per example. Here
the same arithmetic runs as NumPy over every key of a packing buffer:

1. Entropy: each key is 4 words of 32 bits (every value < 2**32: SeedSequence then coerces an int
   to exactly one word, and 4 words fill its pool of 4, so no extra mixing round follows).
2. SeedSequence.mix_entropy: ``hashmix`` of each word into the pool (the hash constant advances
   by MULT_A per call, the same sequence for every key), then every pool word mixed with the
   hashmix of every other one.
3. SeedSequence.generate_state(4, uint64): 8 words of 32 bits cycling over the pool, each XORed
   and multiplied with a constant that advances by MULT_B, read as 4 little-endian uint64.
4. PCG64 seeds itself from those 4 words (``generate_state`` of :class:`_Words`): the generator
   and its state equal ``default_rng`` exactly (tests/test_objective_pins.py compares states).
A key with a value outside [0, 2**32) falls back to ``default_rng`` (more than one word per value).
Cost: ~50 uint32 vector operations per call plus ~2 us per generator. Not covered: keys of other
lengths than 4; a generator's ``bit_generator.seed_seq`` is a :class:`_Words` (``spawn`` works
through a real SeedSequence of the same entropy, as default_rng's does).
"""

from __future__ import annotations

import numpy as np
from numpy.random.bit_generator import ISpawnableSeedSequence

_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875  # numpy/random/bit_generator.pyx: mix_entropy
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED  # generate_state
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_M32 = 0xFFFFFFFF
_POOL = 4


class _Words(ISpawnableSeedSequence):
    """A seed sequence whose state is already computed: PCG64 asks it for 4 uint64 words. Anything
    else (another request, ``spawn``) goes to a real SeedSequence of the same entropy, made once."""

    __slots__ = ("words", "entropy", "_real")

    def __init__(self, words: np.ndarray, entropy: list[int]):
        self.words, self.entropy, self._real = words, entropy, None

    def real(self) -> np.random.SeedSequence:
        if self._real is None:
            self._real = np.random.SeedSequence(self.entropy)
        return self._real

    def generate_state(self, n_words, dtype=np.uint32):
        if n_words != 4 or np.dtype(dtype) != np.uint64:  # only PCG64's request is precomputed
            return self.real().generate_state(n_words, dtype)
        return self.words

    def spawn(self, n_children):
        return self.real().spawn(n_children)


def state_words(keys: np.ndarray) -> np.ndarray:
    """(N, 4) keys, each value in [0, 2**32) -> (N, 4) uint64: ``SeedSequence(key).generate_state(4,
    np.uint64)`` for every key (module docstring, steps 2-3)."""
    e = np.asarray(keys, dtype=np.uint32).reshape(-1, _POOL)
    h = _INIT_A

    def hashmix(v: np.ndarray) -> np.ndarray:
        nonlocal h
        v = v ^ np.uint32(h)
        h = (h * _MULT_A) & _M32
        v = v * np.uint32(h)
        return v ^ (v >> np.uint32(16))

    def mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        r = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y
        return r ^ (r >> np.uint32(16))

    pool = [hashmix(e[:, i]) for i in range(_POOL)]
    for s in range(_POOL):
        for d in range(_POOL):
            if s != d:
                pool[d] = mix(pool[d], hashmix(pool[s]))
    out = np.empty((len(e), 2 * _POOL), dtype="<u4")
    hb = _INIT_B
    for i in range(2 * _POOL):
        v = pool[i % _POOL] ^ np.uint32(hb)
        hb = (hb * _MULT_B) & _M32
        v = v * np.uint32(hb)
        out[:, i] = v ^ (v >> np.uint32(16))
    return out.view("<u8").astype(np.uint64)


def generators(keys: list[tuple[int, int, int, int]]) -> list[np.random.Generator]:
    """``[np.random.default_rng(list(k)) for k in keys]``, computed together (module docstring)."""
    if not keys:
        return []
    try:
        arr = np.array(keys, dtype=np.int64)
    except (OverflowError, ValueError, TypeError):  # a value past int64, or keys of uneven length
        arr = None
    if arr is None or arr.shape[1:] != (_POOL,) or arr.min() < 0 or arr.max() > _M32:
        return [np.random.default_rng(list(k)) for k in keys]
    return [np.random.Generator(np.random.PCG64(_Words(w, k))) for w, k in zip(state_words(arr), keys)]
