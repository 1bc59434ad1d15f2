"""Two quadrotors carrying a point mass (paper 001 §6, spec heavy_top_quadrotors §3–6), family ``quad``."""
