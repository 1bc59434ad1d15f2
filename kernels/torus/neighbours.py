"""Verlet neighbour list for the contact pairs (spec §7; used above ``NBL_THRESHOLD`` bodies).

CSR layout: the partners of body i are ``nb_list[nb_start[i]:nb_start[i+1]]``, all ``j > i``
in ascending order, i.e. the all-pairs loop order restricted to pairs closer than
``D_max + skin``. The list is rebuilt (via a cell grid, O(n)) whenever some body moved more
than ``skin/2`` since the last build, so it always contains every active contact and the
contact forces are bitwise identical to the all-pairs loop.
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels._jit import kjit

#: Bodies above which the driver uses the neighbour list by default.
NBL_THRESHOLD = 256
#: Pair capacity per body of the CSR list (overflow → all-pairs for that evaluation).
PAIRS_PER_BODY = 48


@kjit
def needs_rebuild(x, xref, half_skin):
    """True if some body moved farther than ``half_skin`` from its position at the last build."""
    lim = half_skin * half_skin
    for i in range(x.shape[0]):
        d0 = x[i, 0] - xref[i, 0]
        d1 = x[i, 1] - xref[i, 1]
        d2 = x[i, 2] - xref[i, 2]
        if not d0 * d0 + d1 * d1 + d2 * d2 <= lim:
            return True
    return False


@kjit
def build(x, rc, xref, head, nxt, cell, nb_start, nb_list, tmp):
    """Rebuild the list with cutoff ``rc``; returns 0, or 1 on overflow / non-finite x.

    Workspace (allocated once per trajectory): ``head`` (ncap,), ``nxt`` (n,), ``cell`` (n,)
    int64, ``tmp`` (n,) int64. ``xref`` receives the build positions.
    """
    n = x.shape[0]
    lo0 = np.inf
    lo1 = np.inf
    lo2 = np.inf
    hi0 = -np.inf
    hi1 = -np.inf
    hi2 = -np.inf
    for i in range(n):
        if not (np.isfinite(x[i, 0]) and np.isfinite(x[i, 1]) and np.isfinite(x[i, 2])):
            return 1
        lo0 = min(lo0, x[i, 0])
        lo1 = min(lo1, x[i, 1])
        lo2 = min(lo2, x[i, 2])
        hi0 = max(hi0, x[i, 0])
        hi1 = max(hi1, x[i, 1])
        hi2 = max(hi2, x[i, 2])
    ncap = head.shape[0]
    # cell edge ≥ rc; enlarge uniformly until the grid fits into ``ncap`` cells
    ext = max(hi0 - lo0, max(hi1 - lo1, hi2 - lo2))
    cs = max(rc, ext / ncap)
    while True:
        m0 = int((hi0 - lo0) / cs) + 1
        m1 = int((hi1 - lo1) / cs) + 1
        m2 = int((hi2 - lo2) / cs) + 1
        if m0 * m1 * m2 <= ncap:
            break
        cs *= 1.5
    for c in range(m0 * m1 * m2):
        head[c] = -1
    # insert in descending order so each chain lists bodies in ascending order
    for i in range(n - 1, -1, -1):
        c0 = min(int((x[i, 0] - lo0) / cs), m0 - 1)
        c1 = min(int((x[i, 1] - lo1) / cs), m1 - 1)
        c2 = min(int((x[i, 2] - lo2) / cs), m2 - 1)
        c = (c0 * m1 + c1) * m2 + c2
        cell[i] = c
        nxt[i] = head[c]
        head[c] = i
    rc2 = rc * rc
    cap = nb_list.shape[0]
    npair = 0
    for i in range(n):
        nb_start[i] = npair
        c = cell[i]
        c2i = c % m2
        c1i = (c // m2) % m1
        c0i = c // (m1 * m2)
        cnt = 0
        for a in range(max(c0i - 1, 0), min(c0i + 2, m0)):
            for b in range(max(c1i - 1, 0), min(c1i + 2, m1)):
                for e in range(max(c2i - 1, 0), min(c2i + 2, m2)):
                    j = head[(a * m1 + b) * m2 + e]
                    while j >= 0:
                        if j > i:
                            d0 = x[i, 0] - x[j, 0]
                            d1 = x[i, 1] - x[j, 1]
                            d2 = x[i, 2] - x[j, 2]
                            if d0 * d0 + d1 * d1 + d2 * d2 < rc2:
                                tmp[cnt] = j
                                cnt += 1
                        j = nxt[j]
        # insertion sort: ascending j (the all-pairs order)
        for u in range(1, cnt):
            v = tmp[u]
            w = u - 1
            while w >= 0 and tmp[w] > v:
                tmp[w + 1] = tmp[w]
                w -= 1
            tmp[w + 1] = v
        if npair + cnt > cap:
            return 1
        for u in range(cnt):
            nb_list[npair + u] = tmp[u]
        npair += cnt
    nb_start[n] = npair
    for i in range(n):
        xref[i, 0] = x[i, 0]
        xref[i, 1] = x[i, 1]
        xref[i, 2] = x[i, 2]
    return 0
