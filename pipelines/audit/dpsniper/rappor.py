"""RAPPOR (Erlingsson, Pihur & Korolova, "RAPPOR: Randomized Aggregatable Privacy-Preserving
Ordinal Response", CCS'14), steps 1–3 and the one-time variant (steps 1–2), as DP-Sniper's
benchmark defines them (its Rappor and OneTimeRappor).

Mechanism. A client's value v (one integer: DP-Sniper's neighbours are v and v ± 1, `relation:
l1` on one answer here) is hashed into a Bloom filter B of `bits` bits (DP-Sniper: 20) by
`hashes` hash functions (DP-Sniper: 4): bit (h_j(v) mod bits) is set, where h_j is the 32-bit
MurmurHash3 (x86) of the value's decimal text with seed j, read as a signed integer and reduced
with a non-negative remainder (what DP-Sniper's `mmh3.hash(str(v), seed=j) % bits` computes).
  Permanent randomized response (step 2): each bit independently becomes 1 with probability
  f/2, 0 with probability f/2, and keeps B's bit otherwise. DP-Sniper draws it afresh for every
  sample (each sample is a new client), not memoised per value.
  Instantaneous randomized response (step 3, full RAPPOR only): a bit that is 1 is reported as 1
  with probability q, a bit that is 0 with probability p.
DP-Sniper: rappor at f = 0.75, p = 0.45, q = 0.55; one_time_rappor at f = 0.95.

Claimed guarantee and status. RAPPOR does not claim 0.1-DP: its guarantee follows from f (and p,
q) and from the number of Bloom bits in which two values differ (at most 2·hashes). Per differing
bit the privacy loss is ln((1 − f/2)/(f/2)) after step 2, and ln(q*/p*) after step 3, with
q* = (f/2)(p + q) + (1 − f)q and p* = (f/2)(p + q) + (1 − f)p the probabilities of reporting 1 for
a set and an unset bit. Not known to be broken: DP-Sniper's suite includes it to see how tight
a bound the search finds; an audit that holds it to ε = 0.1 flags it without any flaw.

Output columns: `bit0` … `bit{bits-1}` (the reported bits, 0 or 1, as floats).
"""

import numpy as np

_MASK = 0xFFFFFFFF


def _rotl(v, r):
    return ((v << r) | (v >> (32 - r))) & _MASK


def _scramble(k):
    k = (k * 0xCC9E2D51) & _MASK
    k = _rotl(k, 15)
    return (k * 0x1B873593) & _MASK


def murmur3_32(data, seed):
    """MurmurHash3 x86 32-bit of `data` (bytes) with `seed`, as a signed 32-bit integer."""
    h = seed & _MASK
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        h ^= _scramble(int.from_bytes(data[i : i + 4], "little"))
        h = _rotl(h, 13)
        h = (h * 5 + 0xE6546B64) & _MASK
    tail = data[whole:]
    if tail:
        h ^= _scramble(int.from_bytes(tail, "little"))
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def bloom(value, hashes, bits):
    """The Bloom filter of one value: a 0/1 float vector of `bits` entries."""
    if float(value) != int(value):
        raise ValueError(f"RAPPOR hashes an integer value, got {value}")
    text = str(int(value)).encode("utf-8")
    b = np.zeros(bits)
    for j in range(hashes):
        b[murmur3_32(text, j) % bits] = 1.0  # Python's % of a positive modulus is ≥ 0
    return b


def _permanent(b, n, rng, f):
    u = rng.random((n, len(b)))
    return np.where(u < f / 2, 1.0, np.where(u < f, 0.0, b[None, :]))


def _one_value(x):
    if len(x) != 1:
        raise ValueError(f"RAPPOR reports one value, got {len(x)}")
    return x[0]


def _columns(out):
    return [(f"bit{j}", out[:, j]) for j in range(out.shape[1])]


def rappor(x, n, rng, p):
    b = bloom(_one_value(x), int(p["hashes"]), int(p["bits"]))
    prr = _permanent(b, n, rng, float(p["f"]))
    v = rng.random(prr.shape)
    out = np.where(prr == 1.0, v < float(p["q"]), v < float(p["p"])).astype(np.float64)
    return _columns(out)


def one_time_rappor(x, n, rng, p):
    b = bloom(_one_value(x), int(p["hashes"]), int(p["bits"]))
    return _columns(_permanent(b, n, rng, float(p["f"])))


MECHANISMS = {"rappor": rappor, "one_time_rappor": one_time_rappor}
