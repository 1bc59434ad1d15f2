"""Kinetic-energy map on the icosphere (spec sphere.md §3.6, the paper's Fig. 7).

Pure functions of ``(q, w)`` arrays (n, 3): molecule i has KE_i = ½ m_i |ω_i × q_i|².
Mesh: level-4 icosphere (2562 vertices, 5120 faces). Molecule i lies in face (a, b, c) if
``q·(a×b) ≥ −1e-12``, ``q·(b×c) ≥ −1e-12``, ``q·(c×a) ≥ −1e-12`` and ``q·(a+b+c) > 0``
(closed triangles: a molecule on an edge or vertex belongs to every incident face).
Patch(f) = f plus every face sharing at least one vertex with f (13 faces, 12 next to a
degree-5 vertex). ``ke_face[f]`` = mean KE over the union of the molecules in Patch(f);
NaN if the patch holds none.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import scipy.sparse as sp

FACE_TOL = 1e-12


@lru_cache(maxsize=4)
def mesh(level: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (V, 3), faces (F, 3) int) of the icosphere of ``level`` (spec §3.2)."""
    from geosweep.kernels.systems.icosphere import icosphere

    verts, faces = icosphere(level)
    return np.asarray(verts, dtype=np.float64), np.asarray(faces, dtype=np.int64)


def patch_matrix(faces: np.ndarray, n_vertices: int) -> sp.csr_matrix:
    """Boolean (F, F) sparse matrix: ``P[f, g]`` iff g shares at least one vertex with f (f included)."""
    nf = len(faces)
    vf = sp.csr_matrix((np.ones(3 * nf), (faces.ravel(), np.repeat(np.arange(nf), 3))), shape=(n_vertices, nf))
    return ((vf.T @ vf) > 0).astype(np.float64).tocsr()


def face_membership(q: np.ndarray, verts: np.ndarray, faces: np.ndarray, tol: float = FACE_TOL) -> sp.csr_matrix:
    """Boolean (n, F) sparse matrix: molecule i lies in the closed face f (test above)."""
    a, b, c = (verts[faces[:, k]] for k in range(3))
    nab, nbc, nca, s = np.cross(a, b), np.cross(b, c), np.cross(c, a), a + b + c
    rows, cols = [], []
    for start in range(0, len(q), 256):
        qb = q[start : start + 256]
        inside = (qb @ nab.T >= -tol) & (qb @ nbc.T >= -tol) & (qb @ nca.T >= -tol) & (qb @ s.T > 0)
        i, f = np.nonzero(inside)
        rows.append(i + start)
        cols.append(f)
    r, f = np.concatenate(rows), np.concatenate(cols)
    return sp.csr_matrix((np.ones(len(r)), (r, f)), shape=(len(q), len(faces)))


def kinetic_energy(q: np.ndarray, w: np.ndarray, m: float | np.ndarray = 1.0) -> np.ndarray:
    """KE_i = ½ m_i |ω_i × q_i|² for (n, 3) arrays (energy units of the system)."""
    v = np.cross(w, q)
    return 0.5 * np.asarray(m) * np.einsum("ij,ij->i", v, v)


def ke_face(q: np.ndarray, w: np.ndarray, m: float | np.ndarray = 1.0, level: int = 4) -> np.ndarray:
    """Per-face mean kinetic energy over the vertex-sharing patch (F,), NaN for empty patches.

    Rows of ``q``/``w`` with a non-finite entry (e.g. padding) are ignored.
    """
    q = np.asarray(q, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    good = np.isfinite(q).all(axis=1) & np.isfinite(w).all(axis=1)
    verts, faces = mesh(level)
    ke = kinetic_energy(q[good], w[good], m if np.ndim(m) == 0 else np.asarray(m)[good])
    inside = face_membership(q[good], verts, faces)
    in_patch = ((inside @ patch_matrix(faces, len(verts))) > 0).astype(np.float64)
    total = in_patch.T @ ke
    count = np.asarray(in_patch.sum(axis=0)).ravel()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / count, np.nan)


def _view_basis(direction: tuple[float, float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = np.asarray(direction, dtype=np.float64)
    d /= np.linalg.norm(d)
    helper = np.array([0.0, 1.0, 0.0]) if abs(d[1]) < 0.9 else np.array([1.0, 0.0, 0.0])
    e1 = np.cross(helper, d)
    e1 /= np.linalg.norm(e1)
    return d, e1, np.cross(d, e1)


def plot_face_field(
    ax,
    values: np.ndarray,
    *,
    level: int = 4,
    view=(0.0, 0.0, 1.0),
    cmap: str = "jet",
    vmin: float | None = None,
    vmax: float | None = None,
    nan_color: str = "0.85",
):
    """Orthographic view of a per-face field on the icosphere, seen from ``view`` (a direction).

    Only faces on the visible hemisphere are drawn (``PolyCollection``); NaN faces are grey.
    Returns the ``ScalarMappable`` for a colour bar.
    """
    import matplotlib as mpl
    from matplotlib.collections import PolyCollection

    verts, faces = mesh(level)
    d, e1, e2 = _view_basis(view)
    tri = verts[faces]
    visible = tri.mean(axis=1) @ d > 0
    xy = np.stack([tri @ e1, tri @ e2], axis=-1)[visible]
    vals = np.asarray(values, dtype=np.float64)[visible]
    finite = vals[np.isfinite(vals)]
    lo = vmin if vmin is not None else (finite.min() if finite.size else 0.0)
    hi = vmax if vmax is not None else (finite.max() if finite.size else 1.0)
    norm = mpl.colors.Normalize(lo, hi if hi > lo else lo + 1e-300)
    cm = mpl.colormaps[cmap]
    colors = np.where(np.isfinite(vals)[:, None], cm(norm(np.nan_to_num(vals))), mpl.colors.to_rgba(nan_color))
    ax.add_collection(PolyCollection(xy, facecolors=colors, edgecolors="none"))
    ax.set_xlim(-1.02, 1.02)
    ax.set_ylim(-1.02, 1.02)
    ax.set_aspect("equal")
    ax.set_axis_off()
    return mpl.cm.ScalarMappable(norm=norm, cmap=cm)
