"""Geodesic icosphere by repeated midpoint subdivision (deterministic vertex order).

Level L has ``10·4^L + 2`` vertices and ``20·4^L`` faces. The construction order is fixed
(base vertices, base faces, per-face midpoints with an edge cache) so that vertex ``i`` is
the same point on every machine; :data:`SHA256` pins the level-3 and level-4 arrays.
"""

from __future__ import annotations

import hashlib
import math
from functools import lru_cache

import numpy as np

SHA256 = {
    3: "83604a57a881d8c132e07ceee51f64e4d3af26b66b32e1ded316ecabd2b9b896",
    4: "0acac9714067cb1973eac8b55f1ec62376f980c1229f2648a02c078d0750cc71",
}

_PHI = (1.0 + math.sqrt(5.0)) / 2.0
_BASE_VERTICES = [
    (-1, _PHI, 0),
    (1, _PHI, 0),
    (-1, -_PHI, 0),
    (1, -_PHI, 0),
    (0, -1, _PHI),
    (0, 1, _PHI),
    (0, -1, -_PHI),
    (0, 1, -_PHI),
    (_PHI, 0, -1),
    (_PHI, 0, 1),
    (-_PHI, 0, -1),
    (-_PHI, 0, 1),
]
_BASE_FACES = [
    (0, 11, 5),
    (0, 5, 1),
    (0, 1, 7),
    (0, 7, 10),
    (0, 10, 11),
    (1, 5, 9),
    (5, 11, 4),
    (11, 10, 2),
    (10, 7, 6),
    (7, 1, 8),
    (3, 9, 4),
    (3, 4, 2),
    (3, 2, 6),
    (3, 6, 8),
    (3, 8, 9),
    (4, 9, 5),
    (2, 4, 11),
    (6, 2, 10),
    (8, 6, 7),
    (9, 8, 1),
]


def _normalise(x: float, y: float, z: float) -> tuple[float, float, float]:
    r = math.sqrt(x * x + y * y + z * z)
    return (x / r, y / r, z / r)


@lru_cache(maxsize=8)
def _build(level: int) -> tuple[tuple[tuple[float, float, float], ...], tuple[tuple[int, int, int], ...]]:
    verts = [_normalise(*map(float, v)) for v in _BASE_VERTICES]
    faces = list(_BASE_FACES)
    for _ in range(level):
        cache: dict[tuple[int, int], int] = {}

        def mid(i: int, j: int, cache: dict = cache) -> int:
            key = (min(i, j), max(i, j))
            if key not in cache:
                a, b = verts[key[0]], verts[key[1]]
                verts.append(_normalise(a[0] + b[0], a[1] + b[1], a[2] + b[2]))
                cache[key] = len(verts) - 1
            return cache[key]

        new_faces = []
        for a, b, c in faces:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            new_faces += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = new_faces
    return tuple(verts), tuple(faces)


def icosphere(level: int) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (V, 3) float64 on the unit sphere and faces (F, 3) int64 (CCW from outside)."""
    if level < 0:
        raise ValueError("icosphere level must be >= 0")
    verts, faces = _build(level)
    v = np.array(verts, dtype=np.float64)
    if level in SHA256:
        digest = hashlib.sha256(v.astype("<f8").tobytes(order="C")).hexdigest()
        if digest != SHA256[level]:  # pragma: no cover - would mean a platform problem
            raise RuntimeError(f"icosphere level {level}: SHA-256 mismatch ({digest})")
    return v, np.array(faces, dtype=np.int64)


def edges(faces: np.ndarray) -> np.ndarray:
    """Unique undirected edges (E, 2) of a triangle mesh, sorted."""
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    e = np.sort(e, axis=1)
    return np.unique(e, axis=0)
